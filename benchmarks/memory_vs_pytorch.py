#!/usr/bin/python3
"""Memory: crema's plan against crema without it and against PyTorch, on the same nets, side by side in one run.

For each net, inference runs the deploy prototxt at --infer-batch in the TEST phase: crema with `crema time
--forward_only --phase=TEST` (memory plan on, then off with --memory_plan=none), PyTorch with the prototxt's layers
as a torch module (benchmarks/caffe_nets.py) in eval mode under torch.inference_mode(). Training runs the same
architecture at --train-batch with a loss: the deploy net's Softmax becomes SoftmaxWithLoss over a label Input, and
crema trains it with `crema train` (SGD with momentum, a few iterations, no snapshot), PyTorch with the same module,
the negative log of the softmax's probability of the label, and torch.optim.SGD with momentum. Each run is a process
of its own, and its peak resident memory is what the kernel reports for it (wait4's ru_maxrss): the runtime, the
parameters, the solver's history and the activations, everything a user's process holds. crema's own account of
its activation memory is printed beside it: the planned bytes (`crema time`'s "Memory plan" line) against the bytes
the same net holds with --memory_plan=none.

Training runs a third time with --memory_plan=recompute (segments of the net computed again in backward instead of
kept): its peak resident memory and planned bytes, and what it costs in time, from `crema time --iterations=3` on
the same net with share and with recompute, one after the other (the milliseconds per iteration of each), and from
the recompute run's own "Recompute:" line (the replays' milliseconds against the rest of the same iterations).

  benchmarks/memory_vs_pytorch.py [--nets googlenet,resnet50] [--infer-batch 10] [--train-batch 32]
                                  [--crema build/tools/crema]

Needs Debian's python3-torch and python3-protobuf; run with /usr/bin/python3 from anywhere.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_nets  # noqa: E402

NETS = {
    "googlenet": "examples/imagenet/googlenet_deploy.prototxt",
    "resnet50": "examples/imagenet/resnet50_deploy.prototxt",
    "caffenet": "examples/imagenet/caffenet_deploy.prototxt",
}
TRAIN_ITERATIONS = 3


def write_net(name, batch, train, path):
    """The deploy net at `batch`; with `train`, its Softmax made a SoftmaxWithLoss over a label Input."""
    from google.protobuf import text_format

    net = caffe_nets.read_net(os.path.join(ROOT, NETS[name]), batch)
    if train:
        data = next(layer for layer in net.layer if layer.type == "Input")
        data.top.append("label")
        data.input_param.shape.add().dim.append(batch)
        softmax = net.layer[-1]
        assert softmax.type == "Softmax", "%s does not end in a Softmax" % name
        softmax.type = "SoftmaxWithLoss"
        softmax.bottom.append("label")
        softmax.top[0] = "loss"
    with open(path, "w") as f:
        f.write(text_format.MessageToString(net))


def peak_rss_mib(command, env=None):
    """Runs `command`; returns its peak resident memory in MiB and its standard error."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (" ".join(command), process.returncode, err[-3000:]))
    return usage.ru_maxrss / 1024.0, err


def torch_worker(name, batch, train):
    """In its own process: the PyTorch run whose peak memory the caller reads."""
    import torch

    net = caffe_nets.read_net(os.path.join(ROOT, NETS[name]), batch)
    model = caffe_nets.torch_net(net)
    shapes = caffe_nets.input_shapes(net)
    inputs = {blob: torch.randn(*shape) for blob, shape in shapes.items()}
    if not train:
        model.eval()
        with torch.inference_mode():
            for _ in range(TRAIN_ITERATIONS):
                model(**inputs)
        return
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4)
    label = torch.randint(0, 1000, (batch,))
    for _ in range(TRAIN_ITERATIONS):
        optimizer.zero_grad()
        (prob,) = model(**inputs)
        loss = -torch.log(prob[torch.arange(batch), label] + 1e-12).mean()
        loss.backward()
        optimizer.step()


def iteration_ms(log):
    return float(re.search(r"Average Forward-Backward: ([0-9.]+) ms", log).group(1))


def recompute_share(log):
    """The replays' time as a fraction of the rest of the iteration, from a `crema time` "Recompute:" line."""
    return float(re.search(r"Recompute: .* ([0-9.]+)% on top of the rest", log).group(1)) / 100


def crema_plan_line(log):
    match = re.search(r"Memory plan[^\n]*", log)
    return match.group(0) if match else "?"


