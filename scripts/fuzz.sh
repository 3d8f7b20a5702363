#!/usr/bin/env bash
# Runs crema's fuzz targets (fuzz/fuzz_targets.hpp) with libFuzzer, each for SECONDS (default 60), from the
# programs of a CREMA_FUZZ build: `make fuzz` builds them (with the sanitizers) and calls this.
# Usage: scripts/fuzz.sh BUILD_DIR [SECONDS [TARGET...]]
#   (targets: net_prototxt solver_prototxt caffemodel datum solverstate formula onnx)
#
# Seeds come fresh from fuzz_seeds (the nets of examples/, weights, records and states crema writes); what a
# run finds is kept in BUILD_DIR/fuzz/corpus/<target>/ and grows from run to run. A crash stops that target: its
# input is saved as BUILD_DIR/fuzz/artifacts/<target>-crash-<sha1> and the report printed. Reproduce it with
# `BUILD_DIR/fuzz/fuzz_<target> FILE`; once fixed, copy FILE to tests/fuzz_regressions/<target>/ under a name
# that says what it broke (tests/test_fuzz_targets.cpp replays them). Exit status 1 when any target crashed.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: scripts/fuzz.sh BUILD_DIR [SECONDS [TARGET...]]" >&2
  exit 1
fi
build=$(cd "$1" && pwd)
seconds=${2:-60}
shift $(($# < 2 ? $# : 2))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(net_prototxt solver_prototxt caffemodel datum solverstate formula onnx)
source_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$build/fuzz
for program in fuzz_seeds "${targets[@]/#/fuzz_}"; do
  if [ ! -x "$work/$program" ]; then
    echo "fuzz.sh: $work/$program is missing: build with CREMA_FUZZ=ON (make sanitize)" >&2
    exit 1
  fi
done

rm -rf "$work/seeds"
"$work/fuzz_seeds" "$source_dir" "$work/seeds"
mkdir -p "$work/artifacts"
# The fuzzers run in a folder of their own: relative paths an input names resolve there.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# One fuzzer a core at a time (each for its full SECONDS), each in a folder of its own; reports in target order.
fuzz_one() {
  local target=$1 corpus=$work/corpus/$1 log=$work/fuzz_$1.log
  mkdir -p "$corpus" "$scratch/$target"
  local options=(-max_total_time="$seconds" -timeout=30 -rss_limit_mb=3072 -print_final_stats=1
                 -artifact_prefix="$work/artifacts/$target-")
  [ -f "$work/seeds/$target.dict" ] && options+=(-dict="$work/seeds/$target.dict")
  (cd "$scratch/$target" && "$work/fuzz_$target" "${options[@]}" "$corpus" "$work/seeds/$target") > "$log" 2>&1
}
parallel=$(nproc 2>/dev/null || echo 1)
declare -A pid_of
crashed=()
report() {
  local target=$1 log=$work/fuzz_$1.log
  if wait "${pid_of[$target]}"; then
    echo "=== fuzz_$target: ${seconds} s (corpus: $(find "$work/corpus/$target" -type f | wc -l) inputs, log: $log)"
    grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)|cov: .*(DONE|REDUCE|NEW)' "$log" | tail -4
  else
    echo "=== fuzz_$target: CRASH (the end of $log follows)"
    tail -n 80 "$log"
    crashed+=("$target")
  fi
}
started=()
for target in "${targets[@]}"; do
  if [ ${#started[@]} -ge "$parallel" ]; then
    report "${started[0]}"
    started=("${started[@]:1}")
  fi
  echo "=== fuzz_$target: starting, ${seconds} s"
  fuzz_one "$target" &
  pid_of[$target]=$!
  started+=("$target")
done
for target in "${started[@]}"; do report "$target"; done

if [ ${#crashed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${crashed[*]}; inputs in $work/artifacts/" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} target(s), ${seconds} s each, no crash"
