#!/usr/bin/env python3
"""Writes the images of CIFAR-10's binary version as PNG files, with the lists convert_imageset reads.

    cifar10_to_images.py BATCH_DIR IMAGE_DIR

BATCH_DIR holds data_batch_1.bin ... data_batch_5.bin and test_batch.bin (cifar-10-batches-bin/ of
cifar-10-binary.tar.gz). Each file is a run of records of 3073 bytes: the label (0-9), then the 32x32 image as
1024 red bytes, 1024 green, 1024 blue, each plane row by row (10000 records per file in the real data set).
IMAGE_DIR receives train/NNNNN.png (the five training files in order, numbered from 0), test/NNNNN.png, and
train.txt and test.txt, one "train/NNNNN.png LABEL" line per image in that order. Only the standard library is
used (PNG is written with zlib), so any python3 runs it.
"""

import os
import struct
import sys
import zlib

SIDE = 32
PLANE = SIDE * SIDE
RECORD = 1 + 3 * PLANE
CLASSES = 10
SPLITS = (
    ("train", ["data_batch_%d.bin" % i for i in range(1, 6)]),
    ("test", ["test_batch.bin"]),
)


def png_bytes(rgb):
    """A 32x32 8-bit RGB PNG of `rgb` (R, G, B interleaved, row by row)."""
    def chunk(kind, payload):
        return (struct.pack(">I", len(payload)) + kind + payload +
                struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))

    row = 3 * SIDE
    # Every row starts with filter type 0 (none).
    raw = b"".join(b"\x00" + bytes(rgb[y * row:(y + 1) * row]) for y in range(SIDE))
    header = struct.pack(">IIBBBBB", SIDE, SIDE, 8, 2, 0, 0, 0)  # 8 bits, colour type 2 (RGB)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) +
            chunk(b"IEND", b""))


def records(path):
    """Yields (label, PNG pixel bytes: B G R interleaved, see below) for each record of one CIFAR-10 binary file."""
    with open(path, "rb") as f:
        data = f.read()
    if not data or len(data) % RECORD:
        sys.exit("cifar10_to_images.py: %s holds %d bytes, not a whole number of %d-byte CIFAR-10 records "
                 "(a damaged or incomplete download? get cifar-10-binary.tar.gz again)" % (path, len(data), RECORD))
    for offset in range(0, len(data), RECORD):
        label = data[offset]
        if label >= CLASSES:
            sys.exit("cifar10_to_images.py: %s: record %d has label %d, not 0-9 (not the binary version of "
                     "CIFAR-10?)" % (path, offset // RECORD, label))
        planes = data[offset + 1:offset + RECORD]
        # convert_imageset stores an image's planes in OpenCV's order, blue first. Caffe's CIFAR-10 databases hold
        # the file's planes as they are, red first, and models trained on them expect that: so the PNG carries
        # the red plane where a reader looks for blue, and blue where it looks for red.
        rgb = bytearray(3 * PLANE)
        rgb[0::3] = planes[2 * PLANE:3 * PLANE]
        rgb[1::3] = planes[PLANE:2 * PLANE]
        rgb[2::3] = planes[0:PLANE]
        yield label, rgb


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: cifar10_to_images.py BATCH_DIR IMAGE_DIR")
    batch_dir, image_dir = argv[1], argv[2]
    for _, names in SPLITS:
        for name in names:
            if not os.path.isfile(os.path.join(batch_dir, name)):
                sys.exit("cifar10_to_images.py: %s is missing" % os.path.join(batch_dir, name))
    for split, names in SPLITS:
        os.makedirs(os.path.join(image_dir, split), exist_ok=True)
        lines = []
        for name in names:
            for label, rgb in records(os.path.join(batch_dir, name)):
                relative = "%s/%05d.png" % (split, len(lines))
                with open(os.path.join(image_dir, relative), "wb") as f:
                    f.write(png_bytes(rgb))
                lines.append("%s %d\n" % (relative, label))
        with open(os.path.join(image_dir, split + ".txt"), "w") as f:
            f.writelines(lines)
        print("cifar10_to_images.py: wrote %d %s images to %s" % (len(lines), split, os.path.join(image_dir, split)))


if __name__ == "__main__":
    main(sys.argv)
