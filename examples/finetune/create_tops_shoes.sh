#!/usr/bin/env bash
# Makes the tops-vs-shoes data sets of the fine-tuning example from Debian's Fashion-MNIST:
#   data/fashion_mnist/tops_shoes_train_lmdb  the first TRAIN_IMAGES (default 300) tops and shoes of the
#                                             training set: few labels, where fine-tuning pays
#   data/fashion_mnist/tops_shoes_test_lmdb   every top and shoe of the test set (7,000 images)
# Label 0: a top (Fashion-MNIST classes 0 T-shirt/top, 2 pullover, 4 coat, 6 shirt); label 1: a shoe (5 sandal,
# 7 sneaker, 9 ankle boot). Trousers, dresses and bags are left out. An existing LMDB is kept.
# CREMA_BUILD_DIR names the build directory (default: build); FASHION_MNIST_DIR where the IDX files are. The
# finding and converting is data/fashion_mnist/get_fashion_mnist.sh's, with convert_mnist's --label_map and
# --limit.
set -euo pipefail
label_map=0:0,2:0,4:0,6:0,5:1,7:1,9:1
DB_PREFIX=tops_shoes TRAIN_FLAGS="--label_map=$label_map --limit=${TRAIN_IMAGES:-300}" \
  TEST_FLAGS="--label_map=$label_map" exec bash "$(dirname "$0")/../../data/fashion_mnist/get_fashion_mnist.sh"
