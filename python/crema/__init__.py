"""crema from Python: nets and solvers of the Caffe-compatible framework crema, with blobs as numpy arrays.

    import crema
    crema.set_mode_cpu()
    net = crema.Net("deploy.prototxt", crema.TEST, weights="model.caffemodel")
    net.blobs["data"].data[...] = images          # a numpy view of the blob's memory
    probabilities = net.forward()["prob"]
    solver = crema.get_solver("solver.prototxt")
    solver.step(100)

The names follow pycaffe's (Net, get_solver, TRAIN, TEST, set_mode_cpu, ...), and `import caffe` gives these same
objects under pycaffe's package name; docs/python.md has the whole API.
"""

from ._crema import (
    TEST,
    TRAIN,
    AdaDeltaSolver,
    AdaGradSolver,
    AdamSolver,
    Blob,
    Error,
    Layer,
    NesterovSolver,
    Net,
    RMSPropSolver,
    SGDSolver,
    Solver,
    built_with_cuda,
    device,
    get_solver,
    gpu_count,
    import_onnx,
    layer_type_list,
    mode,
    multiplies_in,
    set_device,
    set_fold,
    set_precision,
    precision,
    set_log_level,
    set_memory_plan,
    set_mode_cpu,
    set_mode_gpu,
    set_random_seed,
)
from .pycaffe import (
    NCCL,
    Timer,
    has_nccl,
    set_multiprocess,
    set_solver_count,
    set_solver_rank,
    solver_count,
    solver_rank,
)
from . import io
from .net_spec import NetSpec, layers, params, to_proto
from .classifier import Classifier
from .detector import Detector

try:  # the message classes need Python's protobuf module (python3-protobuf)
    from . import proto
except ImportError:
    pass

__version__ = "0.1.0"

__all__ = [
    "TEST",
    "TRAIN",
    "AdaDeltaSolver",
    "AdaGradSolver",
    "AdamSolver",
    "Blob",
    "Classifier",
    "Detector",
    "Error",
    "Layer",
    "NCCL",
    "Net",
    "NesterovSolver",
    "NetSpec",
    "RMSPropSolver",
    "SGDSolver",
    "Solver",
    "Timer",
    "built_with_cuda",
    "device",
    "get_solver",
    "gpu_count",
    "import_onnx",
    "has_nccl",
    "io",
    "layer_type_list",
    "layers",
    "mode",
    "params",
    "set_device",
    "set_log_level",
    "set_fold",
    "set_precision",
    "precision",
    "set_memory_plan",
    "set_mode_cpu",
    "set_mode_gpu",
    "set_multiprocess",
    "set_random_seed",
    "set_solver_count",
    "set_solver_rank",
    "solver_count",
    "solver_rank",
    "to_proto",
]
