#!/usr/bin/env bash
# Makes the tops-vs-shoes data sets of the fine-tuning example from Debian's Fashion-MNIST:
#   data/fashion_mnist/tops_shoes_train_lmdb  the first TRAIN_IMAGES (default 300) tops and shoes of the
#                                             training set: few labels, where fine-tuning pays
#   data/fashion_mnist/tops_shoes_test_lmdb   every top and shoe of the test set (7,000 images)
# Label 0: a top (Fashion-MNIST classes 0 T-shirt/top, 2 pullover, 4 coat, 6 shirt); label 1: a shoe (5 sandal,
# 7 sneaker, 9 ankle boot). Trousers, dresses and bags are left out. An existing LMDB is kept.
# CREMA_BUILD_DIR names the build directory (default: build); FASHION_MNIST_DIR where the IDX files are.
set -euo pipefail
cd "$(dirname "$0")/../.."

dataset_dir=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
build_dir=${CREMA_BUILD_DIR:-build}
train_images=${TRAIN_IMAGES:-300}
converter="$build_dir/tools/convert_mnist"
output_dir=data/fashion_mnist
label_map=0:0,2:0,4:0,6:0,5:1,7:1,9:1

if [[ ! -x "$converter" ]]; then
  echo "create_tops_shoes.sh: $converter not found; build crema first (make), or set CREMA_BUILD_DIR" >&2
  exit 1
fi
mkdir -p "$output_dir"
convert() {  # convert SPLIT NAME LIMIT
  local db="$output_dir/tops_shoes_$2_lmdb"
  if [[ -e "$db" ]]; then
    echo "create_tops_shoes.sh: $db exists; keeping it"
    return
  fi
  # Written under a temporary name and renamed when complete, so an interrupted run leaves nothing to keep.
  local partial="$db.partial.$$"
  # shellcheck disable=SC2064  # expanded now on purpose: $partial is local to this function
  trap "rm -rf '$partial'" EXIT
  "$converter" "$dataset_dir/$1-images-idx3-ubyte.gz" "$dataset_dir/$1-labels-idx1-ubyte.gz" "$partial" \
    --label_map=$label_map --limit="$3"
  mv "$partial" "$db"
  trap - EXIT
}
convert train train "$train_images"
convert t10k test -1
