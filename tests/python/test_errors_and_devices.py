"""crema's errors reach Python as crema.Error (a RuntimeError) with crema's message, naming the file, layer or blob;
the device functions, and a GPU net's results against the CPU's where a GPU is present."""

import numpy as np
import pytest

import crema

GOOD = """
name: "good"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 } } }
"""


def test_error_is_a_runtime_error():
    assert issubclass(crema.Error, RuntimeError)


def test_missing_and_malformed_files(write, tmp_path):
    missing = str(tmp_path / "missing.prototxt")
    with pytest.raises(crema.Error, match="missing.prototxt' does not exist"):
        crema.Net(missing, crema.TEST)
    syntax = write("syntax.prototxt", 'name: "s"\nlayer { name: "data" type: "Input"\n  nonsense: 3 }\n')
    with pytest.raises(crema.Error, match=r"syntax.prototxt:3:"):
        crema.Net(syntax, crema.TEST)
    with pytest.raises(crema.Error, match="does not exist"):
        crema.get_solver(str(tmp_path / "no_solver.prototxt"))
    good = write("good.prototxt", GOOD)
    with pytest.raises(crema.Error, match="weights file .*missing.caffemodel' does not exist"):
        crema.Net(good, crema.TEST, weights=str(tmp_path / "missing.caffemodel"))
    with pytest.raises(crema.Error, match="holds no weights"):
        crema.Net(good, crema.TEST).copy_from(good)


def test_errors_name_the_layer_and_blob(write):
    unknown = write("unknown.prototxt", GOOD + 'layer { name: "mystery" type: "NoSuchType" bottom: "ip" top: "m" }\n')
    with pytest.raises(crema.Error, match="layer 'mystery' has unknown type 'NoSuchType'"):
        crema.Net(unknown, crema.TEST)
    net = crema.Net(write("good.prototxt", GOOD), crema.TEST)
    with pytest.raises(crema.Error, match="no blob named 'nosuch'"):
        net.forward(nosuch=np.zeros(3))
    with pytest.raises(crema.Error, match="layer 'ip' \\(InnerProduct\\)"):
        net.forward(data=np.zeros((2, 2)))
    with pytest.raises(crema.Error, match="phase must be"):
        crema.Net(write("again.prototxt", GOOD), 7)


def test_device_functions():
    assert crema.mode() == "CPU"
    assert crema.gpu_count() >= 0
    crema.set_device(0)
    assert crema.device() == 0
    with pytest.raises(crema.Error):
        crema.set_device(-1)


@pytest.mark.skipif(crema.gpu_count() > 0, reason="this machine has a GPU")
def test_gpu_mode_without_a_gpu_raises(write):
    prototxt = write("good.prototxt", GOOD)
    crema.set_mode_gpu()
    assert crema.mode() == "GPU"
    with pytest.raises(crema.Error, match="set_mode_gpu"):
        crema.Net(prototxt, crema.TEST)
    crema.set_mode_cpu()
    crema.Net(prototxt, crema.TEST)  # and the CPU still works


@pytest.mark.skipif(crema.gpu_count() == 0, reason="no CUDA device visible")
def test_gpu_net_matches_cpu(write):
    prototxt = write("good.prototxt", GOOD)
    x = np.random.default_rng(8).normal(size=(2, 3)).astype(np.float32)
    cpu = crema.Net(prototxt, crema.TEST)
    expected = cpu.forward(data=x)["ip"].copy()
    crema.set_mode_gpu()
    gpu = crema.Net(prototxt, crema.TEST)
    for ours, theirs in zip(gpu.params["ip"], cpu.params["ip"]):
        ours.data[...] = theirs.data  # written on the host, copied to the device by the forward
    view = gpu.blobs["data"].data
    view[...] = x
    outputs = gpu.forward()
    np.testing.assert_allclose(outputs["ip"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gpu.blobs["ip"].data, expected, rtol=1e-5, atol=1e-6)