def planned_mib(log):
    """(planned, unplanned) MiB of a `crema time` "Memory plan" line, or the unplanned alone."""
    match = re.search(r"take ([0-9.]+) MiB planned .* instead of ([0-9.]+) MiB unplanned", log)
    if match:
        return float(match.group(1)), float(match.group(2))
    match = re.search(r"take ([0-9.]+) MiB unplanned", log)
    return None, float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", default="googlenet,resnet50")
    parser.add_argument("--infer-batch", type=int, default=10)
    parser.add_argument("--train-batch", type=int, default=32)
    parser.add_argument("--crema", default=os.path.join(ROOT, "build", "tools", "crema"))
    parser.add_argument("--torch-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        name, batch, train = args.torch_worker
        torch_worker(name, int(batch), train == "train")
        return
    env = dict(os.environ, GLOG_logtostderr="1")
    rows, plans, recompute_rows = [], [], []
    with tempfile.TemporaryDirectory() as workdir:
        cpu = None
        for name in args.nets.split(","):
            infer = os.path.join(workdir, name + "_infer.prototxt")
            train = os.path.join(workdir, name + "_train.prototxt")
            write_net(name, args.infer_batch, False, infer)
            write_net(name, args.train_batch, True, train)
            solver = os.path.join(workdir, name + "_solver.prototxt")
            with open(solver, "w") as f:
                f.write('net: "%s"\nbase_lr: 0.001\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: "fixed"\n'
                        "max_iter: %d\ndisplay: 1\nsnapshot_after_train: false\nrandom_seed: 1\n"
                        % (train, TRAIN_ITERATIONS))
            results, logs = {}, {}
            for plan in ("share", "none", "recompute"):
                if plan != "recompute":  # forward alone recomputes nothing
                    time_command = [args.crema, "time", "--model=" + infer, "--phase=TEST", "--forward_only",
                                    "--iterations=2", "--memory_plan=" + plan]
                    rss, log = peak_rss_mib(time_command, env)
                    results["infer", plan] = (rss, planned_mib(log))
                    plans.append("%s inference, --memory_plan=%s: %s" % (name, plan, crema_plan_line(log)))
                    cpu = cpu or re.search(r"CPU: (.*)", log).group(1).strip()
                rss, _ = peak_rss_mib([args.crema, "train", "--solver=" + solver, "--memory_plan=" + plan], env)
                # The training pass's own account, from crema time on the same net (forward and backward).
                _, log = peak_rss_mib([args.crema, "time", "--model=" + train, "--iterations=3",
                                       "--memory_plan=" + plan], env)
                results["train", plan] = (rss, planned_mib(log))
                logs[plan] = log
                plans.append("%s training, --memory_plan=%s: %s" % (name, plan, crema_plan_line(log)))
                if plan == "recompute":
                    plans.append("%s training, --memory_plan=recompute: %s"
                                 % (name, re.search(r"Recompute:[^\n]*", log).group(0)))
            for mode in ("infer", "train"):
                torch_rss, _ = peak_rss_mib([sys.executable, os.path.abspath(__file__), "--torch-worker", name,
                                             str(args.infer_batch if mode == "infer" else args.train_batch), mode])
                # The plan's bytes against what the same net holds without one (--memory_plan=none: layers then
                # also keep what they save for a backward pass, as oneDNN's LRN and pooling do).
                planned = results[mode, "share"][1][0]
                unplanned = results[mode, "none"][1][1]
                rows.append((name, "inference (batch %d)" % args.infer_batch if mode == "infer"
                             else "training (batch %d)" % args.train_batch,
                             planned, unplanned, results[mode, "share"][0], results[mode, "none"][0], torch_rss))
                if mode == "train":
                    recompute_rows.append((name, args.train_batch, results["train", "recompute"][1][0], unplanned,
                                           results["train", "recompute"][0], torch_rss, iteration_ms(logs["share"]),
                                           iteration_ms(logs["recompute"]), recompute_share(logs["recompute"])))
    print("CPU:", cpu)
    for line in plans:
        print(line)
    print()
    print("| net | run | crema activations, planned | without a plan | planned/unplanned | crema peak RSS | "
          "crema peak RSS, no plan | PyTorch peak RSS | crema/PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, run, planned, unplanned, rss, rss_none, torch_rss in rows:
        print("| %s | %s | %.1f MiB | %.1f MiB | %.0f%% | %.0f MiB | %.0f MiB | %.0f MiB | %.2f |"
              % (name, run, planned, unplanned, 100 * planned / unplanned, rss, rss_none, torch_rss,
                 rss / torch_rss))
    print()
    print("| net | training with recompute | planned | planned/unplanned | crema peak RSS | PyTorch peak RSS | "
          "crema/PyTorch | ms/iteration, share | ms/iteration, recompute | extra time | replays/rest |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, batch, planned, unplanned, rss, torch_rss, share_ms, recompute_ms, replays in recompute_rows:
        print("| %s | batch %d | %.1f MiB | %.0f%% | %.0f MiB | %.0f MiB | %.2f | %.0f | %.0f | %+.0f%% | %.0f%% |"
              % (name, batch, planned, 100 * planned / unplanned, rss, torch_rss, rss / torch_rss, share_ms,
                 recompute_ms, 100 * (recompute_ms / share_ms - 1), 100 * replays))


if __name__ == "__main__":
    main()
