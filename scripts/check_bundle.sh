#!/usr/bin/env bash
# Shows that a bundle (scripts/make_bundle.sh) stands on its own, on this machine: unpacks it in a fresh
# folder, and in a private mount namespace where /usr/lib/x86_64-linux-gnu holds nothing but glibc's libraries
# (and the four the shell's own tools need: bash, grep, sed, mkdir), so that no -dev package's library can be
# found, (1) checks with ldd that every binary finds every library in the bundle's lib/, in glibc or in the
# CUDA toolkit (/usr/local/cuda), and (2) runs the bundle's run_tests.sh with a clean environment.
# Needs root (unshare and mount); see docs/bundle.md.
#
# Usage: scripts/check_bundle.sh [TARBALL [RUN_TESTS_ARGUMENTS ...]]   (default build-bundle/crema-bundle.tar.xz)
#   CHECK_DIR=/tmp/bundle_check   where to unpack (emptied first)
#   CHECK_LDD_ONLY=1              skip the test run
#   CREMA_SOURCE_DIR=...          handed to run_tests.sh (default: the bundle's own copy of the sources)
set -euo pipefail

if [[ ${1:-} != --inside ]]; then
  tarball=$(readlink -f "${1:-build-bundle/crema-bundle.tar.xz}")
  (($# > 0)) && shift
  [[ -f $tarball ]] || { echo "check_bundle.sh: $tarball not found; run \`make bundle\` first" >&2; exit 1; }
  [[ $(id -u) == 0 ]] || { echo "check_bundle.sh: needs root (unshare, mount)" >&2; exit 1; }
  check_dir=${CHECK_DIR:-/tmp/bundle_check}
  rm -rf "$check_dir"
  mkdir -p "$check_dir/visible-libs"
  tar -xf "$tarball" -C "$check_dir"

  # What stays visible: glibc's libraries as its package lists them (the loader among them), and what the
  # shell tools that the runner and the tests call need (cp and mv: libacl, libattr, libselinux; grep: pcre2).
  libdir=/usr/lib/x86_64-linux-gnu
  dpkg -L libc6 | grep -E "^(/usr)?/lib/x86_64-linux-gnu/[^/]+\.so[.0-9]*$" | xargs -n1 basename |
    sort -u >"$check_dir/glibc-names"
  tools=(bash sh cat cp mv rm ls mkdir mktemp grep sed awk sort head tail tr seq sleep kill timeout env nproc gzip)
  for tool in "${tools[@]}"; do ldd "$(readlink -f "$(command -v "$tool")")" 2>/dev/null || true; done |
    awk '$2 == "=>" { print $1 }' | sort -u >"$check_dir/tool-names"
  sort -u "$check_dir/glibc-names" "$check_dir/tool-names" | while read -r soname; do
    cp -L "$libdir/$soname" "$check_dir/visible-libs/"
  done
  exec unshare --mount --propagation private "$0" --inside "$check_dir" "$@"
fi

# ---- inside the private mount namespace ------------------------------------------------------------------
shift
check_dir=$1
shift
bundle=$check_dir/crema-bundle
mount --bind "$check_dir/visible-libs" /usr/lib/x86_64-linux-gnu
echo "check_bundle.sh: /usr/lib/x86_64-linux-gnu now holds only: $(ls /usr/lib/x86_64-linux-gnu | tr '\n' ' ')"

# (1) Every library of every binary resolves into the bundle, glibc's folder or the CUDA toolkit, through the
# binaries' own run paths (no LD_LIBRARY_PATH). The CUDA toolkit's folder stays visible (the GPU machine has
# one); anything else is an error, "not found" above all.
bad=0 checked=0
# The executables' lists hold every library they load, directly or not; the bundled libraries other than
# libcrema.so find their own needs only through an executable's run path, so they are not checked alone.
for binary in "$bundle"/bin/* "$bundle"/tests/test_* "$bundle"/lib/libcrema.so; do
  checked=$((checked + 1))
  while read -r soname arrow path _; do
    [[ $arrow == '=>' ]] || continue
    case $(readlink -f "$path" 2>/dev/null || echo "$path") in
      "$bundle"/lib/* | /usr/lib/x86_64-linux-gnu/* | /usr/local/cuda*/*) ;;
      *)
        echo "check_bundle.sh: $(basename "$binary"): $soname => $path" >&2
        bad=$((bad + 1))
        ;;
    esac
    if [[ $path == /usr/lib/x86_64-linux-gnu/* ]] && ! grep -qx "$soname" "$check_dir/glibc-names"; then
      echo "check_bundle.sh: $(basename "$binary") takes $soname from the system, where only the shell's" \
        "tools were let see it" >&2
      bad=$((bad + 1))
    fi
  done < <(ldd "$binary" 2>&1)
done
echo "check_bundle.sh: ldd: $checked binaries and libraries, $bad unresolved or resolved outside the bundle"
((bad == 0)) || exit 1
[[ ${CHECK_LDD_ONLY:-0} == 1 ]] && exit 0

# (2) The tests, from a folder that is not the bundle's, with nothing of this shell's environment.
cd "$check_dir"
exec env -i PATH=/usr/bin:/bin HOME=/tmp ${CREMA_SOURCE_DIR:+CREMA_SOURCE_DIR=$CREMA_SOURCE_DIR} \
  "$bundle/run_tests.sh" "$@"
