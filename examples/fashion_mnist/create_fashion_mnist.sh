#!/usr/bin/env bash
# Kept so that older instructions still work: the conversion of Fashion-MNIST into
# data/fashion_mnist/fashion_mnist_{train,test}_lmdb is now data/fashion_mnist/get_fashion_mnist.sh, which this
# runs with the same arguments and environment (CREMA_BUILD_DIR, FASHION_MNIST_DIR, OUTPUT_DIR).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../../data/fashion_mnist/get_fashion_mnist.sh" "$@"
