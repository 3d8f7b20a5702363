#!/usr/bin/env bash
# Times two crema binaries side by side on one net: `crema time` runs alternate between them (A, B, A, B, ...)
# so that both see the same load on a shared machine, and each binary's minimum and median of
# `Average Forward-Backward` are printed, with the ratio B / A of each.
#
# Usage: scripts/compare_time.sh CREMA_A CREMA_B [MODEL] [ITERATIONS] [ROUNDS]
#   MODEL       default examples/fashion_mnist/lenet_train_test.prototxt (needs `make data`)
#   ITERATIONS  timed passes per `crema time` run (default 200)
#   ROUNDS      runs of each binary (default 8)
# Environment such as OPENBLAS_CORETYPE or OPENBLAS_NUM_THREADS applies to both.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
a=$1 b=$2
model=${3:-examples/fashion_mnist/lenet_train_test.prototxt}
iterations=${4:-200}
rounds=${5:-8}

run() {
  "$1" time --model="$model" --iterations="$iterations" 2>&1 |
    sed -n 's/.*Average Forward-Backward: \([0-9.e+-]*\) ms.*/\1/p'
}

times_a=() times_b=()
for ((i = 1; i <= rounds; ++i)); do
  ta=$(run "$a") tb=$(run "$b")
  if [ -z "$ta" ] || [ -z "$tb" ]; then
    echo "compare_time.sh: a run printed no 'Average Forward-Backward' line; run it by hand to see why" >&2
    exit 1
  fi
  echo "round $i: A $ta ms, B $tb ms"
  times_a+=("$ta") times_b+=("$tb")
done

summary() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.3f %.3f", v[1], m}'; }
read -r min_a median_a <<<"$(summary "${times_a[@]}")"
read -r min_b median_b <<<"$(summary "${times_b[@]}")"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores"
echo "model: $model, $iterations iterations x $rounds rounds, Average Forward-Backward (ms)"
printf '%-8s %10s %10s\n' "" minimum median
printf '%-8s %10s %10s   %s\n' A "$min_a" "$median_a" "$a"
printf '%-8s %10s %10s   %s\n' B "$min_b" "$median_b" "$b"
awk -v ma="$min_a" -v mb="$min_b" -v da="$median_a" -v db="$median_b" \
  'BEGIN{printf "%-8s %10.3f %10.3f\n", "B / A", mb/ma, db/da}'
