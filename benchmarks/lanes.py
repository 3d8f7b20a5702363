#!/usr/bin/env python3
"""Execution lanes on the CPU, side by side: each net's forward pass with `--lanes=1` (every step in order, each on
all of OpenMP's threads), with two lanes (independent steps at once, each on one thread) and with the automatic
choice (each wide stretch of the plan timed both ways, the faster kept), in alternating rounds of `crema time
--phase=TEST --forward_only`; per setting the median of the rounds, and the in-order time over each lanes setting's.
Also in order on one thread (OMP_NUM_THREADS=1), for the bound: a lane runs each step on one thread, so no schedule
of lanes can take less than the one-thread time over the threads there are, and "bound" is the in-order time over
that (the gain of a perfect overlap of every step, without the contention of steps at once for caches and memory).
"bound, this graph" is tighter: the steps that ran alone in the two-lane run (the stem, the joins, steps whose
results depend on the thread count) at their in-order times, and the steps that ran on lanes at their one-thread
times over two, as if perfectly balanced, against all the steps at their in-order times (per-layer times from the
same runs, medians over the rounds).
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
SETTINGS = [("in order", 1), ("2 lanes", 2), ("automatic", 0), ("one thread", 1)]


def at_batch(name, batch, workdir):
    text = open(os.path.join(ROOT, NETS[name])).read()
    path = os.path.join(workdir, "%s_%d.prototxt" % (name, batch))
    with open(path, "w") as f:
        f.write(re.sub(r"dim: \d+", "dim: %d" % batch, text, count=1))
    return path


def run(crema, prototxt, lanes, iterations, one_thread=False):
    env = dict(os.environ, OMP_NUM_THREADS="1") if one_thread else None
    out = subprocess.run([crema, "time", "--model=" + prototxt, "--phase=TEST", "--forward_only",
                          "--iterations=%d" % iterations, "--lanes=%d" % lanes],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True, env=env).stdout
    ms = float(re.search(r"Average Forward pass: ([0-9.]+) ms", out).group(1))
    cpu = re.search(r"CPU: (.*)", out)
    lanes_line = re.search(r"Lanes: (.*)", out)
    # Per layer: its average forward time, and in a run on lanes whether it ran alone or on a lane.
    layer_ms = {m.group(1): float(m.group(2))
                for m in re.finditer(r"\] *(\S+)\tforward: ([0-9.e+-]+) ms", out)}
    alone = {m.group(1): m.group(2) == "alone" for m in re.finditer(r"\] *(\S+)\t(alone|lane \d+)\t", out)}
    return ms, cpu.group(1) if cpu else "?", lanes_line.group(1) if lanes_line else "", layer_ms, alone


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
            layer_times = {label: {} for label, _ in SETTINGS}
            described = {}
            ran_alone = {}
            for _ in range(args.rounds):
                for label, lanes in SETTINGS:
                    ms, described_cpu, lanes_line, layer_ms, alone = run(args.crema, prototxt, lanes, args.iterations,
                                                                         one_thread=label == "one thread")
                    times[label].append(ms)
                    described[label] = lanes_line
                    for layer, value in layer_ms.items():
                        layer_times[label].setdefault(layer, []).append(value)
                    if label == "2 lanes":
                        ran_alone = alone
                    if label != "one thread":
                        cpu = described_cpu
            medians = {label: statistics.median(values) for label, values in times.items()}
            layer = {label: {k: statistics.median(v) for k, v in per.items()} for label, per in layer_times.items()}
            graph_bound = sum(layer["in order"].get(k, 0.0) if alone else layer["one thread"].get(k, 0.0) / 2
                              for k, alone in ran_alone.items())
            in_order_layers = sum(layer["in order"].get(k, 0.0) for k in ran_alone)
            medians["bound, this graph"] = in_order_layers / graph_bound if graph_bound > 0 else 0.0
            rows.append((name, batch, medians, described))
            print("%s b%s: %s" % (name, batch, "; ".join("%s %s" % (l, " ".join("%.3f" % t for t in times[l]))
                                                          for l in times)), file=sys.stderr)
    print("CPU: %s; OMP_NUM_THREADS=%s; %d rounds of %d passes, medians" %
          (cpu, os.environ.get("OMP_NUM_THREADS", "unset"), args.rounds, args.iterations))
    print()
    threads = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())
    print("| net | batch | in order (ms) | 2 lanes (ms) | automatic (ms) | 2 lanes vs in order | automatic vs in order "
          "| one thread (ms) | bound on %d threads | bound, this graph |" % threads)
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, batch, medians, _ in rows:
        base = medians["in order"]
        graph_bound = medians["bound, this graph"]
        print("| %s | %s | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.3f | %.2fx | %s |" %
              (name, batch, base, medians["2 lanes"], medians["automatic"], base / medians["2 lanes"],
               base / medians["automatic"], medians["one thread"], base / (medians["one thread"] / threads),
               "%.2fx" % graph_bound if graph_bound > 0 else "-"))
    print()
    for name, batch, _, described in rows:
        print("- %s b%s, automatic: %s" % (name, batch, described["automatic"]))


if __name__ == "__main__":
    main()
