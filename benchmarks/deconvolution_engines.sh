#!/bin/bash
# Deconvolution's engines side by side: each upsampling shape below, forward and backward, under
# `crema time --engine=Deconvolution:E` for E in onednn and im2col, alternating, ROUNDS rounds (default 2), one
# thread each (the engines compared, not the machine's load). The shapes are FCN's (21 classes; 2x, 8x, 16x and
# 32x upsampling with kernel 2 x stride and a bilinear filler), a 2x decoder over 64 channels, and FCN's 2x at
# batch 8. Prints per-layer milliseconds.
#   benchmarks/deconvolution_engines.sh [CREMA (default build/tools/crema)] [ROUNDS]
set -euo pipefail
crema=${1:-build/tools/crema}
rounds=${2:-2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# name batch channels size outputs kernel stride
shapes="up2x21 1 21 34 21 4 2
up2x21_b8 8 21 34 21 4 2
up8x21 1 21 70 21 16 8
up16x21 1 21 24 21 32 16
up32x21 1 21 16 21 64 32
up2x64 4 64 32 64 4 2"
while read -r name batch channels size outputs kernel stride; do
  cat > "$dir/$name.prototxt" <<NET
force_backward: true
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: $batch dim: $channels dim: $size dim: $size } } }
layer { name: "up" type: "Deconvolution" bottom: "x" top: "u"
  convolution_param { num_output: $outputs kernel_size: $kernel stride: $stride bias_term: false
                      weight_filler { type: "bilinear" } } }
NET
done <<< "$shapes"
grep -m1 "model name" /proc/cpuinfo || true
# The onednn engine refuses strides above 8 (measured slower); lifted here so that it can be measured.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 GLOG_logtostderr=1 CREMA_ONEDNN_DECONVOLUTION_STRIDES=64
for round in $(seq "$rounds"); do
  while read -r name _; do
    for engine in onednn native; do
      times=$("$crema" time --model="$dir/$name.prototxt" --iterations=5 --engine=Deconvolution:$engine 2>&1 |
        sed -n 's/.*\bup\t\(forward\|backward\): \([0-9.]*\) ms\./\1 \2/p' | tr '\n' ' ')
      echo "round $round  $name  $engine  $times"
    done
  done <<< "$shapes"
done
