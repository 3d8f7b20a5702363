#!/usr/bin/env python3
"""Draws a net's prototxt as an image (pycaffe's python/draw_net.py, same flags), with pydot and Graphviz.

    draw_net.py --rankdir TB --phase TRAIN lenet_train_test.prototxt lenet.png
"""

import argparse
import sys

from google.protobuf import text_format

import caffe
import caffe.draw
from caffe.proto import caffe_pb2


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input_net_proto_file", help="the net's prototxt")
    parser.add_argument("output_image_file", help="the image to write (its extension picks the format)")
    parser.add_argument("--rankdir", default="LR",
                        help="the direction of the graph: LR (left to right), RL, TB (top to bottom) or BT")
    parser.add_argument("--phase", default="ALL", choices=["TRAIN", "TEST", "ALL"],
                        help="draw the layers of this phase only (ALL: every layer)")
    parser.add_argument("--display_lrm", action="store_true",
                        help="show each layer's learning-rate multipliers")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    net = caffe_pb2.NetParameter()
    with open(args.input_net_proto_file) as source:
        text_format.Merge(source.read(), net)
    print(f"Drawing net to {args.output_image_file}")
    phase = {"TRAIN": caffe.TRAIN, "TEST": caffe.TEST, "ALL": None}[args.phase]
    caffe.draw.draw_net_to_file(net, args.output_image_file, args.rankdir, phase, args.display_lrm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
