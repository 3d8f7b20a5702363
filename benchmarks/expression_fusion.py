#!/usr/bin/env python3
"""A chain of five element layers against the same written as one Expression layer, and against the chain fused by
the fuse_elements pass, side by side: `crema time` on three nets over one input (16 x 64 x 56 x 56, forward and
backward), in alternating rounds, the median of each.

  chain:      Power (0.5 x + 1) -> TanH -> Power (^2) -> Sigmoid -> AbsVal   (five passes over memory each way)
  expression: abs(sigmoid(tanh(0.5 * x + 1)^2))                              (one pass each way)
  fused:      the chain's prototxt with `fuse_elements: true`                (the pass writes the expression)

The outputs and gradients agree within float rounding (ExpressionLayerTest covers each function against the
built-in layers). Needs build/tools/crema only.

  python3 benchmarks/expression_fusion.py --rounds 5 --iterations 20
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HEAD = """name: "%s"
force_backward: true
%s
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 16 dim: 64 dim: 56 dim: 56 } } }
"""
CHAIN = """layer { name: "p1" type: "Power" bottom: "x" top: "a" power_param { scale: 0.5 shift: 1 } }
layer { name: "t" type: "TanH" bottom: "a" top: "b" }
layer { name: "p2" type: "Power" bottom: "b" top: "c" power_param { power: 2 } }
layer { name: "s" type: "Sigmoid" bottom: "c" top: "d" }
layer { name: "r" type: "AbsVal" bottom: "d" top: "y" }
"""
EXPRESSION = """layer { name: "f" type: "Expression" bottom: "x" top: "y"
        expression_param { formula: "abs(sigmoid(tanh(0.5 * x + 1)^2))" } }
"""


def run(crema, prototxt, iterations):
    out = subprocess.run([crema, "time", "--model=" + prototxt, "--iterations=%d" % iterations],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True).stdout
    forward = float(re.search(r"Average Forward pass: ([0-9.]+) ms", out).group(1))
    backward = float(re.search(r"Average Backward pass: ([0-9.]+) ms", out).group(1))
    cpu = re.search(r"CPU: (.*)", out)
    return forward, backward, cpu.group(1) if cpu else "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    args = parser.parse_args()
    names = ("chain", "expression", "fused")
    times = {name: ([], []) for name in names}
    cpu = "?"
    with tempfile.TemporaryDirectory() as workdir:
        paths = {}
        for name, body, fuse in (("chain", CHAIN, ""), ("expression", EXPRESSION, ""),
                                 ("fused", CHAIN, "fuse_elements: true")):
            paths[name] = os.path.join(workdir, name + ".prototxt")
            with open(paths[name], "w") as f:
                f.write(HEAD % (name, fuse) + body)
        for _ in range(args.rounds):
            for name in names:
                forward, backward, cpu = run(args.crema, paths[name], args.iterations)
                times[name][0].append(forward)
                times[name][1].append(backward)
    print("CPU: %s; OMP_NUM_THREADS=%s; %d rounds of %d passes, medians" %
          (cpu, os.environ.get("OMP_NUM_THREADS", "unset"), args.rounds, args.iterations))
    print()
    print("| net | forward (ms) | backward (ms) | forward + backward (ms) |")
    print("|---|---|---|---|")
    medians = {}
    for name in names:
        f, b = statistics.median(times[name][0]), statistics.median(times[name][1])
        medians[name] = (f, b)
        print("| %s | %.2f | %.2f | %.2f |" % (name, f, b, f + b))
    print()
    cf, cb = medians["chain"]
    for name in ("expression", "fused"):
        ef, eb = medians[name]
        print("%s vs chain: forward %.2fx, backward %.2fx, forward + backward %.2fx" %
              (name, cf / ef, cb / eb, (cf + cb) / (ef + eb)))


if __name__ == "__main__":
    main()
