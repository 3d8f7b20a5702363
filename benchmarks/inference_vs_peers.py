#!/usr/bin/env python3
"""Inference on the CPU, forward only, side by side: crema against OpenCV's dnn module and ONNX Runtime.

Every peer runs the same deploy prototxt with the same weights: benchmarks/caffe_nets.py translates the prototxt into
a PyTorch module, whose initial weights are written as a .caffemodel (for crema and OpenCV) and exported to ONNX by
PyTorch (for ONNX Runtime, npm's onnxruntime-node run by ort_worker.js). crema runs `crema time --phase=TEST
--forward_only` (the inference rewrites on, as in every tool; `--fold=none` as another setting, to show what they
give), OpenCV its default backend on the CPU, ONNX Runtime its CPU provider with every graph optimization. Each
peer at each of its thread settings (one per core and one), in alternating rounds; per setting the median of the
rounds, and each peer's best setting compared. Every peer runs the same number of passes of a net: --iterations, or
more where that many would take under --min-seconds (a batch of LeNet takes a tenth of a millisecond: twenty passes
measure the first passes' warming up and the machine's noise more than the net).

Needs: build/tools/crema; python3-torch, python3-opencv, python3-protobuf (Debian); node and, in benchmarks/,
`npm install --ignore-scripts` (onnxruntime-node; its install script fetches GPU binaries from elsewhere, the CPU
ones are in the package).

  /usr/bin/python3 benchmarks/inference_vs_peers.py --rounds 3 --iterations 20
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import caffe_nets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))

NETS = {
    "lenet": "examples/fashion_mnist/lenet_deploy.prototxt",
    "googlenet": "examples/imagenet/googlenet_deploy.prototxt",
    "resnet50": "examples/imagenet/resnet50_deploy.prototxt",
    "caffenet": "examples/imagenet/caffenet_deploy.prototxt",
}


def prepare(name, batch, workdir):
    """The deploy prototxt at `batch`, a .caffemodel of PyTorch's initial weights for it, and their ONNX export:
    (prototxt, caffemodel, onnx, {input: shape})."""
    import torch

    net = caffe_nets.read_net(os.path.join(ROOT, NETS[name]), batch)
    text = open(os.path.join(ROOT, NETS[name])).read()
    prototxt = os.path.join(workdir, "%s_%d.prototxt" % (name, batch))
    with open(prototxt, "w") as f:
        f.write(re.sub(r"dim: \d+", "dim: %d" % batch, text, count=1))
    torch.manual_seed(1)
    model = caffe_nets.torch_net(net).eval()
    caffemodel = os.path.join(workdir, "%s_%d.caffemodel" % (name, batch))
    caffe_nets.write_caffemodel(net, model, caffemodel)
    shapes = caffe_nets.input_shapes(net)
    names = list(shapes)

    class Positional(torch.nn.Module):  # torch.onnx.export passes the inputs by position
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *xs):
            return tuple(self.model(**dict(zip(names, xs))))

    onnx = os.path.join(workdir, "%s_%d.onnx" % (name, batch))
    with torch.no_grad():
        torch.onnx.export(Positional(), tuple(torch.randn(*shapes[n]) for n in names), onnx, input_names=names,
                          opset_version=13)
    return prototxt, caffemodel, onnx, shapes


CREMA_SETTINGS = {
    "default threads": {},
    "1 thread": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
}


def run_crema(crema, prototxt, caffemodel, setting, fold, iterations):
    env = dict(os.environ, GLOG_logtostderr="1")
    env.update(CREMA_SETTINGS[setting])
    log = subprocess.run([crema, "time", "--model=" + prototxt, "--weights=" + caffemodel, "--phase=TEST",
                          "--forward_only", "--fold=" + fold, "--iterations=%d" % iterations], env=env,
                         capture_output=True, text=True, check=True).stderr
    info = {k: re.search(k + r": (.*)", log).group(1).strip() for k in ("CPU", "BLAS")}
    return float(re.search(r"Average Forward pass: ([0-9.e+-]+) ms", log).group(1)), info


def opencv_worker(prototxt, caffemodel, threads, iterations, shapes_json):
    """OpenCV's dnn module (default backend, CPU) in a process of its own: prints mean ms of a forward pass."""
    import time

    import cv2
    import numpy

    cv2.setNumThreads(threads)
    dnn = cv2.dnn.readNetFromCaffe(prototxt, caffemodel)
    for blob, shape in json.loads(shapes_json).items():
        dnn.setInput(numpy.random.default_rng(1).uniform(-1, 1, shape).astype(numpy.float32), blob)
    dnn.forward()  # untimed: OpenCV sets its layers up on the first pass
    start = time.perf_counter()
    for _ in range(iterations):
        dnn.forward()
    print(json.dumps({"forward": (time.perf_counter() - start) * 1000 / iterations}))


