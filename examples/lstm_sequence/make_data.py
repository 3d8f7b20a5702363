#!/usr/bin/env python3
"""Writes the lstm_sequence data: N = 16 parallel streams of sine-wave segments, 100 time steps each; every segment
has its own frequency (0.1 to 0.4 radians a step), amplitude (0.5 to 1) and phase. One HDF5 file per set holds

    data   (steps, 16, 1)  x_t
    cont   (steps, 16)     0 at the first step of a segment, else 1
    target (steps, 16, 1)  x_{t+1} of the same segment

row t being time step t. Training: 4,000 steps (640 segments); test: 1,000 steps (160). The list files train.txt
and test.txt beside them are what lstm_train_test.prototxt reads. Needs numpy and h5py (Debian: python3-numpy
python3-h5py). Run from the repository root:
    python3 examples/lstm_sequence/make_data.py
"""
import os

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
LISTED = "examples/lstm_sequence/data"  # list entries are relative to the repository root
STREAMS, SEGMENT = 16, 100


def make(steps, rng):
    assert steps % SEGMENT == 0
    data = np.zeros((steps, STREAMS, 1), np.float32)
    cont = np.ones((steps, STREAMS), np.float32)
    target = np.zeros((steps, STREAMS, 1), np.float32)
    t = np.arange(SEGMENT + 1)
    for start in range(0, steps, SEGMENT):
        cont[start, :] = 0
        for n in range(STREAMS):
            omega = rng.uniform(0.1, 0.4)
            wave = rng.uniform(0.5, 1.0) * np.sin(omega * t + rng.uniform(0, 2 * np.pi))
            data[start:start + SEGMENT, n, 0] = wave[:-1]
            target[start:start + SEGMENT, n, 0] = wave[1:]
    return data, cont, target


def write(name, steps, rng):
    data, cont, target = make(steps, rng)
    with h5py.File(os.path.join(DATA, name + ".h5"), "w") as f:
        f.create_dataset("data", data=data)
        f.create_dataset("cont", data=cont)
        f.create_dataset("target", data=target)
    with open(os.path.join(DATA, name + ".txt"), "w") as f:
        f.write("%s/%s.h5\n" % (LISTED, name))


def main():
    os.makedirs(DATA, exist_ok=True)
    rng = np.random.default_rng(1701)
    write("train", 4000, rng)
    write("test", 1000, rng)
    print("wrote %s/train.h5 (4000 steps) and test.h5 (1000 steps), %d streams each" % (DATA, STREAMS))


if __name__ == "__main__":
    main()
