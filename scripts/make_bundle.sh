#!/usr/bin/env bash
# Packs a build made with CREMA_SHARED_CORE=ON (`make bundle` makes one in build-bundle/) into a relocatable
# bundle: the tools, every test binary, libcrema.so and every shared library they need except glibc's, the
# NVIDIA driver's and the CUDA toolkit's (which the GPU machine has in /usr/local/cuda), a copy of the source
# files the tests read, and run_tests.sh. What, why and how to use it: docs/bundle.md.
#
# Usage: scripts/make_bundle.sh [BUILD_DIR]         (default build-bundle)
#   BUNDLE_FASHION_MNIST=1   also carry Debian's Fashion-MNIST files (data/fashion-mnist, about 31 MB more)
#   BUNDLE_STRIP=0           keep the symbol tables of our own binaries (stripped by default: about half
#                            their size; glog's stack traces then name fewer functions)
# Writes BUILD_DIR/crema-bundle/ and BUILD_DIR/crema-bundle.tar.xz, and prints the tarball's size.
set -euo pipefail
cd "$(dirname "$0")/.."
source_root=$PWD

build_dir=${1:-build-bundle}
name=crema-bundle
stage=$build_dir/$name
tarball=$build_dir/$name.tar.xz
cuda_root=/usr/local/cuda

die() {
  echo "make_bundle.sh: $*" >&2
  exit 1
}

[[ -f $build_dir/CMakeCache.txt ]] || die "$build_dir is no CMake build tree; run \`make bundle\`"
grep -q '^CREMA_SHARED_CORE:BOOL=ON' "$build_dir/CMakeCache.txt" ||
  die "$build_dir was not configured with CREMA_SHARED_CORE=ON (its tests would each hold the whole library)"
[[ -f $build_dir/lib/libcrema.so ]] || die "$build_dir/lib/libcrema.so is missing; build first"
readelf -d "$build_dir/lib/libcrema.so" | grep -q 'libcudart' ||
  die "$build_dir/lib/libcrema.so was built without CUDA (no nvcc in /usr/local/cuda?): a bundle for a GPU machine needs it"
runs=$build_dir/tests/runs.txt
[[ -f $runs ]] || die "$runs is missing (written by tests/CMakeLists.txt); reconfigure $build_dir"
for tool in ldd readelf xz tar; do command -v $tool >/dev/null || die "$tool not found"; done

rm -rf "$stage" "$tarball"
mkdir -p "$stage"/{bin,tests,lib}

