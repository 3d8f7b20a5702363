#!/usr/bin/python3
"""crema against PyTorch and OpenCV's dnn module on the CPU, side by side in one run.

For each benchmark net, the same architecture runs forward+backward and forward only in crema (`crema time`
on the net's deploy prototxt with force_backward) and in PyTorch (the prototxt's layers translated to a torch
module by benchmarks/caffe_nets.py, the input requiring a gradient as crema's forced backward computes one),
and forward only in OpenCV's dnn module (the same prototxt, with a .caffemodel of the torch module's weights).
Rounds alternate between the peers so all see the same load from other tenants; each peer runs at each of its
thread settings, and the best setting of each is compared. Prints the CPU, the settings and a Markdown table
of per-net times and ratios.

  benchmarks/cpu_vs_pytorch.py [--rounds 5] [--iterations 20] [--nets lenet,cifar10_quick,caffenet,googlenet]
                               [--crema build/tools/crema] [--no-opencv]

Needs Debian's python3-torch, python3-opencv and python3-protobuf; run with /usr/bin/python3.
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_nets  # noqa: E402

# name -> (deploy prototxt, batch)
NETS = {
    "lenet": ("examples/fashion_mnist/lenet_deploy.prototxt", 64),
    "cifar10_quick": ("examples/cifar10/cifar10_quick_deploy.prototxt", 100),
    "caffenet": ("examples/imagenet/caffenet_deploy.prototxt", 10),
    "googlenet": ("examples/imagenet/googlenet_deploy.prototxt", 10),
    "resnet50": ("examples/imagenet/resnet50_deploy.prototxt", 8),
}


def torch_model(name, device="cpu"):
    """The net as a PyTorch module on `device` in the TRAIN phase, as crema time runs it (Dropout active), and its
    inputs by blob name: random, each requiring a gradient as crema's forced backward computes one."""
    import torch

    prototxt, batch = NETS[name]
    net = caffe_nets.read_net(os.path.join(ROOT, prototxt), batch)
    model = caffe_nets.torch_net(net).to(device).train()
    inputs = {blob: torch.randn(*shape, device=device, requires_grad=True)
              for blob, shape in caffe_nets.input_shapes(net).items()}
    return model, inputs


def torch_step(model, inputs, backward):
    """One forward pass of torch_model's module, and with `backward` the backward pass from all-ones output
    gradients (the parameters' gradients zeroed first, the inputs' dropped)."""
    import torch

    outs = model(**inputs)
    if backward:
        model.zero_grad(set_to_none=False)
        for x in inputs.values():
            x.grad = None
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])


def torch_worker(name, threads, iterations):
    """Runs in its own process (thread settings are fixed at import): prints mean ms forward+backward, forward."""
    import time

    import torch

    torch.set_num_threads(threads)
    model, inputs = torch_model(name)
    step = lambda backward: torch_step(model, inputs, backward)

    for backward in (True, False):
        step(backward)  # untimed, as crema time's first pass
    times = {}
    for key, backward in (("forward_backward", True), ("forward", False)):
        start = time.perf_counter()
        for _ in range(iterations):
            step(backward)
        times[key] = (time.perf_counter() - start) * 1000 / iterations
    print(json.dumps(times))


def opencv_worker(name, threads, iterations, caffemodel):
    """OpenCV's dnn module (its default backend, on the CPU) forward over the prototxt and `caffemodel`."""
    import time

    import cv2
    import numpy

    cv2.setNumThreads(threads)
    prototxt, batch = NETS[name]
    net = caffe_nets.read_net(os.path.join(ROOT, prototxt), batch)
    dnn = cv2.dnn.readNetFromCaffe(os.path.join(ROOT, prototxt), caffemodel)
    for blob, shape in caffe_nets.input_shapes(net).items():
        dnn.setInput(numpy.random.default_rng(1).standard_normal(shape, dtype=numpy.float32), blob)
    dnn.forward()  # untimed: OpenCV sets its layers up on the first pass
    start = time.perf_counter()
    for _ in range(iterations):
        dnn.forward()
    print(json.dumps({"forward": (time.perf_counter() - start) * 1000 / iterations}))


def write_weights(name, workdir):
    """A .caffemodel of the net with PyTorch's initial weights, for OpenCV."""
    prototxt, batch = NETS[name]
    net = caffe_nets.read_net(os.path.join(ROOT, prototxt), batch)
    path = os.path.join(workdir, name + ".caffemodel")
    caffe_nets.write_caffemodel(net, caffe_nets.torch_net(net), path)
    return path


