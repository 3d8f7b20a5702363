#!/usr/bin/env python3
"""crema against PyTorch on an NVIDIA GPU, side by side in one run: the GPU counterpart of cpu_vs_pytorch.py.

For each benchmark net, the same architecture runs forward+backward and forward only in crema and in PyTorch:
crema as `crema time --gpu=N --layer_times=false` on the net's deploy prototxt with force_backward
(forward+backward: whole passes, each timed to the end of its work, no wait after each layer), and the same with
--forward_only (forward); PyTorch on CUDA with the prototxt's layers translated to a torch module by
benchmarks/caffe_nets.py, in the TRAIN phase as crema time runs it (Dropout active), the input requiring a
gradient as crema's forced backward computes one, and the forward-only passes under torch.no_grad() (nothing is
kept for a backward, as in crema's --forward_only). PyTorch runs at each of its settings,
torch.backends.cudnn.benchmark on and off, and the better is compared; it does float32 math without TF32 by
default, as crema's cuDNN engines do (FMA math), and --allow-tf32 adds PyTorch with TF32 as separate columns.
--precision fp16 or bf16 compares half precision instead: crema time --precision=X (its convolutions and inner
products on the tensor cores) against PyTorch under torch.autocast to that type.
Rounds alternate between the peers so both see the same load. Prints the GPU, the settings, a Markdown table of
per-net medians and ratios, and the command line.

  benchmarks/gpu_vs_pytorch.py [--rounds 5] [--iterations 50] [--warmup 5] [--nets lenet,cifar10_quick]
                               [--batch caffenet=128,...] [--crema build/tools/crema] [--crema-lib-path DIR:DIR]
                               [--torch-cuda-libs] [--gpu 0] [--allow-tf32] [--precision fp32|bf16|fp16]
                               [--device cuda|cpu]

The nets are cpu_vs_pytorch.py's: lenet (batch 64), cifar10_quick (100), caffenet (10), googlenet (10) and
resnet50 (8); the first two by default. --batch sets other batch sizes, as the GPU figures of docs/performance.md
do: --nets caffenet,googlenet,resnet50 --batch caffenet=128,googlenet=128,resnet50=64. --crema takes any executable that runs as crema does (a bundle's bin/crema or a launcher
script); --crema-lib-path puts folders before LD_LIBRARY_PATH for crema's runs only, and --torch-cuda-libs
puts the folders of PyTorch's own CUDA libraries (pip's nvidia-* packages) after it, for a machine where crema's
run path (the bundle's lib/, /usr/local/cuda/lib64) does not reach cudart, cuBLAS or cuDNN. --device cpu is a
debug run of the whole pipeline on a machine without a GPU: PyTorch on the CPU and crema without --gpu.

Needs PyTorch with CUDA and Python's protobuf; crema's schema is compiled by protoc where installed, and read by
caffe_nets.py's own reader where not.
"""

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_vs_pytorch  # noqa: E402
from cpu_vs_pytorch import NETS, crema_ms, write_deploy  # noqa: E402

DEFAULT_NETS = ("lenet", "cifar10_quick")


def set_float32_math(torch, tf32):
    """TF32 on or off for cuBLAS's matrix products and cuDNN's convolutions: through the fp32_precision settings
    where PyTorch has them (from 2.9; there the older allow_tf32 flags are deprecated, and mixing the two is an
    error), else through allow_tf32. Returns the settings as read back."""
    def has(backend, name):  # torch.backends.cuda.matmul raises AssertionError for a name it lacks
        try:
            getattr(backend, name)
            return True
        except (AttributeError, AssertionError):
            return False

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if has(matmul, "fp32_precision") and has(getattr(cudnn, "conv", None), "fp32_precision"):
        mode = "tf32" if tf32 else "ieee"
        # cuDNN's own setting and each of its operators' alike: unequal conv and rnn settings are an error where
        # anything reads cuDNN's setting without naming the operator.
        for backend in (matmul, cudnn, cudnn.conv, getattr(cudnn, "rnn", None)):
            if backend is not None and has(backend, "fp32_precision"):
                backend.fp32_precision = mode
        return "cuda.matmul.fp32_precision=%s, cudnn.conv.fp32_precision=%s" % (
            matmul.fp32_precision, cudnn.conv.fp32_precision)
    matmul.allow_tf32 = tf32
    cudnn.allow_tf32 = tf32
    return "cuda.matmul.allow_tf32=%s, cudnn.allow_tf32=%s" % (matmul.allow_tf32, cudnn.allow_tf32)


