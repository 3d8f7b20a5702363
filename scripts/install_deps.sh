#!/usr/bin/env bash
# Installs every build and run-time dependency of crema on Debian 12 with apt-get.
# Usage: scripts/install_deps.sh            (run as root, or with sudo available)
#        scripts/install_deps.sh sanitize   the above, and clang with its sanitizer and libFuzzer run-times and
#                                           LLVM's OpenMP, for `make sanitize` and `make fuzz`
set -euo pipefail

packages=(
  build-essential cmake pkg-config lld
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  libopenblas-dev libdnnl-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libopencv-dnn-dev
  liblmdb-dev libleveldb-dev libhdf5-dev zlib1g-dev
  libopenmpi-dev openmpi-bin iproute2
  libgtest-dev libgmock-dev libcpp-httplib-dev
  python3-dev pybind11-dev python3-numpy python3-pytest python3-protobuf python3-pydot
  graphviz chromium chromium-driver
  dataset-fashion-mnist
)
case "${1:-}" in
  "") ;;
  sanitize) packages+=(clang libclang-rt-14-dev libomp-dev) ;;
  *)
    echo "install_deps.sh: unknown argument '$1' (give none, or 'sanitize')" >&2
    exit 1
    ;;
esac

if [ "$(id -u)" -eq 0 ]; then
  sudo_cmd=()
elif command -v sudo >/dev/null 2>&1; then
  sudo_cmd=(sudo)
else
  echo "install_deps.sh: needs root or sudo to run apt-get; run it as root." >&2
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_deps.sh: apt-get not found; this script supports Debian 12 (bookworm)." >&2
  echo "Install by hand: ${packages[*]}" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps.sh: every dependency is already installed."
  exit 0
fi

echo "install_deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q || { echo "install_deps.sh: apt-get update failed (is the network up?)" >&2; exit 1; }
if ! "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  echo "install_deps.sh: apt-get install failed for: ${missing[*]}" >&2
  exit 1
fi
echo "install_deps.sh: done."
