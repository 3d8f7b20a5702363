#!/usr/bin/env bash
# A model made in PyTorch, fine-tuned in crema: imports resnet_fashion.onnx (crema import), turns the deploy net
# into a training net on Fashion-MNIST (make_train_test.py) and trains it from the imported weights.
#   examples/onnx/run.sh            (from the repository root, after `make demo` wrote the Fashion-MNIST LMDBs)
set -euo pipefail
cd "$(dirname "$0")/../.."
build/tools/crema import --model=examples/onnx/resnet_fashion.onnx \
  --output_model=examples/onnx/resnet_imported.prototxt --output_weights=examples/onnx/resnet_imported.caffemodel
/usr/bin/python3 examples/onnx/make_train_test.py examples/onnx/resnet_imported.prototxt \
  examples/onnx/resnet_train_test.prototxt
build/tools/crema train --solver=examples/onnx/resnet_solver.prototxt \
  --weights=examples/onnx/resnet_imported.caffemodel "$@"
