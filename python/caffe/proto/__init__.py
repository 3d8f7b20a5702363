"""caffe.proto.caffe_pb2, as in pycaffe: crema's generated message classes (the very module crema.proto.caffe_pb2)."""

import sys

from crema.proto import caffe_pb2

sys.modules[__name__ + ".caffe_pb2"] = caffe_pb2

__all__ = ["caffe_pb2"]
