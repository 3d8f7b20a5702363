"""The parts of pycaffe's API that are plain Python over crema's classes: Net's dictionaries, forward and backward
with extra blobs, forward_all and forward_backward_all over batches, set_input_arrays, Timer, NCCL, and the
multi-process bookkeeping (solver_count, solver_rank). `import crema` (or `import caffe`) sets them up; the methods
are added to crema.Net itself, so every net has them, including those of solvers and those built by `crema train`.
"""

import collections
import time

import numpy as np

from ._crema import Error, Layer, Net

__all__ = [
    "NCCL",
    "Timer",
    "has_nccl",
    "set_multiprocess",
    "set_solver_count",
    "set_solver_rank",
    "solver_count",
    "solver_rank",
]

_forward_range = Net.forward
_backward_range = Net.backward


def _layer_dict(self):
    """Ordered layer name -> layer (pycaffe's net.layer_dict)."""
    return collections.OrderedDict(zip(self.layer_names, self.layers))


def _forward(self, blobs=None, start=None, end=None, **kwargs):
    """forward(blobs=None, start=None, end=None, **inputs) -> {name: data}.

    Copies each keyword array into the blob of that name (the blob takes the array's shape), runs the layers from
    `start` to `end` (names, both included; default: all), and returns the data of the net's outputs (of `end`'s
    tops when `end` is given) and of every blob named in `blobs`. The arrays are views of the blobs' memory."""
    outputs = _forward_range(self, start=start, end=end, **kwargs)
    if blobs:
        all_blobs = self.blobs
        for name in blobs:
            if name not in all_blobs:
                raise Error(f"forward: net '{self.name}' has no blob '{name}'")
            outputs[name] = all_blobs[name].data
    return outputs


def _backward(self, diffs=None, start=None, end=None, **kwargs):
    """backward(diffs=None, start=None, end=None, **output_diffs) -> {name: diff}.

    Sets the gradients of the output blobs given as keywords, runs backward from layer `start` (default: the last)
    down to layer `end` (default: the first), and returns the diffs of the net's inputs (of `end`'s bottoms when
    `end` is given) and of every blob named in `diffs`."""
    gradients = _backward_range(self, start=start, end=end, **kwargs)
    if diffs:
        all_blobs = self.blobs
        for name in diffs:
            if name not in all_blobs:
                raise Error(f"backward: net '{self.name}' has no blob '{name}'")
            gradients[name] = all_blobs[name].diff
    return gradients


def _batches(self, arrays):
    """(number of items, [{name: batch}]): the arrays cut along their first axis into batches of the first input
    blob's batch size, the last batch padded with zeros."""
    arrays = {name: np.asarray(values) for name, values in arrays.items()}
    counts = {len(values) for values in arrays.values()}
    if len(counts) != 1:
        raise Error("forward_all: the arrays given hold different numbers of items: " +
                    ", ".join(f"{name}: {len(values)}" for name, values in arrays.items()))
    count = counts.pop()
    all_blobs = self.blobs
    for name in arrays:
        if name not in all_blobs:
            raise Error(f"forward_all: net '{self.name}' has no blob '{name}'")
    first = self.inputs[0] if self.inputs and self.inputs[0] in arrays else next(iter(arrays))
    batch_size = all_blobs[first].shape[0] if all_blobs[first].shape else 1
    batches = []
    for start in range(0, count, batch_size):
        batch = {}
        for name, values in arrays.items():
            part = values[start:start + batch_size]
            if len(part) < batch_size:
                padding = np.zeros((batch_size - len(part),) + part.shape[1:], dtype=part.dtype)
                part = np.concatenate([part, padding])
            batch[name] = part
        batches.append(batch)
    return count, batches


def _collect(pieces, count):
    return {name: np.asarray(np.concatenate(values)[:count]) for name, values in pieces.items()}


def _forward_all(self, blobs=None, **kwargs):
    """forward_all(blobs=None, **inputs) -> {name: data of every item}: forward over arrays of any number of items,
    one batch (the input blob's batch size) at a time; the outputs (and `blobs`) of all batches, concatenated."""
    if not kwargs:
        return {name: np.array(values) for name, values in self.forward(blobs=blobs).items()}
    count, batches = _batches(self, kwargs)
    pieces = collections.OrderedDict()
    for batch in batches:
        for name, values in self.forward(blobs=blobs, **batch).items():
            pieces.setdefault(name, []).append(np.array(values))
    return _collect(pieces, count)


