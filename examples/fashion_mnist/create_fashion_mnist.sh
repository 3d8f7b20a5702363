#!/usr/bin/env bash
# Converts Debian's Fashion-MNIST (package dataset-fashion-mnist) into the two LMDBs the example nets read:
#   data/fashion_mnist/fashion_mnist_train_lmdb  (60000 records)
#   data/fashion_mnist/fashion_mnist_test_lmdb   (10000 records)
# Run after building (paths are taken from the repository root); CREMA_BUILD_DIR names the build directory (default: build).
# FASHION_MNIST_DIR overrides where the gzipped IDX files are read from. An LMDB that already exists is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."

dataset_dir=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
build_dir=${CREMA_BUILD_DIR:-build}
converter="$build_dir/tools/convert_mnist"
output_dir=data/fashion_mnist

for split in train t10k; do
  for kind in images-idx3 labels-idx1; do
    if [[ ! -f "$dataset_dir/$split-$kind-ubyte.gz" ]]; then
      echo "create_fashion_mnist.sh: $dataset_dir/$split-$kind-ubyte.gz is missing;" \
        "install the dataset-fashion-mnist package (sudo apt-get install dataset-fashion-mnist)" >&2
      exit 1
    fi
  done
done
if [[ ! -x "$converter" ]]; then
  echo "create_fashion_mnist.sh: $converter not found; build crema first (make), or set CREMA_BUILD_DIR" >&2
  exit 1
fi

mkdir -p "$output_dir"
convert() {  # convert SPLIT NAME
  local db="$output_dir/fashion_mnist_$2_lmdb"
  if [[ -e "$db" ]]; then
    echo "create_fashion_mnist.sh: $db exists; keeping it"
    return
  fi
  # Converted under a temporary name and renamed when complete, so an interrupted run leaves no partial
  # database that a later run would keep.
  local partial="$db.partial.$$"
  # shellcheck disable=SC2064  # expanded now on purpose: $partial is local to this function
  trap "rm -rf '$partial'" EXIT
  "$converter" "$dataset_dir/$1-images-idx3-ubyte.gz" "$dataset_dir/$1-labels-idx1-ubyte.gz" "$partial"
  mv "$partial" "$db"
  echo "create_fashion_mnist.sh: created $db"
  trap - EXIT
}
convert train train
convert t10k test
