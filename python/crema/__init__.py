"""crema from Python: nets and solvers of the Caffe-compatible framework crema, with blobs as numpy arrays.

    import crema
    crema.set_mode_cpu()
    net = crema.Net("deploy.prototxt", crema.TEST, weights="model.caffemodel")
    net.blobs["data"].data[...] = images          # a numpy view of the blob's memory
    probabilities = net.forward()["prob"]
    solver = crema.get_solver("solver.prototxt")
    solver.step(100)

The names follow pycaffe's (Net, get_solver, TRAIN, TEST, set_mode_cpu, ...); docs/python.md has the whole API.
"""

from ._crema import (
    TEST,
    TRAIN,
    Blob,
    Error,
    Layer,
    Net,
    Solver,
    built_with_cuda,
    device,
    get_solver,
    gpu_count,
    mode,
    set_device,
    set_log_level,
    set_mode_cpu,
    set_mode_gpu,
    set_random_seed,
)
from . import io
from .net_spec import NetSpec, layers, params, to_proto

__version__ = "0.1.0"


def _solver_of_type(expected):
    """A pycaffe-style constructor (SGDSolver(path), AdamSolver(path), ...) that checks the file's type."""

    def make(path):
        solver = get_solver(path)
        if solver.type != expected:
            raise Error(f"solver file '{path}' is of type {solver.type}, not {expected}")
        return solver

    make.__name__ = expected + "Solver"
    make.__doc__ = f"get_solver(path), for a solver prototxt of type {expected}."
    return make


SGDSolver = _solver_of_type("SGD")
NesterovSolver = _solver_of_type("Nesterov")
AdaGradSolver = _solver_of_type("AdaGrad")
RMSPropSolver = _solver_of_type("RMSProp")
AdaDeltaSolver = _solver_of_type("AdaDelta")
AdamSolver = _solver_of_type("Adam")

__all__ = [
    "TEST",
    "TRAIN",
    "AdaDeltaSolver",
    "AdaGradSolver",
    "AdamSolver",
    "Blob",
    "Error",
    "Layer",
    "Net",
    "NesterovSolver",
    "RMSPropSolver",
    "SGDSolver",
    "Solver",
    "built_with_cuda",
    "device",
    "get_solver",
    "gpu_count",
    "mode",
    "set_device",
    "set_log_level",
    "set_mode_cpu",
    "set_mode_gpu",
    "set_random_seed",
    "NetSpec",
    "io",
    "layers",
    "params",
    "to_proto",
]
