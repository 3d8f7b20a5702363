#!/usr/bin/python3
"""crema against PyTorch on the CPU, side by side in one run.

For each benchmark net, the same architecture runs forward+backward and forward only in crema (`crema time`
on the net's deploy prototxt with force_backward) and in PyTorch (the same layers written as a torch module,
the input requiring a gradient as crema's forced backward computes one). Rounds alternate between the peers so
both see the same load from other tenants; each peer runs at each of its thread settings, and the best setting
of each is compared. Prints the CPU, the settings and a Markdown table of per-net times and ratios.

  benchmarks/cpu_vs_pytorch.py [--rounds 5] [--iterations 20] [--nets lenet,cifar10_quick,caffenet]
                               [--crema build/tools/crema]

Needs Debian's python3-torch (apt-get install python3-torch); run with /usr/bin/python3.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (deploy prototxt, batch, input shape without the batch)
NETS = {
    "lenet": ("examples/fashion_mnist/lenet_deploy.prototxt", 64, (1, 28, 28)),
    "cifar10_quick": ("examples/cifar10/cifar10_quick_deploy.prototxt", 100, (3, 32, 32)),
    "caffenet": ("examples/imagenet/caffenet_deploy.prototxt", 10, (3, 227, 227)),
}


def torch_model(name):
    """The benchmark net as a torch module, layer for layer as in its prototxt (Caffe pools round up)."""
    import torch.nn as nn

    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Flatten(), nn.Linear(800, 500), nn.ReLU(inplace=True), nn.Linear(500, 10), nn.Softmax(dim=1))
    if name == "cifar10_quick":
        return nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(inplace=True), nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(inplace=True), nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Flatten(), nn.Linear(64 * 4 * 4, 64), nn.Linear(64, 10), nn.Softmax(dim=1))
    if name == "caffenet":
        lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)
        return nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True), lrn(),
            nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            lrn(),
            nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Flatten(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(), nn.Linear(4096, 1000), nn.Softmax(dim=1))
    raise ValueError(name)


def torch_worker(name, threads, iterations):
    """Runs in its own process (thread settings are fixed at import): prints mean ms forward+backward, forward."""
    import time

    import torch

    torch.set_num_threads(threads)
    _, batch, shape = NETS[name]
    model = torch_model(name).train()  # crema time runs the TRAIN phase (Dropout active)
    x = torch.randn(batch, *shape, requires_grad=True)

    def step(backward):
        out = model(x)
        if backward:
            model.zero_grad(set_to_none=False)
            x.grad = None
            out.backward(torch.ones_like(out))

    for backward in (True, False):
        step(backward)  # untimed, as crema time's first pass
    times = {}
    for key, backward in (("forward_backward", True), ("forward", False)):
        start = time.perf_counter()
        for _ in range(iterations):
            step(backward)
        times[key] = (time.perf_counter() - start) * 1000 / iterations
    print(json.dumps(times))


def run_torch(name, setting, iterations):
    threads, openblas = setting
    env = dict(os.environ)
    if openblas:
        env["OPENBLAS_NUM_THREADS"] = str(openblas)
    out = subprocess.run([sys.executable, __file__, "--torch-worker", name, str(threads), str(iterations)],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_crema(crema, name, openblas, iterations, workdir):
    prototxt, batch, _ = NETS[name]
    text = open(os.path.join(ROOT, prototxt)).read()
    text = re.sub(r"dim: \d+", "dim: %d" % batch, text, count=1)
    model = os.path.join(workdir, name + ".prototxt")
    with open(model, "w") as f:
        f.write("force_backward: true\n" + text)
    env = dict(os.environ, GLOG_logtostderr="1")
    if openblas:
        env["OPENBLAS_NUM_THREADS"] = str(openblas)
    log = subprocess.run([crema, "time", "--model=" + model, "--iterations=%d" % iterations], env=env,
                         capture_output=True, text=True, check=True).stderr
    value = lambda label: float(re.search(label + r": ([0-9.e+-]+) ms", log).group(1))
    info = {k: re.search(k + r": (.*)", log).group(1).strip() for k in ("CPU", "BLAS", "GEMM peak")}
    return {"forward_backward": value("Average Forward-Backward"), "forward": value("Average Forward pass")}, info


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    parser.add_argument("--torch-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        torch_worker(args.torch_worker[0], int(args.torch_worker[1]), int(args.torch_worker[2]))
        return

    cores = os.cpu_count()
    # Each peer's settings: crema with OpenBLAS's default threads (one per core) and with one; PyTorch with
    # one thread per core, one thread, and one thread per core but a single-threaded OpenBLAS.
    crema_settings = [None, 1]
    torch_settings = [(cores, None), (1, None), (cores, 1)]
    results = {}  # (peer, net, setting) -> {"forward_backward": [...], "forward": [...]}
    info = None
    with tempfile.TemporaryDirectory() as workdir:
        for round_index in range(args.rounds):
            for name in args.nets.split(","):
                for setting in crema_settings:
                    times, info = run_crema(args.crema, name, setting, args.iterations, workdir)
                    for key, ms in times.items():
                        results.setdefault(("crema", name, setting), {}).setdefault(key, []).append(ms)
                for setting in torch_settings:
                    times = run_torch(name, setting, args.iterations)
                    for key, ms in times.items():
                        results.setdefault(("pytorch", name, setting), {}).setdefault(key, []).append(ms)
            print("round %d of %d done" % (round_index + 1, args.rounds), file=sys.stderr)

    import torch

    print("CPU: %s" % info["CPU"])
    print("crema: %s; BLAS %s; GEMM peak %s" % (args.crema, info["BLAS"], info["GEMM peak"]))
    print("PyTorch %s (%s)" % (torch.__version__, "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN"))
    print("%d rounds of %d iterations each, alternating; per setting the median of the rounds, ms per batch\n"
          % (args.rounds, args.iterations))
    describe = {None: "default threads", 1: "OPENBLAS_NUM_THREADS=1"}
    describe_torch = lambda s: "%d threads%s" % (s[0], ", OPENBLAS_NUM_THREADS=1" if s[1] else "")
    print("| net (batch) | pass | crema, each setting | PyTorch, each setting | crema best | PyTorch best | "
          "crema's speed |")
    print("|---|---|---|---|---|---|---|")
    for name in args.nets.split(","):
        for key, label in (("forward_backward", "forward+backward"), ("forward", "forward")):
            crema_ms = {s: statistics.median(results[("crema", name, s)][key]) for s in crema_settings}
            torch_ms = {s: statistics.median(results[("pytorch", name, s)][key]) for s in torch_settings}
            best_crema, best_torch = min(crema_ms.values()), min(torch_ms.values())
            print("| %s (%d) | %s | %s | %s | %.2f | %.2f | %.2fx |" % (
                name, NETS[name][1], label,
                " / ".join("%.2f (%s)" % (ms, describe[s]) for s, ms in crema_ms.items()),
                " / ".join("%.2f (%s)" % (ms, describe_torch(s)) for s, ms in torch_ms.items()),
                best_crema, best_torch, best_torch / best_crema))


if __name__ == "__main__":
    main()
