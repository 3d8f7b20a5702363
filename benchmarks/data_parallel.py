#!/usr/bin/env python3
"""Data parallelism on one machine, side by side: training the Fashion-MNIST examples (LeNet, the ResNet) for the same
global batch as one process and as two MPI ranks, in alternating rounds.

  one process     crema train, global batch B, all of OpenMP's threads (OMP_NUM_THREADS unset: one per core)
  2 ranks         mpirun -np 2 crema train, batch B/2 each, one thread each, each rank bound to a core
  2 ranks, after  the same with one gradient bucket (--bucket_mb=4096): the sums start only once backward has ended
  one rank alone  crema train, batch B/2, one thread (what each rank computes, without the other: the cost of the
                  all-reduce and of sharing the machine is the gap to "2 ranks")

Per setting: training iterations a second (the median of the solver's "Speed" lines after the first), images a second
(times the global batch), and for the ranks the gradient all-reduce's time in flight and the time the update waited for
it after backward (the solver's "Gradient all-reduce" lines; the medians). The overlap fraction is the part of the
wait for sums started only after backward that starting them during backward saved: 1 - wait / wait after.
No test passes, no snapshots.

Needs build/tools/crema built with MPI, mpirun (Debian: openmpi-bin), and the examples' LMDBs (make demo, or
data/fashion_mnist/get_fashion_mnist.sh and examples/fashion_mnist/create_fashion_mnist.sh).

  python3 benchmarks/data_parallel.py --rounds 3 --iterations 300
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CREMA = os.path.join(ROOT, "build", "tools", "crema")
# name -> (net, global batch, bucket size for "2 ranks": crema's 1 MiB gives LeNet's 1.6 MB three buckets; the ResNet's
# 0.3 MB would fit in one, started only once backward has ended, so it gets buckets of 50 kB)
NETS = {
    "lenet": ("examples/fashion_mnist/lenet_train_test.prototxt", 128, 1.0),
    "resnet": ("examples/fashion_mnist/resnet_train_test.prototxt", 64, 0.05),
}
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
}


def with_train_batch(text, batch):
    """The net with its TRAIN-phase data layer reading `batch` records (the first batch_size after 'phase: TRAIN')."""
    at = text.find("phase: TRAIN")
    if at < 0:
        sys.exit("no TRAIN-phase layer in the net")
    match = re.compile(r"batch_size:\s*\d+").search(text, at)
    return text[: match.start()] + "batch_size: %d" % batch + text[match.end():]


def write_solver(workdir, name, net_path, batch, iterations, display):
    text = open(os.path.join(ROOT, net_path)).read().replace(
        "data/fashion_mnist/", os.path.join(ROOT, "data/fashion_mnist/"))
    net = os.path.join(workdir, "%s_%d.prototxt" % (name, batch))
    open(net, "w").write(with_train_batch(text, batch))
    solver = os.path.join(workdir, "%s_%d_solver.prototxt" % (name, batch))
    open(solver, "w").write(
        'net: "%s"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: "fixed"\nmax_iter: %d\n'
        'display: %d\nsnapshot_after_train: false\nsolver_mode: CPU\nrandom_seed: 1701\n' % (net, iterations, display))
    return solver


def run(command, env):
    merged = dict(os.environ)
    merged.update(env)
    done = subprocess.run(command, env=merged, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(command), done.stdout[-3000:]))
    speeds = [float(v) for v in re.findall(r"Speed: ([0-9.]+) iter/s", done.stdout)][1:]
    flights = [float(v) for v in re.findall(r"Gradient all-reduce: ([0-9.]+) ms in flight", done.stdout)][1:]
    overlaps = [float(v) for v in re.findall(r"the update waited ([0-9.]+) ms for it", done.stdout)][1:]
    if not speeds:
        sys.exit("no Speed lines: %s\n%s" % (" ".join(command), done.stdout[-3000:]))
    return statistics.median(speeds), flights, overlaps


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", default="lenet,resnet")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("CPU: %s, %d cores; %d rounds of %d iterations" % (cpu, os.cpu_count(), args.rounds, args.iterations))
    display = max(1, args.iterations // 6)
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.nets.split(","):
            net_path, batch, bucket_mb = NETS[name]
            whole = write_solver(workdir, name, net_path, batch, args.iterations, display)
            half = write_solver(workdir, name, net_path, batch // 2, args.iterations, display)
            settings = [
                ("one process", batch, [CREMA, "train", "--solver=" + whole], {}),
                ("2 ranks", batch, ["mpirun", "--bind-to", "core", "-np", "2", CREMA, "train",
                                    "--bucket_mb=%g" % bucket_mb, "--solver=" + half], dict(MPI_ENV, OMP_NUM_THREADS="1")),
                ("2 ranks, after", batch, ["mpirun", "--bind-to", "core", "-np", "2", CREMA, "train",
                                           "--bucket_mb=4096", "--solver=" + half], dict(MPI_ENV, OMP_NUM_THREADS="1")),
                ("one rank alone", batch // 2, [CREMA, "train", "--solver=" + half], {"OMP_NUM_THREADS": "1"}),
            ]
            results = {label: ([], [], []) for label, _, _, _ in settings}
            for _ in range(args.rounds):
                for label, _, command, env in settings:
                    speed, flights, overlaps = run(command, env)
                    results[label][0].append(speed)
                    results[label][1].extend(flights)
                    results[label][2].extend(overlaps)
            print("\n%s, global batch %d:" % (name, batch))
            print("  %-16s %10s %10s %12s %12s" % ("setting", "iter/s", "images/s", "in flight", "waited"))
            for label, images, _, _ in settings:
                speeds, flights, waits = results[label]
                speed = statistics.median(speeds)
                flight = "%.2f ms" % statistics.median(flights) if flights else "-"
                wait = "%.2f ms" % statistics.median(waits) if waits else "-"
                print("  %-16s %10.2f %10.0f %12s %12s" % (label, speed, speed * images, flight, wait))
            during, after = statistics.median(results["2 ranks"][2]), statistics.median(results["2 ranks, after"][2])
            print("  overlap fraction: %.0f%% (waited %.2f ms with the sums during backward, %.2f ms after it)"
                  % (100 * (1 - during / after) if after > 0 else 0, during, after))


if __name__ == "__main__":
    main()
