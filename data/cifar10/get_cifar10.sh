#!/usr/bin/env bash
# Finds CIFAR-10 (the binary version, cifar-10-binary.tar.gz, which you download yourself: it is not in Debian)
# and converts it into what the examples/cifar10 nets read:
#   data/cifar10/cifar10_train_lmdb   the 50000 training images (data_batch_1..5.bin, in order), 3x32x32, B G R
#   data/cifar10/cifar10_test_lmdb    the 10000 test images (test_batch.bin)
#   data/cifar10/mean.binaryproto     the mean image of the training set
# and links examples/cifar10/cifar10_{train,test}_lmdb and examples/cifar10/mean.binaryproto to them (the
# paths the full_sigmoid nets name, as Caffe's create_cifar10.sh wrote them).
#
# usage: data/cifar10/get_cifar10.sh [PATH]     (from any folder, after building crema)
#   PATH: cifar-10-binary.tar.gz, a folder holding it or its extracted cifar-10-batches-bin/, or that folder
#   itself (data_batch_1.bin ... data_batch_5.bin, test_batch.bin). Default: data/cifar10/. A tarball is
#   extracted into data/cifar10/cifar-10-batches-bin/.
# Route: data/cifar10/cifar10_to_images.py writes the images as PNG files with train.txt and test.txt, then
# convert_imageset makes the LMDBs (list order, not shuffled) and compute_image_mean the mean file. The PNG
# files are removed at the end unless KEEP_IMAGES=1 (they stay in data/cifar10/images/).
# Environment: CREMA_BUILD_DIR (the build directory holding tools/convert_imageset and
# tools/compute_image_mean, default build, relative to the repository root), OUTPUT_DIR (default data/cifar10,
# relative to the repository root; the examples/cifar10 links are made only for the default), PYTHON (default
# python3). An LMDB or mean file that already exists is kept: remove it to convert again.
set -euo pipefail

name=get_cifar10.sh
url=https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz
tarball_name=cifar-10-binary.tar.gz
batches_name=cifar-10-batches-bin
batch_files=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin)
record_bytes=3073  # a label byte and 3 x 32 x 32 pixel bytes

