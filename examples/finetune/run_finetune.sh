#!/usr/bin/env bash
# The fine-tuning example end to end (`make finetune` runs it): README.md explains each step.
#   1. the tops-vs-shoes data sets (create_tops_shoes.sh);
#   2. the base model, examples/fashion_mnist/lenet_iter_10000.caffemodel, trained by `make demo`'s solver when
#      it is not there yet (a few minutes);
#   3. the baseline: the new net trained from its fillers alone (no --weights);
#   4. the fine-tuning: the same run starting from the base model's layers;
#   5. both test accuracies, side by side.
# Logs go to $CREMA_BUILD_DIR (default: build); the fine-tuned weights to examples/finetune/.
set -euo pipefail
cd "$(dirname "$0")/../.."

build_dir=${CREMA_BUILD_DIR:-build}
crema="$build_dir/tools/crema"
base=examples/fashion_mnist/lenet_iter_10000.caffemodel
solver=examples/finetune/lenet_finetune_solver.prototxt
export GLOG_logtostderr=1

if [[ ! -x "$crema" ]]; then
  echo "run_finetune.sh: $crema not found; build crema first (make), or set CREMA_BUILD_DIR" >&2
  exit 1
fi
CREMA_BUILD_DIR="$build_dir" bash examples/finetune/create_tops_shoes.sh
if [[ ! -f "$base" ]]; then
  echo "run_finetune.sh: training the base model $base first"
  "$crema" train --solver=examples/fashion_mnist/lenet_solver.prototxt 2>&1 | tee "$build_dir/finetune_base.log"
fi

# The baseline runs first, so that the snapshot left in examples/finetune/ is the fine-tuned one.
"$crema" train --solver="$solver" 2>&1 | tee "$build_dir/finetune_scratch.log"
"$crema" train --solver="$solver" --weights="$base" 2>&1 | tee "$build_dir/finetune.log"

final_accuracy() { awk '/Test net output #[0-9]+: accuracy = / { accuracy = $NF } END { print accuracy }' "$1"; }
scratch=$(final_accuracy "$build_dir/finetune_scratch.log")
tuned=$(final_accuracy "$build_dir/finetune.log")
if [[ -z "$scratch" || -z "$tuned" ]]; then
  echo "run_finetune.sh: no test accuracy in $build_dir/finetune*.log" >&2
  exit 1
fi
echo "Tops vs shoes, 7000 test images: from the fillers alone $scratch; fine-tuned from $base $tuned"
