#!/usr/bin/env python3
"""Writes the hdf5_classification data set: 10,000 items of 4 features and a 0/1 label, 7,500 for training (in two
files, the second gzip-compressed, to show that a list may name several) and 2,500 for testing, as HDF5 files
under examples/hdf5_classification/data/ beside the list files train.txt and test.txt that the nets read.

The label depends on the features partly linearly and partly through a square, plus noise, so that logistic
regression gets only part of the way and the small nonlinear net more. Needs numpy and h5py (Debian:
python3-numpy python3-h5py). Run from the repository root:
    python3 examples/hdf5_classification/make_data.py
"""
import os

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
# The list files name the HDF5 files relative to the repository root, where crema train is run.
LISTED = "examples/hdf5_classification/data"


def make(count, rng):
    x = rng.normal(size=(count, 4)).astype(np.float32)
    x[:, 3] = 0.6 * x[:, 0] - 0.6 * x[:, 1] + 0.3 * x[:, 3]  # a partly redundant feature
    score = x[:, 0] + x[:, 1] + 1.2 * (x[:, 2] ** 2 - 1.0) + 0.4 * rng.normal(size=count)
    return x, (score > 0).astype(np.float32)


def write(name, x, y, compress=False):
    options = {"compression": "gzip", "compression_opts": 1} if compress else {}
    with h5py.File(os.path.join(DATA, name), "w") as f:
        f.create_dataset("data", data=x, **options)
        f.create_dataset("label", data=y, **options)


def main():
    os.makedirs(DATA, exist_ok=True)
    rng = np.random.default_rng(1701)
    x, y = make(10000, rng)
    write("train.h5", x[:5000], y[:5000])
    write("train2.h5", x[5000:7500], y[5000:7500], compress=True)
    write("test.h5", x[7500:], y[7500:])
    with open(os.path.join(DATA, "train.txt"), "w") as f:
        f.write("%s/train.h5\n%s/train2.h5\n" % (LISTED, LISTED))
    with open(os.path.join(DATA, "test.txt"), "w") as f:
        f.write("%s/test.h5\n" % LISTED)
    print("wrote %d training and %d test items to %s; %.0f%% of the labels are 1" %
          (7500, 2500, DATA, 100.0 * y.mean()))


if __name__ == "__main__":
    main()