def set_batches(spec):
    """Applies --batch's NAME=N items to cpu_vs_pytorch.NETS (which both peers read their batch from)."""
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        if name not in NETS or not value.isdigit() or int(value) < 1:
            sys.exit("gpu_vs_pytorch: --batch takes NAME=N items with N >= 1 and NAME of %s; got '%s'"
                     % (", ".join(NETS), item))
        NETS[name] = (NETS[name][0], int(value))


HALF_TYPES = {"bf16": "bfloat16", "fp16": "float16"}


def torch_worker(name, device, iterations, warmup, benchmark, tf32, half):
    """Runs in its own process, one per setting (cuDNN's autotuned choices are cached per process): prints the
    mean ms forward+backward and forward, and what it ran on. `half` ("fp32", "bf16", "fp16"): under
    torch.autocast to that type where not fp32."""
    import time

    import torch

    on_gpu = device.startswith("cuda")
    precision = set_float32_math(torch, tf32)
    torch.backends.cudnn.benchmark = benchmark
    model, inputs = cpu_vs_pytorch.torch_model(name, device)

    def autocast():
        if half == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type="cuda" if on_gpu else "cpu", dtype=getattr(torch, HALF_TYPES[half]))

    def step(backward):
        with autocast():
            if backward:
                cpu_vs_pytorch.torch_step(model, inputs, True)
            else:
                with torch.no_grad():
                    cpu_vs_pytorch.torch_step(model, inputs, False)

    def synchronize():
        if on_gpu:
            torch.cuda.synchronize(device)

    for backward in (True, False):
        for _ in range(warmup):  # untimed: cuDNN's autotuning (with benchmark on), the allocator's pools
            step(backward)
    times = {}
    for key, backward in (("forward_backward", True), ("forward", False)):
        synchronize()
        start = time.perf_counter()
        for _ in range(iterations):
            step(backward)
        synchronize()
        times[key] = (time.perf_counter() - start) * 1000 / iterations
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if on_gpu else None,
        "device": torch.cuda.get_device_name(device) if on_gpu else "%d threads" % torch.get_num_threads(),
        "precision": precision + ("" if half == "fp32" else "; torch.autocast to " + HALF_TYPES[half]),
    }
    print(json.dumps({"times": times, "info": info}))


def run(command, env=None):
    """A command's stdout and stderr; on failure, its end and the command, then exit."""
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        if "error while loading shared libraries" in tail:
            tail += "\n(--crema-lib-path DIRS, or --torch-cuda-libs, adds folders to crema's LD_LIBRARY_PATH)"
        sys.exit("gpu_vs_pytorch: %s exited with %d:\n%s" % (shlex.join(command), done.returncode, tail))
    return done.stdout, done.stderr


def run_torch(name, setting, args):
    benchmark, tf32 = setting
    stdout, _ = run([sys.executable, os.path.abspath(__file__), "--torch-worker", name, args.torch_device,
                     str(args.iterations), str(args.warmup), str(int(benchmark)), str(int(tf32)), args.precision,
                     "--batch", args.batch])
    return json.loads(stdout.strip().splitlines()[-1])


def torch_cuda_lib_dirs():
    """The folders of PyTorch's own CUDA libraries (pip's nvidia-* packages, torch/lib) that hold cudart, cuBLAS
    or cuDNN, found without importing torch."""
    wanted = re.compile(r"lib(cudart|cublas|cublasLt|cudnn)\.so")
    dirs = []
    for package in ("nvidia", "torch"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        for root in (spec.submodule_search_locations or []) if spec else []:
            for folder, subfolders, files in os.walk(root):
                if os.path.relpath(folder, root).count(os.sep) >= 2:
                    subfolders[:] = []
                if any(wanted.match(f) for f in files) and folder not in dirs:
                    dirs.append(folder)
    return dirs


def crema_env(args):
    """crema's environment: glog to stderr, and LD_LIBRARY_PATH with --crema-lib-path first and, with
    --torch-cuda-libs, PyTorch's CUDA libraries last (a bundle's run path, DT_RPATH, comes before either). Not by
    default: where /usr/local/cuda has cuDNN, a cuDNN that loads its sub-libraries through LD_LIBRARY_PATH could
    mix two versions."""
    env = dict(os.environ, GLOG_logtostderr="1")
    parts = [p for p in args.crema_lib_path.split(":") if p] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":")
                                                                 if p]
    if args.torch_cuda_libs:
        parts += [d for d in torch_cuda_lib_dirs() if d not in parts]
    if parts:
        env["LD_LIBRARY_PATH"] = ":".join(parts)
    return env


