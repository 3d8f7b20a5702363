#!/usr/bin/env bash
# One session of the GPU proof (docs/gpu-record.md) on a machine with an NVIDIA GPU, run from the repository
# root beside a bundle built with `make bundle BUNDLE_FASHION_MNIST=1`: what the machine is, the whole test suite
# from the bundle, then the GPU benchmark against PyTorch. Everything it prints also goes to files under
# $GPU_PROOF_OUT (default $OUT, else /tmp/gpu-proof): machine.txt, tests.txt, logs.tgz, bench.txt, precision.txt.
#
# Usage: scripts/gpu_proof.sh [tests|bench|precision|all] [RUN_TESTS_ARGS ...]
#   tests      the suite only (RUN_TESTS_ARGS go to run_tests.sh: patterns, -t, -- --gtest_filter=...)
#   bench      the benchmark only (GPU_PROOF_BENCH_ARGS: extra arguments of benchmarks/gpu_vs_pytorch.py)
#   precision  the Fashion-MNIST examples trained on the GPU in float32, bfloat16 and float16, each one's last test
#              accuracy (GPU_PROOF_PRECISION_NETS: "lenet resnet" by default; GPU_PROOF_PRECISION_MAX_ITER: fewer
#              iterations than the examples' for a quick look, their accuracy then not the acceptance's)
#   all        the suite and the benchmark (the default)
#   next       docs/gpu-record.md's "Next run" in one call, the most wanted first, within GPU_PROOF_BUDGET seconds
#              (default 540, under a 600-second command): the suite but test_examples, test_examples' GPU tests, the
#              accuracy in each precision, GoogLeNet and ResNet-50 in float16 with 16-bit blobs and with float ones
#              (CREMA_ELEMENT_TYPES=float), then the float32 benchmark. Each step gets the time left and is skipped,
#              saying so, where less is left than it needs; next.txt sums the steps up, and next.tgz holds each
#              step's files in a folder of its own (the device tool brings back 8 files at most).
# Environment: GPU_PROOF_BUNDLE (default build-bundle/crema-bundle.tar.xz), GPU_PROOF_JOBS (run_tests.sh -j,
# default 8), GPU_PROOF_LIMIT (seconds one test run may take, default 300).
set -uo pipefail

what=${1:-all}
(($#)) && shift
case $what in
  tests | bench | precision | all | next) ;;
  *) echo "gpu_proof.sh: no mode '$what' (tests, bench, precision, all or next)" >&2; exit 2 ;;
esac
out=${GPU_PROOF_OUT:-${OUT:-/tmp/gpu-proof}}
mkdir -p "$out"
tarball=${GPU_PROOF_BUNDLE:-build-bundle/crema-bundle.tar.xz}
bundle=/tmp/crema-bundle

# ---- the machine -------------------------------------------------------------------------------------------
# The CUDA libraries the bundle leaves out: /usr/local/cuda's where it has them, else the ones PyTorch's pip
# packages carry (nvidia/cu13/lib, nvidia/cudnn/lib). A step of `next` (GPU_PROOF_NESTED) has them from its caller.
if [[ -z ${GPU_PROOF_NESTED:-} ]]; then
  cuda_dirs=()
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
    found=$(find -H /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
      /opt /usr/local/lib /usr/lib -maxdepth 8 -name "$lib" 2>/dev/null | head -1)
    if [[ -n $found ]]; then
      dir=$(dirname "$found")
      [[ " ${cuda_dirs[*]} " == *" $dir "* ]] || cuda_dirs+=("$dir")
    else
      echo "gpu_proof.sh: $lib not found on this machine" >&2
    fi
  done
  CUDA_LIB_DIR=$(
    IFS=:
    echo "${cuda_dirs[*]}"
  )
  export CUDA_LIB_DIR
  {
    echo "date: $(date -u)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    nvidia-smi 2>&1 | sed -n '1,4p'
    command -v nvcc >/dev/null && nvcc --version | tail -2
    echo "CUDA libraries used: $CUDA_LIB_DIR"
    for dir in "${cuda_dirs[@]}"; do
      for file in "$dir"/lib{cudnn,cublas,cudart}.so.[0-9]*.*; do [[ -e $file ]] && printf '%s ' "${file##*/}"; done
    done
    echo
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
torch.backends.cudnn.version(), torch.cuda.get_device_name(0))' 2>&1
    lscpu | grep -E '^Model name|^CPU\(s\)'
  } 2>&1 | tee "$out/machine.txt"

  if [[ ! -x $bundle/run_tests.sh ]]; then
    [[ -f $tarball ]] || { echo "gpu_proof.sh: no bundle at $tarball (make bundle BUNDLE_FASHION_MNIST=1)" >&2; exit 2; }
    if command -v xz >/dev/null; then tar xf "$tarball" -C /tmp; else python3 -m tarfile -e "$tarball" /tmp; fi
  fi
  grep -E '^(commit|built|configuration)' "$bundle/BUILD-INFO" 2>/dev/null | tee -a "$out/machine.txt"
fi

status=0
# ---- the suite ---------------------------------------------------------------------------------------------
if [[ $what == all || $what == tests ]]; then
  rm -rf /tmp/gpu-proof-logs  # this call's logs alone (a step of `next` runs after another)
  "$bundle/run_tests.sh" -j "${GPU_PROOF_JOBS:-8}" -t "${GPU_PROOF_LIMIT:-300}" -l /tmp/gpu-proof-logs "$@" 2>&1 |
    tee "$out/tests.txt"
  status=${PIPESTATUS[0]}
  tar czf "$out/logs.tgz" -C /tmp gpu-proof-logs
fi

