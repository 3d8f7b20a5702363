"""crema's message classes for Python: crema.proto.caffe_pb2 (pycaffe's caffe.proto.caffe_pb2), generated at build
time by protoc from proto/crema.proto (whose package is `caffe`, as Caffe's). Needs Python's protobuf module (Debian:
python3-protobuf).

    from crema.proto import caffe_pb2
    from google.protobuf import text_format
    net = text_format.Merge(open("deploy.prototxt").read(), caffe_pb2.NetParameter())

The generated module is crema_pb2 (named after the .proto file); caffe_pb2 is that same module under pycaffe's name,
so the file is registered once in protobuf's descriptor pool.
"""

import sys

# The C++ core first: where Python's protobuf is its cpp implementation, the descriptors crema's own C++ code
# registered are then the ones the Python classes use.
import crema._crema  # noqa: F401

try:
    import google.protobuf  # noqa: F401
except ImportError as error:
    raise ImportError(
        "crema.proto (caffe_pb2) needs Python's protobuf module: install python3-protobuf (Debian) and rebuild"
    ) from error

try:
    from crema.proto import crema_pb2
except ImportError as error:
    if getattr(error, "name", None) != "crema.proto.crema_pb2":
        raise
    raise ImportError(
        "crema.proto.crema_pb2 was not generated: the build found no Python protobuf module (python3-protobuf); "
        "install it and build again"
    ) from error

caffe_pb2 = crema_pb2
sys.modules[__name__ + ".caffe_pb2"] = crema_pb2

__all__ = ["caffe_pb2", "crema_pb2"]
