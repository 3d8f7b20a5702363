#!/usr/bin/env bash
# Finds Fashion-MNIST (Debian 12's package dataset-fashion-mnist, which puts four gzipped IDX files in
# /usr/share/datasets/fashion-mnist) and converts it into the two LMDBs the examples/fashion_mnist nets read:
#   data/fashion_mnist/fashion_mnist_train_lmdb  (60000 records)
#   data/fashion_mnist/fashion_mnist_test_lmdb   (10000 records)
#
# usage: data/fashion_mnist/get_fashion_mnist.sh [IDX_DIR]     (from any folder, after building crema)
#   IDX_DIR (or FASHION_MNIST_DIR): where train-images-idx3-ubyte.gz and the three others are read from
#   (default /usr/share/datasets/fashion-mnist).
# Environment: CREMA_BUILD_DIR (the build directory holding tools/convert_mnist, default build, relative to
# the repository root), OUTPUT_DIR (default data/fashion_mnist, relative to the repository root); for data sets
# made from some of Fashion-MNIST (examples/finetune/create_tops_shoes.sh), DB_PREFIX (the LMDBs' names,
# default fashion_mnist) and TRAIN_FLAGS / TEST_FLAGS (more convert_mnist flags for each split, such as
# --label_map and --limit). An LMDB that already exists is kept: remove it to convert again. `make data` runs
# this script.
set -euo pipefail

name=get_fashion_mnist.sh
if [[ $# -gt 1 ]]; then
  echo "usage: data/fashion_mnist/get_fashion_mnist.sh [IDX_DIR]" \
    "(default: \$FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist)" >&2
  exit 1
fi
dataset_dir=${1:-${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}}
# Relative paths given by the caller are taken from the caller's folder, before moving to the repository root.
if [[ -d "$dataset_dir" ]]; then dataset_dir=$(cd "$dataset_dir" && pwd); fi
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

build_dir=${CREMA_BUILD_DIR:-build}
converter="$build_dir/tools/convert_mnist"
output_dir=${OUTPUT_DIR:-data/fashion_mnist}

for split in train t10k; do
  for kind in images-idx3 labels-idx1; do
    if [[ ! -f "$dataset_dir/$split-$kind-ubyte.gz" ]]; then
      echo "$name: $dataset_dir/$split-$kind-ubyte.gz is missing. Install Debian's package:" >&2
      echo "  sudo apt-get install dataset-fashion-mnist" >&2
      echo "(it puts the four files in /usr/share/datasets/fashion-mnist), or give the folder holding them:" \
        "data/fashion_mnist/get_fashion_mnist.sh IDX_DIR" >&2
      exit 1
    fi
  done
done
if [[ ! -x "$converter" ]]; then
  echo "$name: $converter not found; build crema first (make), or set CREMA_BUILD_DIR" >&2
  exit 1
fi

mkdir -p "$output_dir"
convert() {  # convert SPLIT NAME [CONVERT_MNIST_FLAG...]
  local db="$output_dir/${DB_PREFIX:-fashion_mnist}_$2_lmdb"
  if [[ -e "$db" ]]; then
    echo "$name: $db exists; keeping it"
    return
  fi
  # Converted under a temporary name and renamed when complete, so an interrupted run leaves no partial
  # database that a later run would keep.
  local partial="$db.partial.$$"
  # shellcheck disable=SC2064  # expanded now on purpose: $partial is local to this function
  trap "rm -rf '$partial'" EXIT
  "$converter" "$dataset_dir/$1-images-idx3-ubyte.gz" "$dataset_dir/$1-labels-idx1-ubyte.gz" "$partial" "${@:3}"
  mv "$partial" "$db"
  echo "$name: created $db"
  trap - EXIT
}
# shellcheck disable=SC2086  # the flags are words on purpose
convert train train ${TRAIN_FLAGS:-}
# shellcheck disable=SC2086
convert t10k test ${TEST_FLAGS:-}