def run_crema(name, forward_only, args, env, workdir):
    """`crema time` of the net: its milliseconds (forward+backward, or forward with forward_only) and its log."""
    command = [args.crema, "time", "--model=" + write_deploy(name, workdir), "--iterations=%d" % args.iterations,
               "--layer_times=false"]
    if args.device == "cuda":
        command.append("--gpu=%d" % args.gpu)
    if forward_only:
        command.append("--forward_only")
    if args.precision != "fp32":
        command.append("--precision=" + args.precision)
    _, log = run(command, env)
    if forward_only:
        return {"forward": crema_ms(log, "Average Forward pass")}, log
    return {"forward_backward": crema_ms(log, "Average Forward-Backward")}, log


def crema_warnings(log):
    """The distinct warnings and errors of a crema log (a layer with no GPU engine running on the host, say)."""
    found = []
    for message in re.findall(r"^[WE]\d{8} [^\]]*\] (.*)$", log, re.M):
        if message not in found:
            found.append(message)
    return found


def crema_engines(log):
    """Each layer type of a `crema time` log's Engines block with the engines it ran on, in order."""
    block = log.split("Engines:", 1)[-1].split("Average time per layer:", 1)[0]
    engines = {}
    for kind, engine in re.findall(r"\]\s+\S+\t(\S+)\t(\S+)\s*$", block, re.M):
        engines.setdefault(kind, [])
        if engine not in engines[kind]:
            engines[kind].append(engine)
    return ", ".join("%s %s" % (kind, "/".join(e)) for kind, e in engines.items())


