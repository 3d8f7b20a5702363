#!/usr/bin/env bash
# Converts a folder of labelled images into what examples/images/train_val.prototxt reads:
#   $OUTPUT_DIR/train_lmdb         the images of IMAGE_DIR/train.txt, resized, in a shuffled order
#   $OUTPUT_DIR/val_lmdb           the images of IMAGE_DIR/val.txt, resized, in list order
#   $OUTPUT_DIR/mean.binaryproto   the mean image of train_lmdb (the nets' transform_param.mean_file)
#
# usage: examples/images/create_imageset.sh IMAGE_DIR
#   IMAGE_DIR/train.txt and IMAGE_DIR/val.txt list the images, one "path label" line each, the path relative to
#   IMAGE_DIR (it may hold spaces), the label an integer from 0 to the number of classes - 1.
# Environment: OUTPUT_DIR (default data/images, relative to the repository root), RESIZE_HEIGHT and
# RESIZE_WIDTH (default 32 each), CREMA_BUILD_DIR (the build directory, default build). An existing database
# or mean file is kept: remove it to convert again.
set -euo pipefail

if [[ $# -ne 1 || ! -d "$1" ]]; then
  echo "usage: $0 IMAGE_DIR   (a folder holding train.txt, val.txt and the images they list)" >&2
  exit 1
fi
image_dir=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."

build_dir=${CREMA_BUILD_DIR:-build}
output_dir=${OUTPUT_DIR:-data/images}
resize_height=${RESIZE_HEIGHT:-32}
resize_width=${RESIZE_WIDTH:-32}

for tool in convert_imageset compute_image_mean; do
  if [[ ! -x "$build_dir/tools/$tool" ]]; then
    echo "create_imageset.sh: $build_dir/tools/$tool not found; build crema first (make), or set CREMA_BUILD_DIR" >&2
    exit 1
  fi
done
for list in train.txt val.txt; do
  if [[ ! -f "$image_dir/$list" ]]; then
    echo "create_imageset.sh: $image_dir/$list is missing (lines \"path label\", paths relative to $image_dir)" >&2
    exit 1
  fi
done
mkdir -p "$output_dir"

convert() {  # convert SPLIT [FLAGS...]
  local db="$output_dir/$1_lmdb" list="$image_dir/$1.txt"
  shift
  if [[ -e "$db" ]]; then
    echo "create_imageset.sh: $db exists; keeping it"
    return
  fi
  # convert_imageset removes what it wrote when it fails; an interrupted run is caught by the temporary name.
  local partial="$db.partial.$$"
  # shellcheck disable=SC2064  # expanded now on purpose: $partial is local to this function
  trap "rm -rf '$partial'" EXIT
  "$build_dir/tools/convert_imageset" --resize_height="$resize_height" --resize_width="$resize_width" "$@" \
    "$image_dir/" "$list" "$partial"
  mv "$partial" "$db"
  trap - EXIT
  echo "create_imageset.sh: created $db"
}
convert train --shuffle
convert val

mean="$output_dir/mean.binaryproto"
if [[ -e "$mean" ]]; then
  echo "create_imageset.sh: $mean exists; keeping it"
else
  "$build_dir/tools/compute_image_mean" "$output_dir/train_lmdb" "$mean.partial.$$"
  mv "$mean.partial.$$" "$mean"
  echo "create_imageset.sh: created $mean"
fi
