"""Fashion-MNIST for the Python examples: the IDX files read with numpy, the LMDBs the LeNet solver trains from, and
that solver rewritten to read them and to write into an output folder (examples/python/README.md).

Only numpy and crema, no protobuf for Python, so the prototxts are edited as text.
"""

import gzip
import os
import pathlib
import re
import subprocess

import numpy as np

import crema

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "examples" / "fashion_mnist"
DEPLOY = EXAMPLE_DIR / "lenet_deploy.prototxt"
SOLVER = EXAMPLE_DIR / "lenet_solver.prototxt"

# The Data layers scale by 1/256 in training; the deploy net expects its input already scaled the same way.
SCALE = 1.0 / 256

CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot")

FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def dataset_dir():
    """Debian's dataset-fashion-mnist puts the files here; FASHION_MNIST_DIR overrides it, as for the C++ tests."""
    return pathlib.Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))


def missing_files():
    folder = dataset_dir()
    return [str(folder / name) for pair in FILES.values() for name in pair if not (folder / name).exists()]


def check_dataset():
    missing = missing_files()
    if missing:
        raise SystemExit(f"Fashion-MNIST is missing ({', '.join(missing)}): install Debian's dataset-fashion-mnist "
                         "package (scripts/install_deps.sh), or set FASHION_MNIST_DIR to a folder with the IDX files")


def read_idx(path, count=None):
    """An IDX file (gzipped or not) as a numpy array of its own shape; only its first `count` items if given."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as stream:
        header = stream.read(4)
        if len(header) != 4 or header[0] != 0 or header[1] != 0 or header[2] != 0x08:
            raise ValueError(f"{path}: not an IDX file of unsigned bytes")
        dims = [int.from_bytes(stream.read(4), "big") for _ in range(header[3])]
        if count is not None:
            dims[0] = min(dims[0], count)
        size = int(np.prod(dims))
        values = np.frombuffer(stream.read(size), dtype=np.uint8)
    if values.size != size:
        raise ValueError(f"{path}: truncated ({values.size} of {size} bytes)")
    return values.reshape(dims)


def load(split, count=None):
    """(images uint8 N x 28 x 28, labels int N) of the 'train' or 'test' split."""
    images, labels = (dataset_dir() / name for name in FILES[split])
    return read_idx(images, count), read_idx(labels, count).astype(np.int64)


def as_input(images):
    """uint8 N x 28 x 28 images -> the float32 N x 1 x H x W blob the deploy net reads."""
    return (images.astype(np.float32) * SCALE)[:, None, :, :]


def tools_dir():
    return pathlib.Path(os.environ.get("CREMA_TOOLS_DIR", REPO / "build" / "tools"))


def make_lmdbs(out_dir, train_count=None, test_count=None):
    """(train, test) LMDB paths: those of `make data` when they exist and the whole sets are wanted, else ones
    converted here into out_dir by the build's convert_mnist (--limit keeps the quick runs quick)."""
    made = [REPO / "data" / "fashion_mnist" / f"fashion_mnist_{split}_lmdb" for split in ("train", "test")]
    if train_count is None and test_count is None and all(path.exists() for path in made):
        return made
    check_dataset()
    converter = tools_dir() / "convert_mnist"
    if not converter.exists():
        raise SystemExit(f"{converter} not found: build crema first (make), or set CREMA_TOOLS_DIR")
    paths = []
    for split, count in (("train", train_count), ("test", test_count)):
        db = pathlib.Path(out_dir) / f"fashion_mnist_{split}_{count or 'all'}_lmdb"
        if not db.exists():
            images, labels = (dataset_dir() / name for name in FILES[split])
            command = [str(converter), str(images), str(labels), str(db)]
            if count:
                command.append(f"--limit={count}")
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise SystemExit(f"convert_mnist failed:\n{result.stderr[-2000:]}")
        paths.append(db)
    return paths


def _set_fields(text, **fields):
    """The solver text with each top-level `key: value` of `fields` replaced (or added)."""
    for key, value in fields.items():
        text = re.sub(rf"(?m)^{key}:.*\n?", "", text)
        text += f"\n{key}: {value}"
    return text + "\n"


def write_solver(out_dir, train_lmdb, test_lmdb, max_iter, test_batches=100):
    """The LeNet solver of examples/fashion_mnist, reading the given LMDBs and snapshotting into out_dir.

    The solver does not test or snapshot on its own schedule: the scripts score the test net themselves between
    steps and save the weights they want."""
    out_dir = pathlib.Path(out_dir)
    solver_text = SOLVER.read_text()
    net_name = re.search(r'(?m)^net:\s*"([^"]+)"', solver_text).group(1)
    net_text = (REPO / net_name).read_text()
    net_text = net_text.replace('"data/fashion_mnist/fashion_mnist_train_lmdb"', f'"{train_lmdb}"')
    net_text = net_text.replace('"data/fashion_mnist/fashion_mnist_test_lmdb"', f'"{test_lmdb}"')
    net_path = out_dir / "lenet_train_test.prototxt"
    net_path.write_text(net_text)
    solver_text = _set_fields(solver_text, net=f'"{net_path}"', max_iter=max_iter, test_iter=test_batches,
                              test_interval=max_iter + 1, test_initialization="false", display=0, snapshot=0,
                              snapshot_after_train="false", snapshot_prefix=f'"{out_dir / "lenet"}"')
    solver_path = out_dir / "lenet_solver.prototxt"
    solver_path.write_text(solver_text)
    return solver_path


def score(solver, batches):
    """Mean accuracy of the solver's test net over `batches` batches (its Data layer goes on where it stopped)."""
    net = solver.test_nets[0]
    return float(np.mean([float(net.forward()["accuracy"]) for _ in range(batches)]))


def train_lenet(out_dir, iterations, train_count=None, test_count=None):
    """Trains LeNet for `iterations` batches from Python and saves the weights; returns their path."""
    train_db, test_db = make_lmdbs(out_dir, train_count, test_count)
    solver = crema.get_solver(str(write_solver(out_dir, train_db, test_db, iterations)))
    solver.step(iterations)
    weights = pathlib.Path(out_dir) / f"lenet_python_iter_{iterations}.caffemodel"
    solver.net.save(str(weights))
    return weights