def crema_device_query(args, env):
    """crema's own account of the GPU (device_query's name, driver, runtime and cuDNN lines), or why none."""
    done = subprocess.run([args.crema, "device_query", "--gpu=%d" % args.gpu], env=env, capture_output=True,
                          text=True)
    facts = re.findall(r"\] (Name|CUDA driver version|CUDA runtime version|cuDNN version): (.*)", done.stderr)
    if done.returncode != 0 or not facts:
        lines = (done.stdout + done.stderr).strip().splitlines()
        return "failed (%s)" % (lines[-1] if lines else "exit %d" % done.returncode)
    return "; ".join("%s: %s" % (key, value.strip()) for key, value in facts)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=50, help="timed passes of each kind per run")
    parser.add_argument("--warmup", type=int, default=5,
                        help="PyTorch's untimed passes of each kind before the timed ones (crema time makes one)")
    parser.add_argument("--nets", default=",".join(DEFAULT_NETS), help="of: " + ", ".join(NETS))
    parser.add_argument("--batch", default="", help="NAME=N,...: batch sizes other than the nets' own")
    parser.add_argument("--crema", default=os.path.join(cpu_vs_pytorch.ROOT, "build", "tools", "crema"),
                        help="crema's executable, or a launcher that runs it")
    parser.add_argument("--crema-lib-path", default="",
                        help="folders (':'-separated) before LD_LIBRARY_PATH for crema's runs only")
    parser.add_argument("--torch-cuda-libs", action="store_true",
                        help="put PyTorch's own CUDA library folders last in crema's LD_LIBRARY_PATH")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU, for crema's --gpu and PyTorch's cuda:N")
    parser.add_argument("--allow-tf32", action="store_true",
                        help="also run PyTorch with TF32 matrix products and convolutions, as separate columns")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a debug run without a GPU (PyTorch on the CPU, crema without --gpu)")
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                        help="half precision: crema time --precision=X against PyTorch under torch.autocast to it")
    parser.add_argument("--torch-worker", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args()
    set_batches(args.batch)
    if args.torch_worker:
        name, device, iterations, warmup, benchmark, tf32, half = args.torch_worker
        torch_worker(name, device, int(iterations), int(warmup), benchmark == "1", tf32 == "1", half)
        return

    if args.rounds < 1 or args.iterations < 1 or args.warmup < 0:
        parser.error("--rounds and --iterations must be positive, --warmup not negative")
    nets = args.nets.split(",")
    unknown = [name for name in nets if name not in NETS]
    if unknown:
        parser.error("unknown net(s) %s; the nets are %s" % (", ".join(unknown), ", ".join(NETS)))
    crema = shutil.which(args.crema)
    if crema is None:
        parser.error("--crema %s is not an executable" % args.crema)
    args.crema = os.path.abspath(crema)
    args.torch_device = "cuda:%d" % args.gpu if args.device == "cuda" else "cpu"
    env = crema_env(args)

    # PyTorch's settings: (cudnn.benchmark, TF32); the float32 ones are compared with crema, the TF32 ones shown
    # beside them.
    float32_settings = [(True, False), (False, False)]
    tf32_settings = [(True, True), (False, True)] if args.allow_tf32 else []
    results = {}  # (peer, net, setting) -> {"forward_backward": [...], "forward": [...]}
    engines, warnings, torch_info = {}, {}, {}

    def record(peer, name, setting, times):
        for key, ms in times.items():
            results.setdefault((peer, name, setting), {}).setdefault(key, []).append(ms)

    gpu_query = crema_device_query(args, env) if args.device == "cuda" else None
    with tempfile.TemporaryDirectory() as workdir:
        for round_index in range(args.rounds):
            for name in nets:
                for forward_only in (False, True):
                    times, log = run_crema(name, forward_only, args, env, workdir)
                    record("crema", name, None, times)
                    if not forward_only:
                        engines[name] = crema_engines(log)
                    for message in crema_warnings(log):
                        warnings.setdefault(name, [])
                        if message not in warnings[name]:
                            warnings[name].append(message)
                for setting in float32_settings + tf32_settings:
                    out = run_torch(name, setting, args)
                    record("pytorch", name, setting, out["times"])
                    torch_info[setting[1]] = out["info"]
                # Progress as it goes: a run cut short by a time limit still leaves what it measured.
                print("round %d, %s: %s" % (round_index + 1, name, "; ".join(
                    "%s%s %s" % (peer, "" if setting is None else " " + repr(setting),
                                 " ".join("%s %.3g ms" % (key, values[-1]) for key, values in sorted(times.items())))
                    for (peer, net, setting), times in sorted(results.items(), key=repr) if net == name)),
                    file=sys.stderr, flush=True)
            print("round %d of %d done" % (round_index + 1, args.rounds), file=sys.stderr)

    info = torch_info[False]
    if args.device == "cuda":
        print("GPU: %s (PyTorch's torch.cuda.get_device_name); crema device_query: %s" % (info["device"], gpu_query))
    else:
        print("Device: the CPU (--device cpu, a debug run: PyTorch on the CPU with %s, crema time without --gpu)"
              % info["device"])
    print("crema: %s time%s%s --layer_times=false; one untimed pass, then whole passes, each timed to the end of its "
          "work (PyTorch: its timed loop, synchronized at both ends)"
          % (args.crema, " --gpu=%d" % args.gpu if args.device == "cuda" else "",
             "" if args.precision == "fp32" else " --precision=" + args.precision))
    if env.get("LD_LIBRARY_PATH") != os.environ.get("LD_LIBRARY_PATH"):
        print("crema's LD_LIBRARY_PATH: %s" % env["LD_LIBRARY_PATH"])
    print("crema's engines: %s" % "; ".join("%s: %s" % (name, engines[name]) for name in nets))
    for name, messages in warnings.items():
        print("crema's warnings, %s: %s" % (name, " / ".join(messages)))
    print("PyTorch %s (CUDA %s, cuDNN %s) on %s: TRAIN phase, input requiring a gradient, forward-only passes "
          "under torch.no_grad(); %d untimed passes of each kind first; settings cudnn.benchmark on and off, the "
          "better compared" % (info["torch"], info["cuda"], info["cudnn"], args.torch_device, args.warmup))
    print("PyTorch's float32 math: %s%s" % (info["precision"], "; TF32 columns: %s" % torch_info[True]["precision"]
                                            if args.allow_tf32 else ""))
    print("%d rounds of %d iterations each, alternating; per setting the median of the rounds, ms per batch\n"
          % (args.rounds, args.iterations))

    describe = lambda s: "cudnn.benchmark %s" % ("on" if s[0] else "off")

    def medians(peer, name, settings, key):
        return {s: statistics.median(results[(peer, name, s)][key]) for s in settings}

    header = ["net (batch)", "pass", "crema", "PyTorch, each setting", "PyTorch best", "crema's speed vs PyTorch"]
    if tf32_settings:
        header += ["PyTorch TF32, each setting", "PyTorch TF32 best", "vs PyTorch TF32"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in nets:
        for key, label in (("forward_backward", "forward+backward"), ("forward", "forward")):
            crema_ms_median = medians("crema", name, [None], key)[None]
            row = ["%s (%d)" % (name, NETS[name][1]), label, "%.3f" % crema_ms_median]
            for settings in (float32_settings, tf32_settings):
                if not settings:
                    continue
                torch_ms = medians("pytorch", name, settings, key)
                best = min(torch_ms.values())
                row += [" / ".join("%.3f (%s)" % (ms, describe(s)) for s, ms in torch_ms.items()), "%.3f" % best,
                        "%.2fx" % (best / crema_ms_median)]
            print("| " + " | ".join(row) + " |")
    print("\ncrema's speed vs PyTorch: PyTorch's best time / crema's time (above 1, crema is faster), as in "
          "cpu_vs_pytorch.py")
    print("command: %s" % shlex.join([sys.executable] + sys.argv))


if __name__ == "__main__":
    main()
