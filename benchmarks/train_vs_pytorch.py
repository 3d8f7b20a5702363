#!/usr/bin/python3
"""A whole training run, crema against the same loop in PyTorch on the CPU, side by side in one run.

crema runs `crema train` on the Fashion-MNIST LeNet example (examples/fashion_mnist/lenet_solver.prototxt,
cut to --iterations, no snapshots). PyTorch runs the same training written as a plain loop: the same layers,
Xavier weights and zero biases, SGD with momentum 0.9, weight decay 5e-4, biases at twice the learning rate,
Caffe's "inv" schedule, batches of 64 in the order of the training set, and the same test passes (at the
start and every 500 iterations, 100 batches of 100 test images). PyTorch reads the images from the IDX files
into memory first; crema reads its LMDB while training, as a user runs it. Each run is timed whole, start-up
included. Rounds alternate between the peers; each peer runs at each of its thread settings, and the best
setting of each is compared. Prints the CPU, the settings, each run's final test accuracy, and a Markdown
table.

  benchmarks/train_vs_pytorch.py [--rounds 3] [--iterations 2000] [--crema build/tools/crema]

Needs Debian's python3-torch and dataset-fashion-mnist, and the LMDBs (`make data`); run with /usr/bin/python3
from anywhere.
"""

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLVER = "examples/fashion_mnist/lenet_solver.prototxt"
DATASET = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
TEST_INTERVAL, TEST_ITER, TEST_BATCH, TRAIN_BATCH = 500, 100, 100, 64
BASE_LR, MOMENTUM, WEIGHT_DECAY, GAMMA, POWER = 0.01, 0.9, 0.0005, 0.0001, 0.75


def read_idx(name):
    """An IDX file of the data set as a flat bytes object and its dimensions."""
    with gzip.open(os.path.join(DATASET, name), "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return data[4 + 4 * dims:], shape


def torch_worker(threads, iterations):
    """The training loop in PyTorch; prints its final test accuracy (the wall time is the caller's)."""
    import torch
    import torch.nn as nn

    torch.set_num_threads(threads)
    torch.manual_seed(1701)

    def tensors(split):
        images, shape = read_idx("%s-images-idx3-ubyte.gz" % split)
        labels, _ = read_idx("%s-labels-idx1-ubyte.gz" % split)
        x = torch.frombuffer(bytearray(images), dtype=torch.uint8).reshape(shape[0], 1, shape[1], shape[2])
        return x.float() * 0.00390625, torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()

    train_x, train_y = tensors("train")
    test_x, test_y = tensors("t10k")
    model = nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2, ceil_mode=True),
        nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2, ceil_mode=True),
        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(inplace=True), nn.Linear(500, 10))
    weights, biases = [], []
    for module in model:
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            fan_in = module.weight[0].numel()
            bound = (3.0 / fan_in) ** 0.5  # Caffe's xavier filler: uniform, variance 1 / fan_in
            nn.init.uniform_(module.weight, -bound, bound)
            nn.init.zeros_(module.bias)
            weights.append(module.weight)
            biases.append(module.bias)
    optimizer = torch.optim.SGD([{"params": weights, "lr": BASE_LR}, {"params": biases, "lr": 2 * BASE_LR}],
                                lr=BASE_LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: (1 + GAMMA * it) ** -POWER)
    loss_fn = nn.CrossEntropyLoss()

    def test():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(TEST_ITER):
                start = (i * TEST_BATCH) % len(test_x)
                out = model(test_x[start:start + TEST_BATCH])
                correct += (out.argmax(1) == test_y[start:start + TEST_BATCH]).sum().item()
        model.train()
        return correct / (TEST_ITER * TEST_BATCH)

    accuracy = None
    position = 0
    for it in range(iterations + 1):
        if it % TEST_INTERVAL == 0 or it == iterations:
            accuracy = test()
        if it == iterations:
            break
        if position + TRAIN_BATCH > len(train_x):
            position = 0
        x, y = train_x[position:position + TRAIN_BATCH], train_y[position:position + TRAIN_BATCH]
        position += TRAIN_BATCH
        optimizer.zero_grad(set_to_none=False)
        loss_fn(model(x), y).backward()
        optimizer.step()
        schedule.step()
    print(json.dumps({"accuracy": accuracy}))


def run_torch(setting, iterations):
    threads, openblas = setting
    env = dict(os.environ)
    if openblas:
        env["OPENBLAS_NUM_THREADS"] = str(openblas)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-worker", str(threads),
                          str(iterations)], env=env, capture_output=True, text=True, check=True).stdout
    seconds = time.perf_counter() - start
    return seconds, json.loads(out.strip().splitlines()[-1])["accuracy"]