def _forward_backward_all(self, blobs=None, diffs=None, **kwargs):
    """forward_backward_all(blobs=None, diffs=None, **inputs_and_output_diffs) -> (outputs, diffs): forward and
    backward batch by batch; the keywords naming inputs feed forward, those naming outputs are their gradients."""
    count, batches = _batches(self, kwargs)
    outputs, gradients = collections.OrderedDict(), collections.OrderedDict()
    for batch in batches:
        inputs = {name: values for name, values in batch.items() if name not in self.outputs}
        output_diffs = {name: values for name, values in batch.items() if name in self.outputs}
        for name, values in self.forward(blobs=blobs, **inputs).items():
            outputs.setdefault(name, []).append(np.array(values))
        for name, values in self.backward(diffs=diffs, **output_diffs).items():
            gradients.setdefault(name, []).append(np.array(values))
    return _collect(outputs, count), _collect(gradients, count)


def _set_input_arrays(self, data, labels):
    """Gives the net's first layer, a MemoryData layer, the items it hands out from now on: data N x C x H x W,
    labels N (or N x 1 x 1 x 1); N a multiple of the layer's batch size. crema copies the arrays."""
    labels = np.asarray(labels, dtype=np.float32)
    if labels.ndim == 1:
        labels = labels[:, np.newaxis, np.newaxis, np.newaxis]
    return self._set_input_arrays(np.asarray(data, dtype=np.float32), labels)


def _set_input_arrays_checked(self, data, labels):
    return _set_input_arrays(self, data, labels)


Net.layer_dict = property(_layer_dict)
Net._layer_names = property(lambda self: self.layer_names)
Net._blob_names = property(lambda self: list(self.blobs))
Net._blobs = property(lambda self: list(self.blobs.values()))
Net.forward = _forward
Net.backward = _backward
Net.forward_all = _forward_all
Net.forward_backward_all = _forward_backward_all
Net.set_input_arrays = _set_input_arrays_checked


# A Python layer need not write the calls it has nothing to do in (pycaffe's base class has them too).
def _nothing(self, *args):
    return None


for _method in ("setup", "reshape", "forward", "backward"):
    if not hasattr(Layer, _method):
        setattr(Layer, _method, _nothing)


class Timer:
    """pycaffe's Timer: start(), stop(), and `ms`, the milliseconds between them (or since start while running)."""

    def __init__(self):
        self._start = None
        self._elapsed = 0.0

    def start(self):
        self._start = time.perf_counter()

    def stop(self):
        if self._start is not None:
            self._elapsed = time.perf_counter() - self._start
            self._start = None

    @property
    def ms(self):
        if self._start is not None:
            return (time.perf_counter() - self._start) * 1000.0
        return self._elapsed * 1000.0


def has_nccl():
    """False: crema trains on several GPUs inside one process (`crema train --gpu=0,1`), not with pycaffe's NCCL
    object across Python processes."""
    return False


class NCCL:
    """pycaffe's NCCL(solver, uid) for multi-process training: not available in crema (has_nccl() is False)."""

    def __init__(self, *args, **kwargs):
        raise Error(
            "crema.NCCL is not available: crema has no multi-process NCCL from Python; train on several GPUs with "
            "`crema train --solver=... --gpu=0,1` (one process), or run the script under mpirun (crema.get_solver "
            "then makes each process a rank of the group)"
        )

    @staticmethod
    def new_uid():
        raise Error("crema.NCCL.new_uid: NCCL is not available in crema (see crema.NCCL)")


_multiprocess = {"count": 1, "rank": 0, "multiprocess": False}


def solver_count():
    """The number of solvers training together (set_solver_count; 1 unless set)."""
    return _multiprocess["count"]


def set_solver_count(count):
    if int(count) < 1:
        raise Error(f"set_solver_count({count}): at least one solver")
    _multiprocess["count"] = int(count)


def solver_rank():
    """This process's rank among them (set_solver_rank; 0 unless set)."""
    return _multiprocess["rank"]


def set_solver_rank(rank):
    if int(rank) < 0:
        raise Error(f"set_solver_rank({rank}): a rank is not negative")
    _multiprocess["rank"] = int(rank)


def set_multiprocess(multiprocess):
    """Recorded only (crema's solvers need no multi-process mode: see NCCL)."""
    _multiprocess["multiprocess"] = bool(multiprocess)
