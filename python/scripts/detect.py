#!/usr/bin/env python3
"""Classifies windows of images with a trained net (pycaffe's python/detect.py, same flags), R-CNN style.

    detect.py --crop_mode list --model_def deploy.prototxt --pretrained_model model.caffemodel \
        windows.csv detections.csv

Input: with --crop_mode list, a .csv whose header names the columns filename, ymin, xmin, ymax, xmax (one window
per row); with selective_search (pycaffe's default), a .txt of image names, which crema cannot serve (selective
search is not available) and says so. Output: a .csv with the columns filename, ymin, xmin, ymax, xmax, class0,
class1, ... (the net's first output per window), or an .h5 (pandas' HDFStore, as pycaffe; needs pandas).
"""

import argparse
import csv
import os
import sys
import time

import numpy as np

import caffe

COORD_COLS = ["ymin", "xmin", "ymax", "xmax"]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input_file", help="a .csv of windows (--crop_mode list) or a .txt of images")
    parser.add_argument("output_file", help="the .csv (or .h5) the detections are written to")
    parser.add_argument("--model_def", required=True, help="the deploy prototxt")
    parser.add_argument("--pretrained_model", required=True, help="the trained weights (.caffemodel)")
    parser.add_argument("--crop_mode", default="selective_search", choices=["list", "selective_search"],
                        help="where the windows come from")
    parser.add_argument("--gpu", action="store_true", help="run on the GPU")
    parser.add_argument("--mean_file", default="", help="a .npy of the mean image (C x H x W)")
    parser.add_argument("--input_scale", type=float, help="multiplies the input after the mean is subtracted")
    parser.add_argument("--raw_scale", type=float, default=255.0,
                        help="multiplies the images (in [0, 1] as read) before the mean is subtracted")
    parser.add_argument("--channel_swap", default="2,1,0", help="the order of the channels the net takes")
    parser.add_argument("--context_pad", type=int, default=16, help="pixels of context kept around each window")
    return parser.parse_args(argv)


def read_windows(path):
    """[(image file, windows array)] in the file's order, the windows of one image together."""
    by_image = {}
    with open(path, newline="") as source:
        for row in csv.DictReader(source):
            by_image.setdefault(row["filename"], []).append([float(row[c]) for c in COORD_COLS])
    return [(name, np.array(windows, dtype=np.int64)) for name, windows in by_image.items()]


def write_csv(path, detections):
    classes = len(np.ravel(detections[0]["prediction"])) if detections else 0
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["filename"] + COORD_COLS + [f"class{i}" for i in range(classes)])
        for detection in detections:
            writer.writerow([detection["filename"]] + [int(v) for v in detection["window"]]
                            + [repr(float(v)) for v in np.ravel(detection["prediction"])])


def main(argv=None):
    args = parse_args(argv)
    mean = np.load(args.mean_file) if args.mean_file else None
    channel_swap = [int(s) for s in args.channel_swap.split(",")] if args.channel_swap else None
    if args.gpu:
        caffe.set_mode_gpu()
        print("GPU mode")
    else:
        caffe.set_mode_cpu()
        print("CPU mode")
    detector = caffe.Detector(args.model_def, args.pretrained_model, mean=mean, input_scale=args.input_scale,
                              raw_scale=args.raw_scale, channel_swap=channel_swap, context_pad=args.context_pad)
    start = time.time()
    input_file = os.path.expanduser(args.input_file)
    if args.crop_mode == "list":
        detections = detector.detect_windows(read_windows(input_file))
    else:
        with open(input_file) as source:
            detections = detector.detect_selective_search([line.strip() for line in source if line.strip()])
    print(f"Processed {len(detections)} windows in {time.time() - start:.3f} s.")
    if args.output_file.endswith(".h5"):
        try:
            import pandas as pd
        except ImportError:
            print("detect.py: writing .h5 needs pandas (python3-pandas); write a .csv instead", file=sys.stderr)
            return 1
        frame = pd.DataFrame({"filename": [d["filename"] for d in detections],
                              "feat": [np.ravel(d["prediction"]) for d in detections]})
        for i, column in enumerate(COORD_COLS):
            frame[column] = [int(d["window"][i]) for d in detections]
        frame.set_index("filename").to_hdf(args.output_file, "df", mode="w")
    else:
        write_csv(args.output_file, detections)
    print(f"Saved to {args.output_file}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