if [[ $# -gt 1 ]]; then
  echo "usage: data/cifar10/get_cifar10.sh [PATH]" \
    "(PATH: $tarball_name, or a folder holding it or $batches_name/)" >&2
  exit 1
fi
given=${1:-}
# A path given by the caller is taken from the caller's folder, before moving to the repository root.
if [[ -n $given && -e $given ]]; then given="$(cd "$(dirname "$given")" && pwd)/$(basename "$given")"; fi
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo_root=$PWD

build_dir=${CREMA_BUILD_DIR:-build}
output_dir=${OUTPUT_DIR:-data/cifar10}
python=${PYTHON:-python3}
train_db="$output_dir/cifar10_train_lmdb"
test_db="$output_dir/cifar10_test_lmdb"
mean="$output_dir/mean.binaryproto"

# Everything is written under a temporary name and renamed when complete; an interrupted run leaves nothing
# that a later run would take for finished.
partials=()
cleanup() { if [[ ${#partials[@]} -gt 0 ]]; then rm -rf "${partials[@]}"; fi; }
trap cleanup EXIT

link_examples() {  # the full_sigmoid nets read examples/cifar10/...; the others read data/cifar10/...
  [[ $output_dir == data/cifar10 || $output_dir == "$repo_root/data/cifar10" ]] || {
    echo "$name: OUTPUT_DIR is not data/cifar10: no links made in examples/cifar10/"
    return
  }
  local item
  for item in cifar10_train_lmdb cifar10_test_lmdb mean.binaryproto; do
    local link="examples/cifar10/$item"
    if [[ -e $link && ! -L $link ]]; then
      echo "$name: $link exists and is not a link; keeping it"
    else
      ln -sfn "../../data/cifar10/$item" "$link"
      echo "$name: $link -> data/cifar10/$item"
    fi
  done
}

if [[ -e $train_db && -e $test_db && -e $mean ]]; then
  echo "$name: $train_db, $test_db and $mean exist; keeping them"
  link_examples
  exit 0
fi

for tool in convert_imageset compute_image_mean; do
  if [[ ! -x "$build_dir/tools/$tool" ]]; then
    echo "$name: $build_dir/tools/$tool not found; build crema first (make), or set CREMA_BUILD_DIR" >&2
    exit 1
  fi
done
if ! "$python" -c '' 2>/dev/null; then
  echo "$name: $python not found; install it (sudo apt-get install python3) or set PYTHON" >&2
  exit 1
fi

# ---- find the data ---------------------------------------------------------------------------------------
has_batches() { local f; for f in "${batch_files[@]}"; do [[ -f $1/$f ]] || return 1; done; }
not_found() {
  {
    echo "$name: CIFAR-10 not found: $1"
    echo "CIFAR-10 is not packaged in Debian. Download its binary version (about 170 MB):"
    echo "  $url"
    echo "and put $tarball_name in $output_dir/ (or give its path: data/cifar10/get_cifar10.sh PATH/$tarball_name),"
    echo "then run this script again. An extracted $batches_name/ folder is found in the same places."
  } >&2
  exit 1
}

# Finds the batch files (extracting a tarball when needed) and writes them as PNG images with their lists.
make_images() {
  local f size missing extract
  batch_dir='' tarball=''
  if [[ -n $given ]]; then
    if [[ -f $given ]]; then
      tarball=$given
    elif [[ -d $given ]]; then
      if has_batches "$given"; then batch_dir=$given
      elif has_batches "$given/$batches_name"; then batch_dir=$given/$batches_name
      elif [[ -f $given/$tarball_name ]]; then tarball=$given/$tarball_name
      else not_found "$given holds neither $tarball_name nor $batches_name/ with ${batch_files[*]}"
      fi
    else
      not_found "$given does not exist"
    fi
  elif has_batches "$output_dir/$batches_name"; then
    batch_dir=$output_dir/$batches_name
  elif [[ -f $output_dir/$tarball_name ]]; then
    tarball=$output_dir/$tarball_name
  else
    missing="$output_dir/$tarball_name"
    if [[ -d $output_dir/$batches_name ]]; then
      for f in "${batch_files[@]}"; do
        [[ -f $output_dir/$batches_name/$f ]] || { missing="$output_dir/$batches_name/$f"; break; }
      done
    fi
    not_found "$missing is missing"
  fi

  mkdir -p "$output_dir"
  if [[ -n $tarball ]]; then
    if has_batches "$output_dir/$batches_name"; then
      echo "$name: $output_dir/$batches_name is already extracted; using it (not $tarball)"
    else
      echo "$name: extracting $tarball into $output_dir/"
      extract="$output_dir/extract.partial.$$"
      partials+=("$extract")
      mkdir "$extract"
      if ! tar -xzf "$tarball" -C "$extract"; then
        echo "$name: cannot extract $tarball (a damaged or incomplete download?); download it again from $url" >&2
        exit 1
      fi
      if ! has_batches "$extract/$batches_name"; then
        echo "$name: $tarball has no $batches_name/ with ${batch_files[*]}: is it the binary version" \
          "($tarball_name from $url, not the Python or MATLAB one)?" >&2
        exit 1
      fi
      rm -rf "${output_dir:?}/$batches_name"
      mv "$extract/$batches_name" "$output_dir/$batches_name"
      rm -rf "$extract"
    fi
    batch_dir=$output_dir/$batches_name
  fi
  echo "$name: reading $batch_dir"
  for f in "${batch_files[@]}"; do
    size=$(stat -c %s "$batch_dir/$f")
    if (( size == 0 || size % record_bytes )); then
      echo "$name: $batch_dir/$f holds $size bytes, not whole $record_bytes-byte records (a damaged download?);" \
        "get $tarball_name again from $url" >&2
      exit 1
    fi
    if (( size != 10000 * record_bytes )); then
      echo "$name: warning: $batch_dir/$f holds $(( size / record_bytes )) records, not CIFAR-10's 10000"
    fi
  done

  if [[ -f $image_dir/train.txt && -f $image_dir/test.txt ]]; then
    echo "$name: $image_dir exists; using its images and lists"
  else
    partials+=("$image_dir.partial.$$")
    "$python" data/cifar10/cifar10_to_images.py "$batch_dir" "$image_dir.partial.$$"
    rm -rf "$image_dir"
    mv "$image_dir.partial.$$" "$image_dir"
  fi
}

convert() {  # convert SPLIT DB
  if [[ -e $2 ]]; then
    echo "$name: $2 exists; keeping it"
    return
  fi
  partials+=("$2.partial.$$")
  "$build_dir/tools/convert_imageset" --check_size "$image_dir/" "$image_dir/$1.txt" "$2.partial.$$"
  mv "$2.partial.$$" "$2"
  echo "$name: created $2"
}
image_dir="$output_dir/images"
if [[ ! -e $train_db || ! -e $test_db ]]; then make_images; fi
convert train "$train_db"
convert test "$test_db"

if [[ -e $mean ]]; then
  echo "$name: $mean exists; keeping it"
else
  partials+=("$mean.partial.$$")
  "$build_dir/tools/compute_image_mean" "$train_db" "$mean.partial.$$"
  mv "$mean.partial.$$" "$mean"
  echo "$name: created $mean"
fi

if [[ ${KEEP_IMAGES:-0} == 1 ]]; then
  echo "$name: keeping the PNG images and lists in $image_dir (KEEP_IMAGES=1)"
else
  rm -rf "$image_dir"
fi
link_examples
