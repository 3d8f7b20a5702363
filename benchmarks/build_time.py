#!/usr/bin/env python3
"""How long a net takes to build with its parameters drawn by its fillers: the time a user waits before the first
pass of a training run that starts from scratch. Each net is its train_val prototxt with the data layers replaced
by an Input of the same shapes (so no data set is needed), run by `crema time --iterations=1`, which prints "Net
built in X ms (parameters from the fillers)"; the median of the rounds.

Needs build/tools/crema only.

  python3 benchmarks/build_time.py --rounds 5
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (train_val prototxt, data shape, batch)
NETS = {
    "caffenet": ("examples/imagenet/caffenet_train_val.prototxt", (3, 227, 227), 10),
    "googlenet": ("examples/imagenet/googlenet_train_val.prototxt", (3, 224, 224), 10),
}


def layer_blocks(text):
    """The top-level `layer { ... }` blocks of a prototxt, and the text before the first."""
    blocks, pos = [], 0
    header_end = None
    while True:
        match = re.search(r"^layer\s*\{", text[pos:], re.M)
        if not match:
            break
        start = pos + match.start()
        if header_end is None:
            header_end = start
        end, depth = pos + match.end(), 1
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        blocks.append(text[start:end])
        pos = end
    return text[:header_end or 0], blocks


def with_input(name, workdir):
    source, shape, batch = NETS[name]
    header, blocks = layer_blocks(open(os.path.join(ROOT, source)).read())
    kept = [b for b in blocks if not re.search(r"type:\s*[\"']Data[\"']", b)]
    dims = " ".join("dim: %d" % d for d in (batch,) + shape)
    net = (re.sub(r"^layer.*", "", header, flags=re.S) +
           'layer { name: "data" type: "Input" top: "data" top: "label" '
           "input_param { shape { %s } shape { dim: %d } } }\n" % (dims, batch) + "\n".join(kept))
    path = os.path.join(workdir, name + ".prototxt")
    with open(path, "w") as f:
        f.write(net)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", default="caffenet,googlenet", help="comma-separated: %s" % ", ".join(NETS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    args = parser.parse_args()
    cpu = "?"
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.nets.split(","):
            prototxt = with_input(name, workdir)
            times = []
            for _ in range(args.rounds):
                out = subprocess.run([args.crema, "time", "--model=" + prototxt, "--iterations=1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True).stdout
                times.append(float(re.search(r"Net built in ([0-9.]+) ms", out).group(1)))
                described = re.search(r"CPU: (.*)", out)
                cpu = described.group(1) if described else cpu
            rows.append((name, times))
    print("CPU: %s; OMP_NUM_THREADS=%s; %d rounds, medians" %
          (cpu, os.environ.get("OMP_NUM_THREADS", "unset"), args.rounds))
    print()
    print("| net (train_val, batch 10) | built in (ms) | rounds (ms) |")
    print("|---|---|---|")
    for name, times in rows:
        print("| %s | %.0f | %s |" % (name, statistics.median(times), " ".join("%.0f" % t for t in times)))


if __name__ == "__main__":
    main()
