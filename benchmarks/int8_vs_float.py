#!/usr/bin/env python3
"""8-bit inference against float, forward only, side by side in one run: `crema time --phase=TEST --forward_only` on a
deploy net and on what `crema quantize` makes of it, and on the 8-bit net with every blob kept in floats
(CREMA_ELEMENT_TYPES=float: each 8-bit step quantizing its float input and writing float, as before 8-bit blobs
passed from step to step).

The weights are PyTorch's initial ones for the net (benchmarks/caffe_nets.py); the nets take an Input, so `crema
quantize` measures the ranges a zero image gives (it warns so). Those scales set which integers the kernels see, not
how long they take: for accuracy, quantize a trained net with --calibration (docs/performance.md has both).
The three settings alternate within each round; per setting the median of the rounds. With --baseline=CREMA (another
build of crema, an earlier commit's), a fourth setting runs that binary on the same 8-bit net, and a last column gives
the 8-bit net's speed-up over it.

Needs: build/tools/crema; python3-torch, python3-protobuf (Debian).

  /usr/bin/python3 benchmarks/int8_vs_float.py --rounds 5 --iterations 10
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import caffe_nets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NETS = {
    "googlenet": ("examples/imagenet/googlenet_deploy.prototxt", 10),
    "resnet50": ("examples/imagenet/resnet50_deploy.prototxt", 8),
}

SETTINGS = ["float", "8-bit", "8-bit, blobs in float"]


def prepare(crema, name, workdir):
    """The deploy prototxt at its batch, PyTorch's initial weights for it, and the quantized prototxt."""
    import torch

    path, batch = NETS[name]
    net = caffe_nets.read_net(os.path.join(ROOT, path), batch)
    text = open(os.path.join(ROOT, path)).read()
    prototxt = os.path.join(workdir, "%s_%d.prototxt" % (name, batch))
    with open(prototxt, "w") as f:
        f.write(re.sub(r"dim: \d+", "dim: %d" % batch, text, count=1))
    torch.manual_seed(1)
    caffemodel = os.path.join(workdir, "%s_%d.caffemodel" % (name, batch))
    caffe_nets.write_caffemodel(net, caffe_nets.torch_net(net).eval(), caffemodel)
    quantized = os.path.join(workdir, "%s_%d_int8.prototxt" % (name, batch))
    subprocess.run([crema, "quantize", "--model=" + prototxt, "--weights=" + caffemodel, "--output=" + quantized,
                    "--iterations=1"], capture_output=True, text=True, check=True)
    return prototxt, quantized, caffemodel, batch


def run_crema(crema, prototxt, caffemodel, iterations, env_extra):
    env = dict(os.environ, GLOG_logtostderr="1", OMP_WAIT_POLICY="passive")
    env.update(env_extra)
    log = subprocess.run([crema, "time", "--model=" + prototxt, "--weights=" + caffemodel, "--phase=TEST",
                          "--forward_only", "--iterations=%d" % iterations], env=env, capture_output=True, text=True,
                         check=True).stderr
    cpu = re.search(r"CPU: (.*)", log).group(1).strip()
    return float(re.search(r"Average Forward pass: ([0-9.e+-]+) ms", log).group(1)), cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    parser.add_argument("--baseline", help="another crema binary to run the same 8-bit nets with")
    args = parser.parse_args()
    settings = SETTINGS + (["8-bit, baseline"] if args.baseline else [])
    names = args.nets.split(",")
    results = {}  # (net, setting) -> [ms per round]
    cpu = ""
    with tempfile.TemporaryDirectory() as workdir:
        files = {name: prepare(args.crema, name, workdir) for name in names}
        for round_index in range(args.rounds):
            for name in names:
                prototxt, quantized, caffemodel, _ = files[name]
                runs = {"float": (prototxt, {}), "8-bit": (quantized, {}),
                        "8-bit, blobs in float": (quantized, {"CREMA_ELEMENT_TYPES": "float"}),
                        "8-bit, baseline": (quantized, {})}
                for setting in settings:
                    model, env = runs[setting]
                    binary = args.baseline if setting == "8-bit, baseline" else args.crema
                    ms, cpu = run_crema(binary, model, caffemodel, args.iterations, env)
                    results.setdefault((name, setting), []).append(ms)
            print("round %d of %d done" % (round_index + 1, args.rounds), file=sys.stderr)
    print("CPU: %s" % cpu)
    print("%d rounds, alternating, of %d passes; per setting the median of the rounds, ms per batch (every round's "
          "figure in brackets)\n" % (args.rounds, args.iterations))
    baseline = bool(args.baseline)
    print("| net (batch) | float | 8-bit | 8-bit, blobs in float |%s 8-bit speed-up | of which 8-bit blobs |%s"
          % (" 8-bit, baseline |" if baseline else "", " over the baseline |" if baseline else ""))
    print("|---" * (8 if baseline else 6) + "|")
    for name in names:
        median = {s: statistics.median(results[(name, s)]) for s in settings}
        cell = lambda s: "%.1f [%s]" % (median[s], ", ".join("%.0f" % ms for ms in results[(name, s)]))
        row = "| %s (%d) | %s | %s | %s |" % (name, files[name][3], cell("float"), cell("8-bit"),
                                            cell("8-bit, blobs in float"))
        if baseline:
            row += " %s |" % cell("8-bit, baseline")
        row += " %.2fx | %.2fx |" % (median["float"] / median["8-bit"], median["8-bit, blobs in float"] / median["8-bit"])
        if baseline:
            row += " %.2fx |" % (median["8-bit, baseline"] / median["8-bit"])
        print(row)


if __name__ == "__main__":
    main()
