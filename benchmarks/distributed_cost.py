#!/usr/bin/env python3
"""The cost model of data parallelism (docs/distributed.md): for each example net, the bytes each rank's gradient
all-reduce carries per iteration and the projected speed-up of N = 2..64 GPUs over one, at NVLink's and at 100 Gb/s
Ethernet's bandwidth.

What is measured, by `crema time --iterations=1` on the net's deploy prototxt at one image with force_backward: the
gradient bytes (crema's "parameters" figure: every learnable blob, all-reduced whole) and the arithmetic of a
forward+backward pass, which scales with the batch.

What is assumed (flags; the defaults are stated in the output):
  --gpu_tflops   the arithmetic rate one GPU sustains in training (default 40 TFLOP/s: an H100/H200 running cuDNN's
                 float32 convolutions on TF32 tensor cores at about a tenth of their dense peak). Replace it with
                 `crema time --gpu` figures once crema has trained on a GPU.
  bandwidths     the all-reduce bus bandwidth NCCL reaches: NVLink 4 (H100/H200) 370 GB/s; 100 Gb/s Ethernet with
                 RoCE 11.5 GB/s; a per-step latency of 2 us (NVLink) and 15 us (Ethernet).

The model (ring all-reduce, as NCCL runs it for these sizes; weak scaling, each GPU keeping its batch):
  T_c        = FLOP per image x batch / rate                     (one iteration's compute; backward is 2/3 of it)
  T_ar(N)    = 2 (N-1)/N x S / bandwidth + K x 2 (N-1) x latency  (S gradient bytes in K buckets of --bucket_mb,
                                                                  25 MiB by default: crema's choice for GPU ranks)
  exposed(N) = max(T_ar - T_backward x (1 - 1/K), T_ar / K)        (the sums run beside backward, all but the last)
  speed-up   = N x T_c / (T_c + exposed)

  python3 benchmarks/distributed_cost.py
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CREMA = os.path.join(ROOT, "build", "tools", "crema")
# name -> (deploy prototxt, batch per GPU)
NETS = {
    "LeNet": ("examples/fashion_mnist/lenet_deploy.prototxt", 64),
    "CIFAR-10 quick": ("examples/cifar10/cifar10_quick_deploy.prototxt", 100),
    "CaffeNet": ("examples/imagenet/caffenet_deploy.prototxt", 256),
    "GoogLeNet": ("examples/imagenet/googlenet_deploy.prototxt", 32),
    "ResNet-50": ("examples/imagenet/resnet50_deploy.prototxt", 32),
}
LINKS = {"NVLink": (370e9, 2e-6), "100 Gb/s Ethernet": (11.5e9, 15e-6)}
RANKS = [2, 4, 8, 16, 32, 64]


def measure(name, workdir):
    prototxt, _ = NETS[name]
    text = open(os.path.join(ROOT, prototxt)).read()
    text = re.sub(r"dim: \d+", "dim: 1", text, count=1)
    model = os.path.join(workdir, "net.prototxt")
    open(model, "w").write("force_backward: true\n" + text)
    out = subprocess.run([CREMA, "time", "--model=" + model, "--iterations=1"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    params = re.search(r"parameters ([0-9.e+-]+) MiB", out)
    flops = re.search(r"Arithmetic of the net, forward-backward: ([0-9.e+-]+) ([MG])FLOP", out)
    if not params or not flops:
        sys.exit("crema time gave no parameter or arithmetic figure for %s:\n%s" % (name, out[-2000:]))
    scale = 1e6 if flops.group(2) == "M" else 1e9
    return float(params.group(1)) * 1048576, float(flops.group(1)) * scale


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu_tflops", type=float, default=40.0)
    parser.add_argument("--bucket_mb", type=float, default=25.0)
    args = parser.parse_args()
    rate = args.gpu_tflops * 1e12
    bucket = args.bucket_mb * 1048576
    print("Assumed: %.0f TFLOP/s sustained per GPU; NVLink 370 GB/s and 2 us a step; 100 Gb/s Ethernet 11.5 GB/s and "
          "15 us a step; buckets of %g MiB\n" % (args.gpu_tflops, args.bucket_mb))
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, (_, batch) in NETS.items():
            size, flop = measure(name, workdir)
            rows.append((name, batch, size, flop))
    print("| net | batch per GPU | gradient bytes all-reduced per iteration | on the wire per rank (N large) | "
          "compute per iteration (assumed rate) |")
    print("|---|---|---|---|---|")
    for name, batch, size, flop in rows:
        print("| %s | %d | %.1f MB | %.1f MB | %.2f ms |" % (name, batch, size / 1e6, 2 * size / 1e6,
                                                          flop * batch / rate * 1e3))
    for link, (bandwidth, latency) in LINKS.items():
        print("\nProjected speed-up over one GPU, %s:\n" % link)
        print("| net | " + " | ".join("N = %d" % n for n in RANKS) + " |")
        print("|---|" + "---|" * len(RANKS))
        for name, batch, size, flop in rows:
            compute = flop * batch / rate
            backward = compute * 2 / 3
            buckets = max(1, math.ceil(size / bucket))
            cells = []
            for n in RANKS:
                allreduce = 2 * (n - 1) / n * size / bandwidth + buckets * 2 * (n - 1) * latency
                exposed = max(allreduce - backward * (1 - 1 / buckets), allreduce / buckets)
                speedup = n * compute / (compute + exposed)
                cells.append("%.1f (%.0f%%)" % (speedup, 100 * speedup / n))
            print("| %s | " % name + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