# ---- the benchmark -----------------------------------------------------------------------------------------
if [[ $what == all || $what == bench ]]; then
  # shellcheck disable=SC2086  # extra arguments as words
  PYTHONUNBUFFERED=1 python3 benchmarks/gpu_vs_pytorch.py --crema "$bundle/bin/crema" --crema-lib-path "$CUDA_LIB_DIR" \
    --nets lenet,cifar10_quick,caffenet,googlenet,resnet50 --batch caffenet=128,googlenet=128,resnet50=64 \
    --allow-tf32 ${GPU_PROOF_BENCH_ARGS:-} 2>&1 | tee "$out/bench.txt"
  ((status == 0)) && status=${PIPESTATUS[0]}
fi
# ---- accuracy in each precision -----------------------------------------------------------------------------
if [[ $what == precision ]]; then
  # The LMDBs from the bundle's data set (once), then each example solver as it is but for its snapshots (in /tmp).
  if [[ ! -d data/fashion_mnist/fashion_mnist_train_lmdb ]]; then
    CREMA_BUILD_DIR=$bundle FASHION_MNIST_DIR=$bundle/data/fashion-mnist bash data/fashion_mnist/get_fashion_mnist.sh
  fi
  : >"$out/precision.txt"
  for net in ${GPU_PROOF_PRECISION_NETS:-lenet resnet}; do
    for precision in fp32 bf16 fp16; do
      run=/tmp/gpu-proof-$net-$precision
      edits=(-e "s|^snapshot_prefix:.*|snapshot_prefix: \"$run\"|")
      [[ -n ${GPU_PROOF_PRECISION_MAX_ITER:-} ]] && edits+=(-e "s|^max_iter:.*|max_iter: $GPU_PROOF_PRECISION_MAX_ITER|")
      sed "${edits[@]}" "examples/fashion_mnist/${net}_solver.prototxt" >"$run-solver.prototxt"
      start=$(date +%s)
      LD_LIBRARY_PATH="$CUDA_LIB_DIR:${LD_LIBRARY_PATH:-}" "$bundle/bin/crema" train --solver="$run-solver.prototxt" \
        --gpu=0 --precision="$precision" >"$run.log" 2>&1
      code=$?
      ((code == 0)) || status=$code
      echo "$net $precision: exit $code, $(($(date +%s) - start)) s, last test:" \
        "$(grep -E 'Test net output #[0-9]+: accuracy' "$run.log" | tail -1 | sed 's/.*accuracy/accuracy/')," \
        "$(grep -E 'compute their products in|asked for half precision|loss scal' "$run.log" | sed 's/^[^]]*\] //' |
          sort -u | cut -c1-160 | tr '\n' ' ')" |
        tee -a "$out/precision.txt"
      cp "$run.log" "$out/"
    done
  done
fi
# ---- the next run: each step above in a call of its own, with what time is left -----------------------------
if [[ $what == next ]]; then
  deadline=$((SECONDS + ${GPU_PROOF_BUDGET:-540}))
  steps=/tmp/gpu-proof-next
  rm -rf "$steps"
  : >"$out/next.txt"
  # step NAME NEEDS [VARIABLE=value ...] MODE [ARGS ...]: this script's MODE as step NAME, its files in $steps/NAME,
  # stopped when the budget is spent; skipped where fewer than NEEDS seconds are left.
  step() {
    local name=$1 needs=$2 left=$((deadline - SECONDS)) start=$SECONDS code
    shift 2
    if ((left < needs)); then
      echo "$name: skipped, $left s left of the budget (it needs $needs)" | tee -a "$out/next.txt"
      return
    fi
    echo "=== $name: $* ($left s left)"
    timeout --kill-after=15 "$left" env GPU_PROOF_NESTED=1 GPU_PROOF_OUT="$steps/$name" "$@"
    code=$?
    ((code == 0)) || status=$code
    echo "$name: exit $code in $((SECONDS - start)) s$( ((code == 124 || code == 137)) && echo ' (the budget ran out)')" |
      tee -a "$out/next.txt"
    for summary in "$steps/$name"/{tests,precision}.txt; do
      [[ -f $summary ]] && grep -E '^run_tests.sh: [0-9]+ runs|^[0-9]+ passed, |^FAIL|: exit' "$summary" | sed 's/^/  /' |
        tee -a "$out/next.txt"
    done
  }
  self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
  # The suite but test_examples (whose CPU checks of the ImageNet nets take minutes and need no GPU), 12 at a time.
  mapfile -t suite < <(awk '$1 != "" && $2 != "test_examples" { print $1 }' "$bundle/tests/runs.txt")
  step suite 60 GPU_PROOF_JOBS=12 GPU_PROOF_LIMIT=240 "$self" tests "${suite[@]}"
  step examples 60 OMP_NUM_THREADS=16 GPU_PROOF_JOBS=1 GPU_PROOF_LIMIT=240 "$self" tests test_examples \
    -- --gtest_filter='*Gpu*:*Cublas*'
  step precision 120 "$self" precision
  half="--nets googlenet,resnet50 --batch googlenet=128,resnet50=64 --rounds 1 --iterations 20 --precision fp16"
  step fp16 90 GPU_PROOF_BENCH_ARGS="$half" "$self" bench
  step fp16-float-blobs 90 CREMA_ELEMENT_TYPES=float GPU_PROOF_BENCH_ARGS="$half" "$self" bench
  step bench 120 GPU_PROOF_BENCH_ARGS="--nets resnet50,googlenet,caffenet --rounds 1 --iterations 20" "$self" bench
  tar czf "$out/next.tgz" -C "$steps" .
  echo "=== the steps"
  cat "$out/next.txt"
fi
exit "$status"
