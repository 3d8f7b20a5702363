#!/usr/bin/env python3
"""Classifies images with a trained net (pycaffe's python/classify.py, same flags): reads an image, a folder of
images or a .npy array of images, and saves the class probabilities as a .npy file (N x classes).

    classify.py --model_def deploy.prototxt --pretrained_model model.caffemodel --mean_file mean.npy \
        images/ probabilities.npy

Where pycaffe's defaults named its BVLC CaffeNet files (absent here), --model_def and --pretrained_model must be
given and --mean_file is empty (no mean) unless given.
"""

import argparse
import glob
import os
import sys
import time

import numpy as np

import caffe


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input_file", help="an image, a folder of images (--ext), or a .npy of H x W x C images")
    parser.add_argument("output_file", help="the .npy file the predictions are saved to")
    parser.add_argument("--model_def", required=True, help="the deploy prototxt")
    parser.add_argument("--pretrained_model", required=True, help="the trained weights (.caffemodel)")
    parser.add_argument("--gpu", action="store_true", help="run on the GPU")
    parser.add_argument("--center_only", action="store_true",
                        help="classify the centre crop only, not the average of the ten oversampled crops")
    parser.add_argument("--images_dim", default="256,256",
                        help="height,width the images are resized to before cropping")
    parser.add_argument("--mean_file", default="",
                        help="a .npy of the mean image (C x H x W); its per-channel means are subtracted")
    parser.add_argument("--input_scale", type=float, help="multiplies the input after the mean is subtracted")
    parser.add_argument("--raw_scale", type=float, default=255.0,
                        help="multiplies the images (in [0, 1] as read) before the mean is subtracted")
    parser.add_argument("--channel_swap", default="2,1,0",
                        help="the order of the channels the net takes (RGB -> BGR by default)")
    parser.add_argument("--ext", default="jpg", help="the extension of the images read from a folder")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    image_dims = [int(s) for s in args.images_dim.split(",")]
    mean = np.load(args.mean_file).mean(1).mean(1) if args.mean_file else None
    channel_swap = [int(s) for s in args.channel_swap.split(",")] if args.channel_swap else None
    if args.gpu:
        caffe.set_mode_gpu()
        print("GPU mode")
    else:
        caffe.set_mode_cpu()
        print("CPU mode")
    classifier = caffe.Classifier(args.model_def, args.pretrained_model, image_dims=image_dims, mean=mean,
                                  input_scale=args.input_scale, raw_scale=args.raw_scale,
                                  channel_swap=channel_swap)
    input_file = os.path.expanduser(args.input_file)
    if input_file.endswith("npy"):
        inputs = np.load(input_file)
    elif os.path.isdir(input_file):
        inputs = [caffe.io.load_image(f) for f in sorted(glob.glob(os.path.join(input_file, "*." + args.ext)))]
    else:
        inputs = [caffe.io.load_image(input_file)]
    print(f"Classifying {len(inputs)} inputs.")
    start = time.time()
    predictions = classifier.predict(inputs, not args.center_only)
    print(f"Done in {time.time() - start:.2f} s.")
    print(f"Saving results into {args.output_file}")
    np.save(args.output_file, predictions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
