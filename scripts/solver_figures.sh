#!/usr/bin/env bash
# Trains each example solver of docs/solvers.md for ITERATIONS iterations (default: each file's own max_iter)
# and prints one Markdown table row per solver: the solver file, the iterations, the wall time and the last test
# outputs. Snapshots go to a temporary folder, logs to $CREMA_BUILD_DIR/solver_figures/ (default build/).
#   scripts/solver_figures.sh [ITERATIONS] [SOLVER.prototxt ...]
# Without solver files: the six published solvers of the LeNet and autoencoder examples.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${CREMA_BUILD_DIR:-build}
crema="$build_dir/tools/crema"
iterations=${1:-}
shift || true
solvers=("$@")
if [[ ${#solvers[@]} -eq 0 ]]; then
  solvers=(examples/mnist/mnist_autoencoder_solver.prototxt examples/mnist/mnist_autoencoder_solver_nesterov.prototxt
           examples/mnist/mnist_autoencoder_solver_adagrad.prototxt examples/mnist/mnist_autoencoder_solver_adadelta.prototxt
           examples/fashion_mnist/lenet_solver_adam.prototxt examples/fashion_mnist/lenet_solver_rmsprop.prototxt)
fi
[[ -x "$crema" ]] || { echo "solver_figures.sh: $crema not found; build first (make)" >&2; exit 1; }
logs="$build_dir/solver_figures"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$logs"

echo "| solver | iterations | wall time | last test outputs |"
echo "|---|---|---|---|"
for solver in "${solvers[@]}"; do
  name=$(basename "$solver" .prototxt)
  copy="$scratch/$name.prototxt"
  # The file as published, with the snapshots moved out of the tree and, if asked, fewer iterations.
  sed -e "s|^snapshot_prefix:.*|snapshot_prefix: \"$scratch/$name\"|" -e 's|^snapshot:.*|snapshot: 0|' "$solver" > "$copy"
  if [[ -n "$iterations" ]]; then sed -i "s|^max_iter:.*|max_iter: $iterations|" "$copy"; fi
  echo "snapshot_after_train: false" >> "$copy"
  start=$(date +%s)
  GLOG_logtostderr=1 "$crema" train --solver="$copy" > "$logs/$name.log" 2>&1
  seconds=$(( $(date +%s) - start ))
  ran=$(grep -o '^max_iter: [0-9]*' "$copy" | awk '{print $2}')
  # The outputs of the last test pass: every "Test net output" line after the last "Testing net (#0)".
  outputs=$(awk '/Testing net \(#0\)/ { n = 0; delete out }
                 /Testing net \(#[0-9]+\)/ { match($0, /#[0-9]+/); net = substr($0, RSTART, RLENGTH) }
                 /Test net output #[0-9]+:/ { sub(/.*Test net output #[0-9]+: /, ""); sub(/ \(\*.*/, "");
                                              out[n++] = net " " $0 }
                 END { for (i = 0; i < n; ++i) printf "%s%s", (i ? "; " : ""), out[i] }' "$logs/$name.log")
  echo "| \`$solver\` | $ran | ${seconds} s | $outputs |"
done
