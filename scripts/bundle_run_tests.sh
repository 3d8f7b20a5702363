#!/usr/bin/env bash
# The bundle's test runner (scripts/make_bundle.sh copies it to crema-bundle/run_tests.sh): runs every test
# binary the way ctest runs it in the build tree (tests/runs.txt: one line per run, with its environment), one
# summary line per run, then the totals; exits non-zero when any run fails. See docs/bundle.md.
#
# Usage: run_tests.sh [-j JOBS] [-t SECONDS] [-l LOG_DIR] [RUN_PATTERN ...] [-- GTEST_ARGS ...]
#   -j JOBS        runs at once (default: half the cores, at most 8); each gets OMP_NUM_THREADS=cores/JOBS
#                  unless OMP_NUM_THREADS is set
#   -t SECONDS     time limit of one run (default 1200)
#   -l LOG_DIR     where each run's output goes (default: logs/ beside this script)
#   RUN_PATTERN    run only the runs whose names match one of these shell patterns (test_gpu, '*_layer',
#                  'threaded.*'); default: every run
#   GTEST_ARGS     passed to every binary, e.g. -- --gtest_filter='*Gpu*'
# Environment:
#   CREMA_SOURCE_DIR   the source tree the tests read examples, docs and test sources from
#                      (default: source/ beside this script, the copy made with the binaries)
#   FASHION_MNIST_DIR  Fashion-MNIST's gzipped IDX files (default: data/fashion-mnist beside this script when
#                      the bundle carries them, else the tests' own default; tests that need it skip without)
#   CUDA_LIB_DIR       where the CUDA toolkit's libraries are (default /usr/local/cuda/lib64)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cores=$(nproc 2>/dev/null || echo 2)
jobs=$((cores / 2))
((jobs > 8)) && jobs=8
((jobs < 1)) && jobs=1
limit=1200
log_dir=$here/logs
patterns=()
gtest_args=()

usage() {
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
while (($#)); do
  case $1 in
    -j) jobs=${2:?}; shift 2 ;;
    -j*) jobs=${1#-j}; shift ;;
    -t) limit=${2:?}; shift 2 ;;
    -l) log_dir=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    --) shift; gtest_args=("$@"); break ;;
    -*) echo "run_tests.sh: unknown option $1" >&2; usage ;;
    *) patterns+=("$1"); shift ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run_tests.sh: -j takes a positive number" >&2; exit 2; }

# ---- environment -------------------------------------------------------------------------------------------
# The binaries find lib/ through their own run path; LD_LIBRARY_PATH adds the CUDA toolkit (and helps a
# program loaded some other way). The bundle's lib/ comes first, as in the run path.
cuda_lib=${CUDA_LIB_DIR:-/usr/local/cuda/lib64}
export LD_LIBRARY_PATH="$here/lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Where the lent machines mount the driver's libraries (libcuda), in case the loader's cache does not list them.
if [[ -d /usr/local/nvidia/lib64 && :$LD_LIBRARY_PATH: != *:/usr/local/nvidia/lib64:* ]]; then
  LD_LIBRARY_PATH+=:/usr/local/nvidia/lib64
fi
export CREMA_SOURCE_DIR=${CREMA_SOURCE_DIR:-$here/source}
export CREMA_TOOLS_DIR=${CREMA_TOOLS_DIR:-$here/bin}
if [[ -z ${FASHION_MNIST_DIR:-} && -d $here/data/fashion-mnist ]]; then
  export FASHION_MNIST_DIR=$here/data/fashion-mnist
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(((cores + jobs - 1) / jobs))}
# glog writes to stderr, which goes to each run's log.
export GLOG_logtostderr=${GLOG_logtostderr:-1}

[[ -f $CREMA_SOURCE_DIR/proto/crema.proto ]] ||
  { echo "run_tests.sh: CREMA_SOURCE_DIR=$CREMA_SOURCE_DIR holds no crema source tree" >&2; exit 2; }
# What the library needs and this machine lacks (the CUDA toolkit's libraries, most likely) stops every run
# alike: said once here instead of 90 times.
missing=$(ldd "$here/lib/libcrema.so" 2>&1 | awk '/not found/ { print $1 }' | tr '\n' ' ')
if [[ -n $missing ]]; then
  echo "run_tests.sh: libcrema.so needs libraries this machine does not have: $missing" >&2
  echo "run_tests.sh: the bundle expects the CUDA toolkit's (cuDNN, cuBLAS, cuRAND, NCCL) in $cuda_lib;" \
    "set CUDA_LIB_DIR (or LD_LIBRARY_PATH) to where they are" >&2
  exit 2
