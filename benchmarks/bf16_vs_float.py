#!/usr/bin/python3
"""bfloat16 against float32, forward and backward, side by side in one run, in crema and in PyTorch.

For each net, crema's `crema time` on the deploy prototxt with force_backward (as benchmarks/cpu_vs_pytorch.py runs
it) in float32 and with --precision=bf16 (convolutions and inner products computing in bf16, everything else in
float32), and PyTorch on the same architecture (benchmarks/caffe_nets.py) in float32 and under its CPU autocast to
bf16 (torch.autocast("cpu", dtype=torch.bfloat16)). The four settings alternate within each round, so that all see
the same load from other tenants; per setting the median of the rounds. PyTorch runs with OPENBLAS_NUM_THREADS=1,
its faster setting on these nets (docs/performance.md). Prints the CPU, whether it has bf16 instructions, and a
Markdown table.

  /usr/bin/python3 benchmarks/bf16_vs_float.py [--rounds 5] [--iterations 10] [--nets caffenet,googlenet,resnet50]

With --inference, crema alone, forward only (`crema time --phase=TEST --forward_only` on the deploy prototxt without
force_backward, so with the inference rewrites): float32, bf16 with every blob in float32 (CREMA_ELEMENT_TYPES=float:
each bf16 step converts its input) and bf16 with bf16 blobs between bf16 steps (plan_element_types), alternating.

With --training, crema alone, whole training iterations (forward, backward and the solver's SGD update with momentum
and weight decay: `crema train` on the net with its Input replaced by DummyData of Gaussian images and a constant label
and its Softmax by SoftmaxWithLoss; ms per iteration from the log's `Speed` over the second `--iterations`
iterations): float32, bf16, and bf16 with the weights' copies made in the pass rather than by the update
(CREMA_DERIVED_WEIGHTS=0), alternating. This is what the update's writing of those copies costs and saves in
training, which `crema time` (forward and backward) does not show. With --training --baseline OTHER_CREMA, this build
against another (an earlier commit's build/tools/crema, copied aside), float32 and bf16 each, alternating: what a change
to the training loop (the solver's update, say) gains on whole iterations.

Needs build/tools/crema, Debian's python3-torch and python3-protobuf.
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
import cpu_vs_pytorch  # noqa: E402

NETS = ["caffenet", "googlenet", "resnet50"]
SETTINGS = ["crema float32", "crema bf16", "PyTorch float32", "PyTorch autocast bf16"]
INFERENCE_SETTINGS = ["crema float32", "crema bf16, float blobs", "crema bf16"]
TRAINING_SETTINGS = ["crema float32", "crema bf16", "crema bf16, copies in the pass"]
BASELINE_SETTINGS = ["crema float32", "baseline float32", "crema bf16", "baseline bf16"]


def torch_worker(name, autocast, iterations):
    """In its own process: mean ms of a forward+backward pass, in float32 or under autocast to bf16."""
    import contextlib
    import time

    import torch

    model, inputs = cpu_vs_pytorch.torch_model(name)
    scope = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if autocast else contextlib.nullcontext

    def step():
        with scope():
            outs = model(**inputs)
        model.zero_grad(set_to_none=False)
        for x in inputs.values():
            x.grad = None
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])

    step()  # untimed, as crema time's first pass
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    print(json.dumps({"forward_backward": (time.perf_counter() - start) * 1000 / iterations}))


def run_torch(name, autocast, iterations):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-worker", name, str(int(autocast)),
                          str(iterations)], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["forward_backward"]


def run_crema(crema, model, precision, iterations):
    env = dict(os.environ, GLOG_logtostderr="1", OMP_WAIT_POLICY="passive")
    log = subprocess.run([crema, "time", "--model=" + model, "--iterations=%d" % iterations,
                          "--precision=" + precision], env=env, capture_output=True, text=True, check=True).stderr
    cpu = re.search(r"CPU: (.*)", log).group(1).strip()
    in_bf16 = len(re.findall(r"compute their products in bfloat16", log)) > 0
    return cpu_vs_pytorch.crema_ms(log, "Average Forward-Backward"), cpu, in_bf16


def record(times, round_index, name, setting, ms):
    times.setdefault((name, setting), []).append(ms)
    print("round %d %s %s: %.1f ms" % (round_index + 1, name, setting, ms), file=sys.stderr)


def print_table(first_line, columns, names, settings, times, row):
    """The CPU line and a Markdown table: `columns` after the net's, and for each net `row(name, batch, medians)`,
    its cells after the net's, medians by setting."""
    print(first_line)
    print()
    print("| net (batch) | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name in names:
        medians = {s: statistics.median(times[(name, s)]) for s in settings}
        print("| %s (%d) | " % (name, cpu_vs_pytorch.NETS[name][1]) + " | ".join(row(name, medians)) + " |")


def run_inference(crema, model, setting, iterations):
    env = dict(os.environ, GLOG_logtostderr="1", OMP_WAIT_POLICY="passive")
    if setting.endswith("float blobs"):
        env["CREMA_ELEMENT_TYPES"] = "float"
    precision = "fp32" if setting.endswith("float32") else "bf16"
    log = subprocess.run([crema, "time", "--model=" + model, "--iterations=%d" % iterations, "--phase=TEST",
                          "--forward_only", "--precision=" + precision], env=env, capture_output=True, text=True,
                         check=True).stderr
    cpu = re.search(r"CPU: (.*)", log).group(1).strip()
    # The blobs the plan keeps in bf16: the names of each "'a', 'b' pass as bfloat16" line.
    groups = re.findall(r"((?:'[^']+'(?:, )?)+) pass(?:es)? as bfloat16", log)
    return cpu_vs_pytorch.crema_ms(log, "Average Forward pass"), cpu, sum(g.count("'") // 2 for g in groups)


def inference(args, names):
    times, blobs, cpu = {}, {}, ""
    with tempfile.TemporaryDirectory() as workdir:
        models = {}
        for name in names:  # the deploy prototxt at the benchmark batch, without force_backward
            with open(cpu_vs_pytorch.write_deploy(name, workdir)) as f:
                text = f.read().replace("force_backward: true\n", "", 1)
            models[name] = os.path.join(workdir, name + "_inference.prototxt")
            with open(models[name], "w") as f:
                f.write(text)
        for round_index in range(args.rounds):
            for name in names:
                for setting in INFERENCE_SETTINGS:
                    ms, cpu, count = run_inference(args.crema, models[name], setting, args.iterations)
                    blobs[(name, setting)] = count
                    record(times, round_index, name, setting, ms)
    print_table("CPU: %s" % cpu, ["crema fp32", "bf16, float blobs", "bf16, bf16 blobs (how many)",
                                  "bf16 blobs vs float blobs", "bf16 vs fp32"], names, INFERENCE_SETTINGS, times,
                lambda name, med: ["%.1f ms" % med["crema float32"], "%.1f ms" % med["crema bf16, float blobs"],
                                   "%.1f ms (%d)" % (med["crema bf16"], blobs[(name, "crema bf16")]),
                                   "%.2fx" % (med["crema bf16, float blobs"] / med["crema bf16"]),
                                   "%.2fx" % (med["crema float32"] / med["crema bf16"])])


def training_net(name, workdir):
    """The deploy net at its benchmark batch as a training net: its Input layer a DummyData of Gaussian images of the
    same shape and a constant label, its final Softmax a SoftmaxWithLoss. The path of the prototxt written."""
    text = open(cpu_vs_pytorch.write_deploy(name, workdir)).read().replace("force_backward: true\n", "", 1)
    start = text.index('type: "Input"')
    params = text.index("input_param", start)
    end = text.index("{", params)
    depth = 0
    for i in range(end, len(text)):  # the input_param block's closing brace
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            end = i + 1
            break
    shape = re.search(r"shape\s*:?\s*\{[^}]*\}", text[params:end]).group(0)
    batch = re.search(r"dim: (\d+)", shape).group(1)
    dummy = ('dummy_data_param { %s shape { dim: %s } data_filler { type: "gaussian" std: 1 } '
             'data_filler { type: "constant" value: 3 } }' % (shape, batch))
    # The images' top first (the first shape and filler are its), then the label's.
    between = re.sub(r'(top: "[^"]+")', r'\1\n  top: "label"', text[start + len('type: "Input"'):params], count=1)
    text = text[:start] + 'type: "DummyData"' + between + dummy + text[end:]
    softmax = text.rindex('type: "Softmax"')
    top = text.index("top:", softmax)
    text = (text[:softmax] + 'type: "SoftmaxWithLoss"\n  ' + text[softmax + len('type: "Softmax"'):top].strip() +
            '\n  bottom: "label"\n  top: "loss"\n' + text[text.index("\n", top) + 1:])
    model = os.path.join(workdir, name + "_train.prototxt")
    with open(model, "w") as f:
        f.write(text)
    solver = os.path.join(workdir, name + "_solver.prototxt")
    return model, solver


def run_training(crema, model, solver, setting, iterations):
    with open(solver, "w") as f:
        f.write('net: "%s"\nbase_lr: 0.0001\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: "fixed"\n'
                'display: %d\nmax_iter: %d\nsolver_mode: CPU\nsnapshot_after_train: false\n'
                % (model, iterations, 2 * iterations + 1))
    env = dict(os.environ, GLOG_logtostderr="1", OMP_WAIT_POLICY="passive")
    if setting.endswith("in the pass"):
        env["CREMA_DERIVED_WEIGHTS"] = "0"
    precision = "fp32" if setting.endswith("float32") else "bf16"
    log = subprocess.run([crema, "train", "--solver=" + solver, "--precision=" + precision], env=env,
                         capture_output=True, text=True, check=True).stderr
    speed = float(re.findall(r"Speed: ([0-9.]+) iter/s", log)[-1])  # the second window of `iterations`
    return 1000.0 / speed


def training(args, names):
    times = {}
    settings = BASELINE_SETTINGS if args.baseline else TRAINING_SETTINGS
    with tempfile.TemporaryDirectory() as workdir:
        nets = {name: training_net(name, workdir) for name in names}
        # The CPU, as `crema time` names it (the training log does not).
        cpu = run_crema(args.crema, cpu_vs_pytorch.write_deploy(names[0], workdir), "fp32", 1)[1]
        for round_index in range(args.rounds):
            for name in names:
                for setting in settings:
                    crema = args.baseline if setting.startswith("baseline") else args.crema
                    ms = run_training(crema, nets[name][0], nets[name][1], setting, args.iterations)
                    record(times, round_index, name, setting, ms)
    if args.baseline:
        print_table("CPU: %s; ms per training iteration (forward, backward, update); baseline %s" % (cpu, args.baseline),
                    ["crema fp32", "baseline fp32", "fp32 gain", "crema bf16", "baseline bf16", "bf16 gain"], names,
                    settings, times,
                    lambda name, med: ["%.1f ms" % med["crema float32"], "%.1f ms" % med["baseline float32"],
                                       "%.2fx" % (med["baseline float32"] / med["crema float32"]),
                                       "%.1f ms" % med["crema bf16"], "%.1f ms" % med["baseline bf16"],
                                       "%.2fx" % (med["baseline bf16"] / med["crema bf16"])])
        return
    print_table("CPU: %s; ms per training iteration (forward, backward, update)" % cpu,
                ["crema fp32", "crema bf16", "bf16, copies in the pass", "bf16 speed-up",
                 "update-written copies' gain"], names, TRAINING_SETTINGS, times,
                lambda name, med: ["%.1f ms" % med["crema float32"], "%.1f ms" % med["crema bf16"],
                                   "%.1f ms" % med["crema bf16, copies in the pass"],
                                   "%.2fx" % (med["crema float32"] / med["crema bf16"]),
                                   "%.2fx" % (med["crema bf16, copies in the pass"] / med["crema bf16"])])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    parser.add_argument("--inference", action="store_true", help="crema forward only, with and without bf16 blobs")
    parser.add_argument("--training", action="store_true",
                        help="crema whole training iterations, with the weights' bf16 copies written by the update "
                             "and made in the pass")
    parser.add_argument("--baseline", default="",
                        help="with --training: another crema to compare with, float32 and bf16, alternating")
    args = parser.parse_args()
    if args.baseline and not args.training:
        parser.error("--baseline compares whole training iterations: give --training too")
    names = args.nets.split(",")
    if args.inference:
        inference(args, names)
        return
    if args.training:
        training(args, names)
        return
    times = {}  # (net, setting) -> [ms per round]
    cpu, bf16_ran = "", True
    with tempfile.TemporaryDirectory() as workdir:
        models = {name: cpu_vs_pytorch.write_deploy(name, workdir) for name in names}
        for round_index in range(args.rounds):
            for name in names:
                for setting in SETTINGS:
                    if setting.startswith("crema"):
                        precision = "bf16" if setting.endswith("bf16") else "fp32"
                        ms, cpu, in_bf16 = run_crema(args.crema, models[name], precision, args.iterations)
                        if precision == "bf16":
                            bf16_ran = bf16_ran and in_bf16
                    else:
                        ms = run_torch(name, setting.endswith("bf16"), args.iterations)
                    record(times, round_index, name, setting, ms)
    print_table("CPU: %s; crema's bf16 layers %s" % (cpu, "computed in bf16" if bf16_ran else
                                                      "fell back to float32 (no bf16 instructions)"),
                ["crema fp32", "crema bf16", "bf16 speed-up", "PyTorch fp32", "PyTorch autocast bf16",
                 "crema bf16 vs PyTorch bf16"], names, SETTINGS, times,
                lambda name, med: ["%.1f ms" % med["crema float32"], "%.1f ms" % med["crema bf16"],
                                   "%.2fx" % (med["crema float32"] / med["crema bf16"]),
                                   "%.1f ms" % med["PyTorch float32"], "%.1f ms" % med["PyTorch autocast bf16"],
                                   "%.2fx" % (med["PyTorch autocast bf16"] / med["crema bf16"])])


if __name__ == "__main__":
    main()
