"""examples/python/ run in quick modes: train_and_classify.py learns (its curve, its accuracy on images read from
the IDX files) and net_surgery.py's convolutional LeNet gives the InnerProduct net's scores, on 28x28 images and in
the corners of a 2x2 mosaic's score map. Skipped where Debian's Fashion-MNIST package is not installed."""

import csv
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import crema

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "python"
DATASET = pathlib.Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
         "t10k-labels-idx1-ubyte.gz")

pytestmark = pytest.mark.skipif(
    not all((DATASET / name).exists() for name in FILES),
    reason=f"Fashion-MNIST is not in {DATASET} (Debian package dataset-fashion-mnist, or set FASHION_MNIST_DIR)")


def run_example(script, *args):
    """Runs an example with this interpreter and this crema; returns its stdout, failing with its stderr."""
    env = dict(os.environ)
    # The crema this test imported, first: the example must run against the same build.
    package_root = str(pathlib.Path(crema.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("GLOG_minloglevel", "1")
    env.setdefault("CREMA_TOOLS_DIR", str(REPO / "build" / "tools"))
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, f"{script} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """train_and_classify.py's quick run: 100 iterations on 5,000 images; its folder and stdout."""
    out = tmp_path_factory.mktemp("train_and_classify")
    stdout = run_example("train_and_classify.py", "--iterations", 100, "--chunk", 10, "--test-every", 50,
                         "--test-batches", 5, "--train-images", 5000, "--test-images", 500, "--classify", 500,
                         "--show", 5, "--out", out)
    return out, stdout


def test_train_and_classify(trained):
    out, stdout = trained
    with open(out / "loss.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [int(row["iteration"]) for row in rows] == list(range(10, 101, 10))
    losses = [float(row["loss"]) for row in rows]
    assert all(math.isfinite(loss) and loss > 0 for loss in losses)
    assert np.mean(losses[-3:]) < losses[0]  # it learns
    scored = {int(row["iteration"]): float(row["test_accuracy"]) for row in rows if row["test_accuracy"]}
    assert sorted(scored) == [50, 100]
    assert scored[100] > 0.5  # chance is 0.1

    results = json.loads((out / "results.json").read_text())
    assert results["classified"] == 500
    assert results["classify_accuracy"] > 0.5
    # The same 500 images (the test LMDB holds the first 500), once through the test net's Data layer and once
    # read from the IDX file into the deploy net: the same answers, but for near ties.
    assert abs(results["classify_accuracy"] - scored[100]) <= 0.01
    assert (out / "lenet_python.caffemodel").exists()
    # Printed: the first images' true and guessed class names with probabilities, then the accuracy.
    lines = [line for line in stdout.splitlines() if line.startswith("test image ")]
    assert len(lines) == 5 and "Ankle boot" in lines[0]  # the first test image is an ankle boot
    assert f"accuracy {results['classify_accuracy']:.4f}" in stdout
    if importlib.util.find_spec("matplotlib"):
        assert (out / "loss.png").exists()
    else:
        assert "apt-get install python3-matplotlib" in stdout and not (out / "loss.png").exists()


def test_net_surgery(trained, tmp_path):
    weights = trained[0] / "lenet_python.caffemodel"
    stdout = run_example("net_surgery.py", "--weights", weights, "--out", tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["converted"] == {"ip1": "ip1-conv", "ip2": "ip2-conv"}
    assert results["max_difference_28"] < 1e-5
    assert results["score_map_shape"] == [10, 8, 8]  # (56 - 28) / 4 + 1 windows a side
    assert results["corner_classes"] == results["tile_classes"]
    assert results["max_difference_corners"] < 1e-5
    assert "score map 8x8" in stdout

    # The saved converted net, loaded afresh, classifies 28x28 images as the original does.
    fcn = crema.Net(results["fcn_prototxt"], crema.TEST, weights=results["fcn_weights"])
    assert fcn.params["ip1-conv"][0].shape == (500, 50, 4, 4) and fcn.params["ip2-conv"][0].shape == (10, 500, 1, 1)
    original = crema.Net(str(REPO / "examples" / "fashion_mnist" / "lenet_deploy.prototxt"), crema.TEST,
                         weights=str(weights))
    np.testing.assert_array_equal(fcn.params["ip1-conv"][0].data.reshape(500, -1), original.params["ip1"][0].data)
    images = np.random.default_rng(5).uniform(size=(8, 1, 28, 28)).astype(np.float32)
    expected = original.forward(data=images)["prob"].copy()
    np.testing.assert_allclose(fcn.forward(data=images)["prob"][:, :, 0, 0], expected, atol=1e-5)


def test_net_surgery_trains_without_weights(tmp_path):
    stdout = run_example("net_surgery.py", "--iterations", 20, "--train-images", 1000, "--out", tmp_path)
    assert "training LeNet for 20 iterations" in stdout
    results = json.loads((tmp_path / "results.json").read_text())
    assert pathlib.Path(results["weights"]).exists()
    assert results["max_difference_28"] < 1e-5 and results["corner_classes"] == results["tile_classes"]
