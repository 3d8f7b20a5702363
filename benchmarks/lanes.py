#!/usr/bin/env python3
"""Execution lanes on the CPU, side by side: each net's forward pass with `--lanes=1` (every step in order, each on
all of OpenMP's threads), with two lanes (independent steps at once, each on one thread) and with the automatic
choice (each wide stretch of the plan timed both ways, the faster kept), in alternating rounds of `crema time
--phase=TEST --forward_only`; per setting the median of the rounds, and the in-order time over each lanes setting's.
The outputs are the same bit for bit in every setting (ExamplesTest.LanesGiveTheInOrderResultsBitForBit); only the
time differs. Weights are the fillers' (the time of a pass does not depend on them).

Needs build/tools/crema only.

  python3 benchmarks/lanes.py --rounds 5 --iterations 200
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NETS = {
    "googlenet": "examples/imagenet/googlenet_deploy.prototxt",
    "resnet50": "examples/imagenet/resnet50_deploy.prototxt",
    "lenet": "examples/fashion_mnist/lenet_deploy.prototxt",
}
SETTINGS = [("in order", 1), ("2 lanes", 2), ("automatic", 0)]


def at_batch(name, batch, workdir):
    text = open(os.path.join(ROOT, NETS[name])).read()
    path = os.path.join(workdir, "%s_%d.prototxt" % (name, batch))
    with open(path, "w") as f:
        f.write(re.sub(r"dim: \d+", "dim: %d" % batch, text, count=1))
    return path


def run(crema, prototxt, lanes, iterations):
    out = subprocess.run([crema, "time", "--model=" + prototxt, "--phase=TEST", "--forward_only",
                          "--iterations=%d" % iterations, "--lanes=%d" % lanes],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True).stdout
    ms = float(re.search(r"Average Forward pass: ([0-9.]+) ms", out).group(1))
    cpu = re.search(r"CPU: (.*)", out)
    lanes_line = re.search(r"Lanes: (.*)", out)
    return ms, cpu.group(1) if cpu else "?", lanes_line.group(1) if lanes_line else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", default="googlenet:1,googlenet:8,resnet50:1,lenet:1",
                        help="NAME:BATCH items, comma-separated (names: %s)" % ", ".join(NETS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    args = parser.parse_args()
    rows = []
    cpu = "?"
    with tempfile.TemporaryDirectory() as workdir:
        for item in args.nets.split(","):
            name, batch = item.split(":")
            prototxt = at_batch(name, int(batch), workdir)
            times = {label: [] for label, _ in SETTINGS}
            described = {}
            for _ in range(args.rounds):
                for label, lanes in SETTINGS:
                    ms, cpu, lanes_line = run(args.crema, prototxt, lanes, args.iterations)
                    times[label].append(ms)
                    described[label] = lanes_line
            medians = {label: statistics.median(values) for label, values in times.items()}
            rows.append((name, batch, medians, described))
            print("%s b%s: %s" % (name, batch, "; ".join("%s %s" % (l, " ".join("%.3f" % t for t in times[l]))
                                                          for l in times)), file=sys.stderr)
    print("CPU: %s; OMP_NUM_THREADS=%s; %d rounds of %d passes, medians" %
          (cpu, os.environ.get("OMP_NUM_THREADS", "unset"), args.rounds, args.iterations))
    print()
    print("| net | batch | in order (ms) | 2 lanes (ms) | automatic (ms) | 2 lanes vs in order | automatic vs in order |")
    print("|---|---|---|---|---|---|---|")
    for name, batch, medians, _ in rows:
        base = medians["in order"]
        print("| %s | %s | %.3f | %.3f | %.3f | %.2fx | %.2fx |" %
              (name, batch, base, medians["2 lanes"], medians["automatic"], base / medians["2 lanes"],
               base / medians["automatic"]))
    print()
    for name, batch, _, described in rows:
        print("- %s b%s, automatic: %s" % (name, batch, described["automatic"]))


if __name__ == "__main__":
    main()