# crema's thread settings: the environment each adds.
CREMA_SETTINGS = {
    "default threads": {},
    "OPENBLAS_NUM_THREADS=1": {"OPENBLAS_NUM_THREADS": "1"},
    "1 thread": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
}


def run_crema(crema, setting, iterations, workdir):
    text = open(os.path.join(ROOT, SOLVER)).read()
    text = re.sub(r"(?m)^max_iter:.*$", "max_iter: %d" % iterations, text)
    text = re.sub(r"(?m)^snapshot:.*$", "snapshot: 0", text)
    text = re.sub(r"(?m)^snapshot_prefix:.*$", 'snapshot_prefix: "%s/lenet"' % workdir, text)
    solver = os.path.join(workdir, "solver.prototxt")
    with open(solver, "w") as f:
        f.write(text + "\nsnapshot_after_train: false\n")
    env = dict(os.environ, GLOG_logtostderr="1")
    env.update(CREMA_SETTINGS[setting])
    start = time.perf_counter()
    log = subprocess.run([crema, "train", "--solver=" + solver], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True).stderr
    seconds = time.perf_counter() - start
    accuracy = float(re.findall(r"Test net output #\d+: accuracy = ([0-9.]+)", log)[-1])
    return seconds, accuracy


def cpu_model(crema):
    """The CPU line `crema time` prints (family, model, Zen generation, vector width)."""
    net = os.path.join(ROOT, "examples/fashion_mnist/lenet_deploy.prototxt")
    log = subprocess.run([crema, "time", "--model=" + net, "--iterations=1"], capture_output=True, text=True,
                         env=dict(os.environ, GLOG_logtostderr="1"), check=True).stderr
    return re.search(r"CPU: (.*)", log).group(1).strip(), re.search(r"BLAS: (.*)", log).group(1).strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    parser.add_argument("--torch-worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        torch_worker(int(args.torch_worker[0]), int(args.torch_worker[1]))
        return

    cores = os.cpu_count()
    crema_settings = list(CREMA_SETTINGS)
    torch_settings = [(cores, None), (1, None), (cores, 1)]
    results = {}  # (peer, setting) -> [(seconds, accuracy)]
    with tempfile.TemporaryDirectory() as workdir:
        for round_index in range(args.rounds):
            for setting in crema_settings:
                results.setdefault(("crema", setting), []).append(
                    run_crema(args.crema, setting, args.iterations, workdir))
            for setting in torch_settings:
                results.setdefault(("pytorch", setting), []).append(run_torch(setting, args.iterations))
            print("round %d of %d done" % (round_index + 1, args.rounds), file=sys.stderr)

    import torch

    cpu, blas = cpu_model(args.crema)
    print("CPU: %s" % cpu)
    print("crema: %s; BLAS %s" % (args.crema, blas))
    print("PyTorch %s (%s)" % (torch.__version__, "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN"))
    print("LeNet on Fashion-MNIST, %d iterations of batch 64 with %d test passes of %d x %d images; %d rounds, "
          "alternating; per setting the median wall time of the rounds (s) and the last round's final test "
          "accuracy\n" % (args.iterations, args.iterations // TEST_INTERVAL + 1, TEST_ITER, TEST_BATCH, args.rounds))
    describe_torch = lambda s: "%d threads%s" % (s[0], ", OPENBLAS_NUM_THREADS=1" if s[1] else "")
    crema_s = {s: statistics.median(r[0] for r in results[("crema", s)]) for s in crema_settings}
    torch_s = {s: statistics.median(r[0] for r in results[("pytorch", s)]) for s in torch_settings}
    accuracy = lambda peer, s: results[(peer, s)][-1][1]
    print("| peer | each setting: wall time (final test accuracy) | best |")
    print("|---|---|---|")
    print("| crema | %s | %.1f s |" % (" / ".join("%.1f s (%.4f) %s" % (t, accuracy("crema", s), s)
                                                 for s, t in crema_s.items()), min(crema_s.values())))
    print("| PyTorch | %s | %.1f s |" % (" / ".join("%.1f s (%.4f) %s" % (t, accuracy("pytorch", s), describe_torch(s))
                                                   for s, t in torch_s.items()), min(torch_s.values())))
    print("\ncrema's speed: %.2fx PyTorch's" % (min(torch_s.values()) / min(crema_s.values())))


if __name__ == "__main__":
    main()