# ---- our binaries ------------------------------------------------------------------------------------------
is_elf() { [[ -f $1 && $(head -c 4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]; }
for tool in "$build_dir"/tools/*; do
  if is_elf "$tool" && [[ -x $tool ]]; then cp "$tool" "$stage/bin/"; fi
done
[[ -x $stage/bin/crema ]] || die "$build_dir/tools/crema is missing; build first"
while read -r _ binary _; do
  [[ -n ${binary:-} && ! -e $stage/tests/$binary ]] || continue
  [[ -x $build_dir/tests/$binary ]] || die "$build_dir/tests/$binary is missing; build first"
  cp "$build_dir/tests/$binary" "$stage/tests/"
done <"$runs"
cp "$runs" "$stage/tests/"
cp "$build_dir/lib/libcrema.so" "$stage/lib/"
# Scripts written for a build tree (data/fashion_mnist/get_fashion_mnist.sh with CREMA_BUILD_DIR) look
# for the tools in tools/.
ln -s bin "$stage/tools"

# Our binaries find lib/ through the run path the build gave them; one without it would load the system's
# copies on this machine and fail on the GPU machine, so it is an error here.
for binary in "$stage"/bin/* "$stage"/tests/test_*; do
  # shellcheck disable=SC2016  # $ORIGIN is the loader's, not the shell's
  rpath=$(readelf -d "$binary" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
  [[ $rpath == '$ORIGIN/../lib'* ]] ||
    die "$binary has run path '$rpath', not \$ORIGIN/../lib first (built without CREMA_SHARED_CORE?)"
done

# ---- the libraries they need -------------------------------------------------------------------------------
# glibc's own libraries: the GPU machine's newer glibc serves every symbol version built against this one.
glibc_names='^(ld-linux-x86-64\.so\.2|linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libnsl\.so\.1|libnss_[a-z]+\.so\.2|libthread_db\.so\.1|libBrokenLocale\.so\.1|libc_malloc_debug\.so\.0)$'
# The driver's libraries and the CUDA toolkit's: the GPU machine's own copies must be used (the driver's must
# match the kernel module; the toolkit's are there in /usr/local/cuda).
gpu_names='^(libcuda\.so\.1|libnvidia-.*|libcudart\.so\..*|libcublas\.so\..*|libcublasLt\.so\..*|libcudnn.*|libcurand\.so\..*|libnccl\.so\..*|libnvrtc.*|libnvJitLink.*|libcufft.*|libcusparse.*|libcusolver.*|libnvToolsExt.*)$'

declare -A bundled=() excluded=()
# ldd lists what each binary needs, directly and through its libraries; the path it resolves is what this
# machine loads, and the copy is made under the name the binaries ask for (the soname).
for binary in "$stage"/bin/* "$stage"/tests/test_* "$stage"/lib/libcrema.so; do
  while read -r soname arrow path _; do
    [[ $arrow == '=>' ]] || continue
    [[ $path != 'not' ]] || die "$(basename "$binary") needs $soname, which is not found on this machine"
    if [[ $soname =~ $glibc_names ]]; then
      excluded[$soname]="glibc"
    elif [[ $soname =~ $gpu_names || $path == $cuda_root/* || $(readlink -f "$path") == /usr/local/cuda* ]]; then
      excluded[$soname]="$path"
    elif [[ $soname != libcrema.so ]]; then
      bundled[$soname]=$path
    fi
  done < <(ldd "$binary")
done
for soname in "${!bundled[@]}"; do cp -L "${bundled[$soname]}" "$stage/lib/$soname"; done
chmod 0755 "$stage"/lib/*.so*

# A bundled library with a run path of its own would look for its needs there before the binaries' run path
# (a RUNPATH hides the executable's RPATH): none of Debian's have one, and a new one is named here.
for lib in "$stage"/lib/*; do
  if readelf -d "$lib" | grep -q 'RUNPATH' && [[ $(basename "$lib") != libcrema.so ]]; then
    echo "make_bundle.sh: warning: $(basename "$lib") has a RUNPATH: $(readelf -d "$lib" | grep RUNPATH)" >&2
  fi
done

# The newest glibc symbol version anything here asks for: the GPU machine's glibc must be at least that.
newest_glibc=$(for f in "$stage"/bin/* "$stage"/tests/test_* "$stage"/lib/*; do
  readelf --dyn-syms -W "$f" | grep -o 'GLIBC_[0-9.]*' || true
done | sort -u -V | tail -1)

if [[ ${BUNDLE_STRIP:-1} =~ ^(1|ON|on)$ ]]; then
  # Only our own binaries: Debian's libraries are stripped already. --strip-unneeded keeps what the dynamic
  # loader needs.
  strip --strip-unneeded "$stage"/bin/* "$stage"/tests/test_* "$stage"/lib/libcrema.so
fi

# ---- the source files the tests read -----------------------------------------------------------------------
# Examples, docs and the test sources themselves (the layer catalogue test reads them), as they are in the
# working tree that was built: run_tests.sh points CREMA_SOURCE_DIR here unless told otherwise.
mkdir -p "$stage/source"
git -C "$source_root" ls-files -z --cached --others --exclude-standard -- examples docs tests proto tools layers src \
  scripts README.md | while IFS= read -r -d '' file; do
  if [[ -f $source_root/$file ]]; then
    mkdir -p "$stage/source/$(dirname "$file")"
    cp -p "$source_root/$file" "$stage/source/$file"
  fi
done

# ---- Fashion-MNIST (optional) ------------------------------------------------------------------------------
if [[ ${BUNDLE_FASHION_MNIST:-0} =~ ^(1|ON|on)$ ]]; then
  fashion=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
  mkdir -p "$stage/data/fashion-mnist"
  for file in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz \
    t10k-labels-idx1-ubyte.gz; do
    [[ -f $fashion/$file ]] || die "$fashion/$file is missing (Debian package dataset-fashion-mnist)"
    cp "$fashion/$file" "$stage/data/fashion-mnist/"
  done
fi

# ---- the runner and a record of what this is ---------------------------------------------------------------
cp scripts/bundle_run_tests.sh "$stage/run_tests.sh"
chmod 0755 "$stage/run_tests.sh"
{
  echo "crema bundle: built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "source (when packed): $(git -C "$source_root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$source_root" \
    diff --quiet HEAD 2>/dev/null || echo ' with uncommitted changes')"
  echo "configuration: $(grep -E '^(CMAKE_BUILD_TYPE|CMAKE_CUDA_ARCHITECTURES|CREMA_[A-Z_]+):' "$build_dir/CMakeCache.txt" |
    grep -vE '_(LIBRARY|INCLUDE|DNN)|CREMA_OPENCV_' | sed 's/:[A-Z]*=/=/' | tr '\n' ' ')"
  echo "needs: x86-64 Linux with glibc >= ${newest_glibc#GLIBC_}; for GPU runs the NVIDIA driver and, in"
  echo "       $cuda_root/lib64 (or LD_LIBRARY_PATH), these libraries it does not carry:"
  for soname in $(printf '%s\n' "${!excluded[@]}" | sort); do
    [[ ${excluded[$soname]} == glibc ]] || echo "         $soname"
  done
  echo "carries: $(ls "$stage/lib" | tr '\n' ' ')"
  if [[ -d $stage/data/fashion-mnist ]]; then echo "data: Fashion-MNIST in data/fashion-mnist"; fi
} >"$stage/BUILD-INFO"

# ---- pack --------------------------------------------------------------------------------------------------
# One xz stream over the whole tree (no threads: xz's threads split the input into blocks compressed apart),
# so the copies of GoogleTest in every test binary are stored about once (-9: a 64 MiB window).
tar -C "$build_dir" --sort=name --owner=0 --group=0 --numeric-owner -cf - "$name" | xz -9 -T1 >"$tarball"

echo "make_bundle.sh: $(du -sh "$stage" | cut -f1) unpacked: $(ls "$stage/bin" | wc -l) tools, $(ls "$stage"/tests/test_* |
  wc -l) test binaries, $(ls "$stage/lib" | wc -l) libraries ($(du -sh "$stage/lib" | cut -f1))"
echo "make_bundle.sh: needs glibc >= ${newest_glibc#GLIBC_}; left to the GPU machine:" \
  "$(for s in "${!excluded[@]}"; do [[ ${excluded[$s]} == glibc ]] || echo "$s"; done | sort | tr '\n' ' ')"
size=$(stat -c %s "$tarball")
echo "make_bundle.sh: $tarball: $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f MiB", s / 1048576 }'))"
if ((size > 60 * 1024 * 1024)); then
  echo "make_bundle.sh: warning: over 60 MiB; with the repository's own files it may not fit the device" \
    "tool's 64 MiB (docs/bundle.md)" >&2
fi