fi

# ---- the runs ----------------------------------------------------------------------------------------------
runs=()
while read -r run binary settings; do
  [[ -n ${run:-} ]] || continue
  if ((${#patterns[@]})); then
    matched=0
    for pattern in "${patterns[@]}"; do
      # shellcheck disable=SC2053  # a pattern on purpose
      [[ $run == $pattern ]] && matched=1
    done
    ((matched)) || continue
  fi
  runs+=("$run|$binary|$settings")
done <"$here/tests/runs.txt"
((${#runs[@]})) || { echo "run_tests.sh: no run matches: ${patterns[*]}" >&2; exit 2; }

mkdir -p "$log_dir"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/crema-bundle-runs.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

echo "run_tests.sh: ${#runs[@]} runs, $jobs at a time, OMP_NUM_THREADS=$OMP_NUM_THREADS; logs in $log_dir"
echo "run_tests.sh: source $CREMA_SOURCE_DIR; Fashion-MNIST ${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"

# One run: its binary in a folder of its own (tests may write beside them), with its settings; writes
# "<status> <passed> <failed> <skipped> <seconds>" to $scratch/<run>.result.
run_one() {
  local run=$1 binary=$2 settings=$3
  local log=$log_dir/$run.log work=$scratch/$run
  mkdir -p "$work"
  local start=$SECONDS status
  # shellcheck disable=SC2086  # settings: VARIABLE=value words
  (cd "$work" && exec timeout --kill-after=30 "$limit" env $settings "$here/tests/$binary" --gtest_color=no \
    "${gtest_args[@]}") >"$log" 2>&1
  status=$?
  local passed failed skipped
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -1)
  echo "$status ${passed:-0} ${failed:-0} ${skipped:-0} $((SECONDS - start))" >"$scratch/$run.result"
}

# Prints the summary line of a finished run and adds it to the totals.
total_passed=0 total_failed=0 total_skipped=0 failed_runs=()
report() {
  local run=$1 status passed failed skipped seconds verdict note=""
  read -r status passed failed skipped seconds <"$scratch/$run.result"
  if ((status == 0)); then
    verdict=ok
  else
    verdict=FAIL
    failed_runs+=("$run")
    case $status in
      124 | 137) note=" (stopped after ${limit} s)" ;;
      *)
        if ((status > 128)); then
          note=" (killed by signal $((status - 128)) )"
        else
          note=" (exit $status)"
        fi
        ;;
    esac
    # A crash or a time-out before gtest's summary still counts as a failure of the run.
    ((failed == 0)) && failed=1
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  printf '%-4s %-44s %4d passed, %d failed, %d skipped  %4d s%s\n' "$verdict" "$run" "$passed" "$failed" "$skipped" \
    "$seconds" "$note"
  if [[ $verdict == FAIL ]]; then
    # gtest names each failed test twice (as it ends, and in its closing list): once here.
    sed -n 's/^\[  FAILED  \] \([A-Za-z][^ ,]*\).*/       \1/p' "$log_dir/$run.log" | sort -u | head -20
    echo "       log: $log_dir/$run.log"
  fi
}

started=$SECONDS
declare -A running=()  # pid -> run name
next=0
while ((next < ${#runs[@]} || ${#running[@]} > 0)); do
  while ((next < ${#runs[@]} && ${#running[@]} < jobs)); do
    IFS='|' read -r run binary settings <<<"${runs[next]}"
    run_one "$run" "$binary" "$settings" &
    running[$!]=$run
    next=$((next + 1))
  done
  # -p names the run that ended (bash 5.1 and later: Debian 12, Ubuntu 22.04 and later).
  finished=
  wait -n -p finished
  if [[ -n $finished && -n ${running[$finished]:-} ]]; then
    report "${running[$finished]}"
    unset "running[$finished]"
  fi
done

echo "run_tests.sh: ${#runs[@]} runs in $((SECONDS - started)) s; ${#failed_runs[@]} failed${failed_runs[*]:+: ${failed_runs[*]}}"
# The plain closing line that test-result readers recognise.
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
((${#failed_runs[@]} == 0))
