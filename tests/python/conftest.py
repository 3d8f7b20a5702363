"""Shared helpers of crema's Python tests (run by ctest as python_pytest; docs/python.md).

ctest sets PYTHONPATH to <build>/python and CREMA_TOOLS_DIR to <build>/tools; run by hand:
    PYTHONPATH=build/python CREMA_TOOLS_DIR=build/tools /usr/bin/python3 -m pytest tests/python
"""

import os
import pathlib

import numpy as np
import pytest

import crema

crema.set_log_level(int(os.environ.get("GLOG_minloglevel", "1")))


@pytest.fixture(autouse=True)
def cpu_mode():
    """Every test starts on the CPU, and leaves the module's defaults as it found them."""
    crema.set_mode_cpu()
    crema.set_device(0)
    crema.set_memory_plan("none")
    crema.set_fold(True)
    crema.set_precision("")
    yield
    crema.set_mode_cpu()
    crema.set_device(0)
    crema.set_memory_plan("none")
    crema.set_fold(True)
    crema.set_precision("")


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> the path of a new file under the test's own folder."""

    def write_file(name, text):
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write_file


@pytest.fixture
def tools_dir():
    folder = pathlib.Path(os.environ.get("CREMA_TOOLS_DIR", pathlib.Path(__file__).parents[2] / "build" / "tools"))
    if not (folder / "crema").exists():
        pytest.fail(f"the crema tool is not in {folder} (set CREMA_TOOLS_DIR to the build's tools folder)")
    return folder


@pytest.fixture
def random_weights(tmp_path):
    """random_weights(prototxt_path, seed) -> a .caffemodel of random parameters for the net: BatchNorm layers
    (named bn*) with statistics drawn and a moving-average factor of 1.5, every other parameter uniform in [-1, 1]."""

    def make(path, seed):
        net = crema.Net(path, crema.TEST)
        rng = np.random.default_rng(seed)
        for name, params in net.params.items():
            if name.startswith("bn"):
                params[0].data[...] = rng.uniform(-1, 1, params[0].data.shape)
                params[1].data[...] = rng.uniform(0.5, 2, params[1].data.shape)
                params[2].data[...] = 1.5
            else:
                for blob in params:
                    blob.data[...] = rng.uniform(-1, 1, blob.data.shape)
        weights = str(tmp_path / (pathlib.Path(path).stem + ".caffemodel"))
        net.save(weights)
        return weights

    return make