def run_worker(args, env_threads):
    env = dict(os.environ)
    if env_threads:
        env["OPENBLAS_NUM_THREADS"] = str(env_threads)
    out = subprocess.run([sys.executable, os.path.abspath(__file__)] + args, env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch(name, setting, iterations):
    threads, openblas = setting
    return run_worker(["--torch-worker", name, str(threads), str(iterations)], openblas)


def run_opencv(name, threads, iterations, caffemodel):
    return run_worker(["--opencv-worker", name, str(threads), str(iterations), caffemodel], None)


# crema's thread settings: the environment each adds.
CREMA_SETTINGS = {
    "default threads": {},
    "OPENBLAS_NUM_THREADS=1": {"OPENBLAS_NUM_THREADS": "1"},
    "1 thread": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
}


def write_deploy(name, workdir):
    """The net's deploy prototxt at its benchmark batch with force_backward, written to `workdir`: its path."""
    prototxt, batch = NETS[name]
    text = open(os.path.join(ROOT, prototxt)).read()
    text = re.sub(r"dim: \d+", "dim: %d" % batch, text, count=1)
    model = os.path.join(workdir, name + ".prototxt")
    with open(model, "w") as f:
        f.write("force_backward: true\n" + text)
    return model


def crema_ms(log, label):
    """The milliseconds of a `crema time` log line `LABEL: X ms.` (Average Forward pass, Average
    Forward-Backward)."""
    return float(re.search(label + r": ([0-9.e+-]+) ms", log).group(1))


def run_crema(crema, name, setting, iterations, workdir):
    model = write_deploy(name, workdir)
    env = dict(os.environ, GLOG_logtostderr="1")
    env.update(CREMA_SETTINGS[setting])
    log = subprocess.run([crema, "time", "--model=" + model, "--iterations=%d" % iterations], env=env,
                         capture_output=True, text=True, check=True).stderr
    info = {k: re.search(k + r": (.*)", log).group(1).strip() for k in ("CPU", "BLAS", "GEMM peak")}
    return {"forward_backward": crema_ms(log, "Average Forward-Backward"),
            "forward": crema_ms(log, "Average Forward pass")}, info


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    parser.add_argument("--no-opencv", action="store_true", help="leave OpenCV's dnn module out")
    parser.add_argument("--torch-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--opencv-worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        torch_worker(args.torch_worker[0], int(args.torch_worker[1]), int(args.torch_worker[2]))
        return
    if args.opencv_worker:
        opencv_worker(args.opencv_worker[0], int(args.opencv_worker[1]), int(args.opencv_worker[2]),
                      args.opencv_worker[3])
        return

    cores = os.cpu_count()
    nets = args.nets.split(",")
    # Each peer's settings: crema with its libraries' default threads (one per core), with a single-threaded
    # OpenBLAS (oneDNN and crema's loops on OpenMP's threads), and with one thread; PyTorch with one thread per core, one thread, and one thread per
    # core but a single-threaded OpenBLAS; OpenCV with one thread per core and one thread.
    crema_settings = list(CREMA_SETTINGS)
    torch_settings = [(cores, None), (1, None), (cores, 1)]
    opencv_settings = [] if args.no_opencv else [cores, 1]
    results = {}  # (peer, net, setting) -> {"forward_backward": [...], "forward": [...]}

    def record(peer, name, setting, times):
        for key, ms in times.items():
            results.setdefault((peer, name, setting), {}).setdefault(key, []).append(ms)

    info = None
    with tempfile.TemporaryDirectory() as workdir:
        weights = {name: write_weights(name, workdir) for name in nets} if opencv_settings else {}
        for round_index in range(args.rounds):
            for name in nets:
                for setting in crema_settings:
                    times, machine = run_crema(args.crema, name, setting, args.iterations, workdir)
                    if setting == crema_settings[0]:
                        info = machine  # the BLAS threads and GEMM peak of crema's default setting
                    record("crema", name, setting, times)
                for setting in torch_settings:
                    record("pytorch", name, setting, run_torch(name, setting, args.iterations))
                for setting in opencv_settings:
                    record("opencv", name, setting, run_opencv(name, setting, args.iterations, weights[name]))
            print("round %d of %d done" % (round_index + 1, args.rounds), file=sys.stderr)

    import torch

    print("CPU: %s" % info["CPU"])
    print("crema: %s; at its default setting: BLAS %s; GEMM peak %s" % (args.crema, info["BLAS"], info["GEMM peak"]))
    print("PyTorch %s (%s)" % (torch.__version__, "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN"))
    if opencv_settings:
        import cv2
        print("OpenCV %s (dnn, default backend, CPU)" % cv2.__version__)
    print("%d rounds of %d iterations each, alternating; per setting the median of the rounds, ms per batch\n"
          % (args.rounds, args.iterations))
    describe_torch = lambda s: "%d threads%s" % (s[0], ", OPENBLAS_NUM_THREADS=1" if s[1] else "")
    describe_opencv = lambda s: "%d thread%s" % (s, "s" if s > 1 else "")

    def medians(peer, name, settings, key):
        return {s: statistics.median(results[(peer, name, s)][key]) for s in settings}

    print("| net (batch) | pass | crema, each setting | PyTorch, each setting | OpenCV, each setting | crema best | "
          "PyTorch best | OpenCV best | crema's speed vs PyTorch | vs OpenCV |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in nets:
        for key, label in (("forward_backward", "forward+backward"), ("forward", "forward")):
            crema_ms = medians("crema", name, crema_settings, key)
            torch_ms = medians("pytorch", name, torch_settings, key)
            opencv_ms = medians("opencv", name, opencv_settings, key) if key == "forward" else {}
            best_crema, best_torch = min(crema_ms.values()), min(torch_ms.values())
            best_opencv = min(opencv_ms.values()) if opencv_ms else None
            print("| %s (%d) | %s | %s | %s | %s | %.2f | %.2f | %s | %.2fx | %s |" % (
                name, NETS[name][1], label,
                " / ".join("%.2f (%s)" % (ms, s) for s, ms in crema_ms.items()),
                " / ".join("%.2f (%s)" % (ms, describe_torch(s)) for s, ms in torch_ms.items()),
                " / ".join("%.2f (%s)" % (ms, describe_opencv(s)) for s, ms in opencv_ms.items()) or "-",
                best_crema, best_torch, "%.2f" % best_opencv if best_opencv else "-", best_torch / best_crema,
                "%.2fx" % (best_opencv / best_crema) if best_opencv else "-"))


if __name__ == "__main__":
    main()
