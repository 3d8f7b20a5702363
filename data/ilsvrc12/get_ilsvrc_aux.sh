#!/usr/bin/env bash
# Finds caffe_ilsvrc12.tar.gz, the ImageNet (ILSVRC-2012) auxiliary files that Caffe published, and extracts it
# into data/ilsvrc12/:
#   synset_words.txt            the 1000 classes, one "nXXXXXXXX words" line each, in label order
#   synsets.txt                 their WordNet ids alone, in the same order
#   train.txt, val.txt          "image label" lists of the training and validation images (for convert_imageset)
#   imagenet_mean.binaryproto   the mean image, 3x256x256, that examples/imagenet and examples/rcnn subtract
# and, when the tarball has them, test.txt, det_synset_words.txt (the 200 ILSVRC-2013 detection classes) and
# imagenet.bet.pickle. The images themselves are not in it: get them from https://image-net.org.
#
# usage: data/ilsvrc12/get_ilsvrc_aux.sh [PATH]     (from any folder)
#   PATH: caffe_ilsvrc12.tar.gz, or a folder holding it. Default: data/ilsvrc12/. The file is not downloaded
#   here: Caffe published it at http://dl.caffe.berkeleyvision.org/caffe_ilsvrc12.tar.gz (about 17 MB).
# Environment: OUTPUT_DIR (default data/ilsvrc12, relative to the repository root). When every required file
# is already there nothing is extracted: remove them to extract again.
set -euo pipefail

name=get_ilsvrc_aux.sh
tarball_name=caffe_ilsvrc12.tar.gz
url=http://dl.caffe.berkeleyvision.org/caffe_ilsvrc12.tar.gz
required=(synset_words.txt synsets.txt train.txt val.txt imagenet_mean.binaryproto)
optional=(test.txt det_synset_words.txt imagenet.bet.pickle)

if [[ $# -gt 1 ]]; then
  echo "usage: data/ilsvrc12/get_ilsvrc_aux.sh [PATH]   (PATH: $tarball_name or a folder holding it)" >&2
  exit 1
fi
given=${1:-}
# A path given by the caller is taken from the caller's folder, before moving to the repository root.
if [[ -n $given && -e $given ]]; then given="$(cd "$(dirname "$given")" && pwd)/$(basename "$given")"; fi
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
output_dir=${OUTPUT_DIR:-data/ilsvrc12}

has_required() { local f; for f in "${required[@]}"; do [[ -s $1/$f ]] || return 1; done; }
not_found() {
  {
    echo "$name: $1"
    echo "Get $tarball_name yourself: Caffe's ILSVRC-2012 auxiliary files (about 17 MB), published at"
    echo "  $url"
    echo "Put it in $output_dir/ (or give its path: data/ilsvrc12/get_ilsvrc_aux.sh PATH/$tarball_name)"
    echo "and run this script again."
  } >&2
  exit 1
}

if [[ -z $given ]] && has_required "$output_dir"; then
  echo "$name: ${required[*]} are in $output_dir; keeping them"
  exit 0
fi

if [[ -n $given ]]; then
  if [[ -f $given ]]; then tarball=$given
  elif [[ -d $given && -f $given/$tarball_name ]]; then tarball=$given/$tarball_name
  elif [[ -d $given ]]; then not_found "$given holds no $tarball_name"
  else not_found "$given does not exist"
  fi
elif [[ -f $output_dir/$tarball_name ]]; then
  tarball=$output_dir/$tarball_name
else
  for f in "${required[@]}"; do
    if [[ ! -s $output_dir/$f ]]; then
      not_found "$output_dir/$f is missing, and there is no $output_dir/$tarball_name to extract it from"
    fi
  done
fi

mkdir -p "$output_dir"
extract="$output_dir/extract.partial.$$"
# shellcheck disable=SC2064  # expanded now on purpose
trap "rm -rf '$extract'" EXIT
mkdir "$extract"
echo "$name: extracting $tarball into $output_dir/"
if ! tar -xzf "$tarball" -C "$extract"; then
  echo "$name: cannot extract $tarball (a damaged or incomplete download?); get $tarball_name again" >&2
  exit 1
fi
# The files sit at the top of Caffe's tarball; a repacked one may hold them in one folder.
content=$extract
if ! has_required "$content"; then
  for dir in "$extract"/*/; do
    if has_required "$dir"; then content=${dir%/}; break; fi
  done
fi
if ! has_required "$content"; then
  for f in "${required[@]}"; do
    if [[ ! -s $content/$f ]]; then
      echo "$name: $tarball has no $f (or it is empty): it is not Caffe's $tarball_name; get it again" >&2
      exit 1
    fi
  done
fi
for f in "${required[@]}" "${optional[@]}"; do
  if [[ -e $content/$f ]]; then
    mv -f "$content/$f" "$output_dir/$f"
    echo "$name: $output_dir/$f"
  fi
done
for f in "${optional[@]}"; do
  [[ -e $output_dir/$f ]] || echo "$name: note: $tarball has no $f (optional)"
done

classes=$(wc -l <"$output_dir/synset_words.txt")
if [[ $classes -ne 1000 ]]; then
  echo "$name: warning: $output_dir/synset_words.txt has $classes lines, not ILSVRC-2012's 1000 classes"
fi
echo "$name: done; the train_val nets of examples/imagenet also need the image LMDBs (examples/imagenet/README.md)"
