"""pycaffe's package name for crema: `import caffe` gives crema's own objects (caffe.Net is crema.Net, caffe.io is
crema.io, caffe.proto.caffe_pb2 is crema.proto.caffe_pb2, ...), so scripts, notebooks and Python layers written for
Caffe's Python module run unchanged. docs/python.md, "Coming from pycaffe", lists every name and any difference.
"""

import crema
from crema import *  # noqa: F401,F403
from crema import (  # noqa: F401  (the names pycaffe's own __init__ exports, spelled out)
    TEST,
    TRAIN,
    AdaDeltaSolver,
    AdaGradSolver,
    AdamSolver,
    Classifier,
    Detector,
    Layer,
    NCCL,
    Net,
    NesterovSolver,
    NetSpec,
    RMSPropSolver,
    SGDSolver,
    Timer,
    _crema,
    get_solver,
    has_nccl,
    io,
    layer_type_list,
    layers,
    params,
    set_device,
    set_mode_cpu,
    set_mode_gpu,
    set_multiprocess,
    set_random_seed,
    set_solver_count,
    set_solver_rank,
    solver_count,
    solver_rank,
    to_proto,
)

_caffe = _crema
__version__ = crema.__version__

try:  # caffe.proto.caffe_pb2 needs Python's protobuf module (python3-protobuf)
    from . import proto
except ImportError:
    pass
