#!/usr/bin/python3
"""What the training monitor costs: `crema train` on LeNet and Fashion-MNIST without --monitor and with it while
ten clients poll its state as the page does (once a second each), side by side in one run, alternating the two
(without, with, without, with, ...) so that a machine's drift falls on both. Each run's speed is its iterations
divided by the seconds between the first and the last displayed loss (from the log's own timestamps, so start-up
and the final snapshot do not count); the runs are 1 process each, with the test nets and snapshots as the solver
has them.

It also checks that the monitor changes nothing of the log but its own lines: the two logs of a pair, with the glog
prefix (time, thread id), the "Monitor:" line and the "Speed: N iter/s" line (which differs between any two runs)
taken out, must be the same, byte for byte.

  benchmarks/monitor_overhead.py [--iterations 2000] [--pairs 3] [--clients 10] [--crema build/tools/crema]

Needs the Fashion-MNIST LMDBs (make data) and Debian's python3; run from anywhere.
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = re.compile(r"^[IWEF]\d{4,8} \d\d:\d\d:\d\d\.\d+ +\d+ ")


def solver_file(folder, iterations):
    path = os.path.join(folder, "solver.prototxt")
    with open(os.path.join(ROOT, "examples/fashion_mnist/lenet_solver.prototxt")) as original:
        text = original.read()
    text = re.sub(r"max_iter: \d+", f"max_iter: {iterations}", text)
    text = re.sub(r"snapshot: \d+", f"snapshot: {iterations}", text)
    text = re.sub(r'snapshot_prefix: "[^"]*"', f'snapshot_prefix: "{folder}/lenet"', text)
    with open(path, "w") as out:
        out.write(text)
    return path


def poll(url, stop, counts):
    """One client: the state once a second, as the page asks for it."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url + "api/state", timeout=10) as response:
                response.read()
            counts.append(1)
        except OSError:
            pass
        stop.wait(1.0)


def run(crema, solver, log_path, clients):
    """Trains once; returns (iterations per second, the log's lines without their prefixes, requests served)."""
    command = [crema, "train", f"--solver={solver}"] + (["--monitor=127.0.0.1:0"] if clients else [])
    counts, stop, threads = [], threading.Event(), []
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env=dict(os.environ, GLOG_logtostderr="1"))
        if clients:
            url = None
            while url is None and process.poll() is None:
                time.sleep(0.05)
                found = re.search(r"Monitor: (http://[^/ ]+/)", open(log_path).read())
                url = found.group(1) if found else None
            for _ in range(clients):
                threads.append(threading.Thread(target=poll, args=(url, stop, counts)))
                threads[-1].start()
        status = process.wait()
        stop.set()
        for thread in threads:
            thread.join()
    if status != 0:
        raise SystemExit(f"crema train failed ({status}); see {log_path}")
    stamps, lines = [], []
    for line in open(log_path).read().splitlines():
        found = re.search(r"(\d\d):(\d\d):(\d\d\.\d+) .*Iteration (\d+), loss = ", line)
        if found:
            stamps.append((int(found.group(4)), int(found.group(1)) * 3600 + int(found.group(2)) * 60 +
                           float(found.group(3))))
        # The monitor's own line, and the one line that differs between any two runs (the speed crema measured).
        if "Monitor: http" not in line and not re.search(r"Speed: [0-9.]+ iter/s", line):
            lines.append(PREFIX.sub("", line))
    (first_iteration, first_time), (last_iteration, last_time) = stamps[0], stamps[-1]
    return (last_iteration - first_iteration) / (last_time - first_time), lines, len(counts)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--crema", default=os.path.join(ROOT, "build/tools/crema"))
    args = parser.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; LeNet on Fashion-MNIST, {args.iterations} iterations a run")
    without, with_monitor = [], []
    with tempfile.TemporaryDirectory() as folder:
        solver = solver_file(folder, args.iterations)
        for pair in range(args.pairs):
            speed, plain_lines, _ = run(args.crema, solver, os.path.join(folder, "plain.log"), 0)
            without.append(speed)
            speed, monitored_lines, served = run(args.crema, solver, os.path.join(folder, "monitored.log"),
                                                 args.clients)
            with_monitor.append(speed)
            same = plain_lines == monitored_lines
            print(f"pair {pair + 1}: without {without[-1]:.1f} it/s, with the monitor and {args.clients} clients "
                  f"{with_monitor[-1]:.1f} it/s ({served} states served); logs otherwise identical: {same}")
            if not same:
                for a, b in zip(plain_lines, monitored_lines):
                    if a != b:
                        print(f"  first difference:\n    {a}\n    {b}")
                        break
    ratio = statistics.median(with_monitor) / statistics.median(without)
    print(f"median: without {statistics.median(without):.1f} it/s, with {statistics.median(with_monitor):.1f} it/s: "
          f"{ratio:.3f} of the speed ({(1 - ratio) * 100:+.1f}% slower)")


if __name__ == "__main__":
    main()
