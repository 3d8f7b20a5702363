#!/usr/bin/env python3
"""Turns the deploy net crema import wrote (IMPORTED.prototxt) into a net to train on Fashion-MNIST: its Input
layer replaced by the Data layers of examples/fashion_mnist (the LMDBs `make demo` writes, pixels scaled to [0, 1]),
its BatchNorm layers computing their statistics from each batch in training (the imported ones are set to use the
stored statistics, right for inference only), and a SoftmaxWithLoss and an Accuracy on the scores.

    examples/onnx/make_train_test.py IMPORTED.prototxt OUT_train_test.prototxt
"""

import sys

from google.protobuf import text_format

sys.path.insert(0, "build/python")
from crema.proto import crema_pb2  # noqa: E402

DATA = """
layer { name: "fashion" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "data/fashion_mnist/fashion_mnist_train_lmdb" batch_size: 64 backend: LMDB } }
layer { name: "fashion" type: "Data" top: "data" top: "label" include { phase: TEST }
  transform_param { scale: 0.00390625 }
  data_param { source: "data/fashion_mnist/fashion_mnist_test_lmdb" batch_size: 100 backend: LMDB } }
"""


def main(imported_path, out_path):
    imported = crema_pb2.NetParameter()
    with open(imported_path) as f:
        text_format.Merge(f.read(), imported)
    net = crema_pb2.NetParameter()
    text_format.Merge(DATA, net)
    net.name = "onnx_resnet"
    scores = None
    for layer in imported.layer:
        if layer.type == "Input":
            continue
        if layer.type == "BatchNorm":
            layer.batch_norm_param.ClearField("use_global_stats")
        net.layer.add().CopyFrom(layer)
        scores = layer.top[0]
    loss = net.layer.add()
    text_format.Merge('name: "loss" type: "SoftmaxWithLoss" bottom: "%s" bottom: "label" top: "loss"' % scores, loss)
    accuracy = net.layer.add()
    text_format.Merge('name: "accuracy" type: "Accuracy" bottom: "%s" bottom: "label" top: "accuracy" '
                      'include { phase: TEST }' % scores, accuracy)
    with open(out_path, "w") as f:
        f.write("# Written by examples/onnx/make_train_test.py from the layers crema import made of "
                "resnet_fashion.onnx.\n")
        f.write(text_format.MessageToString(net))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