def run_opencv(prototxt, caffemodel, threads, iterations, shapes):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--opencv-worker", prototxt, caffemodel,
                          str(threads), str(iterations), json.dumps(shapes)], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["forward"]


def run_ort(onnx, threads, iterations, shapes):
    inputs = ["%s=%s" % (n, "x".join(str(d) for d in s)) for n, s in shapes.items()]
    out = subprocess.run(["node", os.path.join(HERE, "ort_worker.js"), onnx, str(threads), str(iterations)] + inputs,
                         capture_output=True, text=True, check=True, cwd=HERE).stdout
    return json.loads(out.strip().splitlines()[-1])["forward"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20, help="passes per measurement, at least")
    parser.add_argument("--min-seconds", type=float, default=0.5, help="passes enough for this long (crema's pace)")
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    parser.add_argument("--opencv-worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.opencv_worker:
        w = args.opencv_worker
        opencv_worker(w[0], w[1], int(w[2]), int(w[3]), w[4])
        return
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        sys.exit("inference_vs_peers.py: run `npm install --ignore-scripts` in benchmarks/ first (onnxruntime-node)")

    cores = os.cpu_count()
    cases = [(name, int(b)) for name in args.nets.split(",") for b in args.batches.split(",")]
    crema_settings = [(s, fold) for fold in ("all", "none") for s in CREMA_SETTINGS]
    thread_settings = sorted({cores, 1}, reverse=True)
    results = {}  # (peer, case, setting) -> [ms per round]
    info = None
    with tempfile.TemporaryDirectory() as workdir:
        files = {case: prepare(case[0], case[1], workdir) for case in cases}
        # Passes per case: from crema's pace on a short run (every peer then runs as many).
        passes = {}
        for case, (prototxt, caffemodel, _, _) in files.items():
            probe, _ = run_crema(args.crema, prototxt, caffemodel, "1 thread", "none", 5)
            passes[case] = max(args.iterations, int(args.min_seconds * 1000 / max(probe, 1e-3)))
        for round_index in range(args.rounds):
            for case in cases:
                prototxt, caffemodel, onnx, shapes = files[case]
                for setting in crema_settings:
                    ms, info = run_crema(args.crema, prototxt, caffemodel, setting[0], setting[1], passes[case])
                    results.setdefault(("crema", case, setting), []).append(ms)
                for threads in thread_settings:
                    results.setdefault(("opencv", case, threads), []).append(
                        run_opencv(prototxt, caffemodel, threads, passes[case], shapes))
                    results.setdefault(("ort", case, threads), []).append(
                        run_ort(onnx, threads, passes[case], shapes))
            print("round %d of %d done" % (round_index + 1, args.rounds), file=sys.stderr)

    import cv2

    ort_version = json.load(open(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")))["version"]
    print("CPU: %s" % info["CPU"])
    print("crema: %s (BLAS %s); OpenCV %s (dnn, default backend); ONNX Runtime %s (onnxruntime-node, CPU)"
          % (args.crema, info["BLAS"], cv2.__version__, ort_version))
    print("%d rounds, alternating, of %s passes; per setting the median of the rounds, ms per batch\n"
          % (args.rounds, ", ".join("%d (%s, %d)" % (n, c[0], c[1]) for c, n in passes.items())))
    median = lambda peer, case, s: statistics.median(results[(peer, case, s)])
    print("| net (batch) | crema, each setting | OpenCV, each setting | ONNX Runtime, each setting | crema best "
          "| crema unfolded best | OpenCV best | ONNX Runtime best | vs OpenCV | vs ONNX Runtime |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    threads_name = lambda t: "%d thread%s" % (t, "s" if t > 1 else "")
    fmt = lambda ms: ("%.3f" if ms < 1 else "%.2f") % ms  # sub-millisecond figures to the microsecond
    for case in cases:
        crema = {s: median("crema", case, s) for s in crema_settings}
        opencv = {t: median("opencv", case, t) for t in thread_settings}
        ort = {t: median("ort", case, t) for t in thread_settings}
        folded = min(ms for s, ms in crema.items() if s[1] == "all")
        unfolded = min(ms for s, ms in crema.items() if s[1] == "none")
        print("| %s (%d) | %s | %s | %s | %s | %s | %s | %s | %.2fx | %.2fx |" % (
            case[0], case[1],
            " / ".join("%s (%s%s)" % (fmt(ms), s[0], "" if s[1] == "all" else ", --fold=none")
                       for s, ms in crema.items()),
            " / ".join("%s (%s)" % (fmt(ms), threads_name(t)) for t, ms in opencv.items()),
            " / ".join("%s (%s)" % (fmt(ms), threads_name(t)) for t, ms in ort.items()),
            fmt(folded), fmt(unfolded), fmt(min(opencv.values())), fmt(min(ort.values())),
            min(opencv.values()) / folded, min(ort.values()) / folded))


if __name__ == "__main__":
    main()
