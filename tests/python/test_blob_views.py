"""Blob.data and Blob.diff are numpy views of the blob's host memory: writes land in the blob, forward passes are
seen through them, and a reshape is seen by the views fetched after it."""

import gc

import numpy as np
import pytest

import crema

NET = """
name: "views"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "uniform" min: -1 max: 1 } } }
layer { name: "double" type: "Power" bottom: "data" top: "double" power_param { scale: 2 } }
"""


@pytest.fixture
def net(write):
    return crema.Net(write("views.prototxt", NET), crema.TEST)


def test_names_and_shapes(net):
    assert list(net.blobs) == ["data", "ip", "double"]  # the Split copies of 'data' are not shown
    assert net.inputs == ["data"]
    assert net.outputs == ["ip", "double"]
    assert net.layer_names[0] == "data" and "ip" in net.layer_names and "double" in net.layer_names
    assert [layer.type for layer in net.layers if layer.name == "ip"] == ["InnerProduct"]
    assert list(net.params) == ["ip"]
    weights, bias = net.params["ip"]
    assert weights.shape == (4, 3) and bias.shape == (4,)
    assert net.blobs["data"].count == 6 and net.blobs["data"].num_axes == 2
    assert net.blobs["data"].data.dtype == np.float32
    assert net.phase == crema.TEST


def test_views_alias_the_blob(net):
    data = net.blobs["data"]
    first, second = data.data, data.data
    assert np.shares_memory(first, second)
    first[...] = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(second, np.arange(6).reshape(2, 3))
    assert np.shares_memory(data.diff, data.diff) and not np.shares_memory(data.diff, data.data)


def test_writes_through_views_reach_forward(net):
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    net.blobs["data"].data[...] = x
    weights, bias = (blob.data for blob in net.params["ip"])
    weights[...] = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    bias[...] = [1, 2, 3, 4]
    output_view = net.blobs["ip"].data  # fetched before the forward: the forward writes into the same memory
    outputs = net.forward()
    expected = x @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10).T + np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_allclose(outputs["ip"], expected, rtol=1e-5)
    np.testing.assert_allclose(output_view, expected, rtol=1e-5)
    np.testing.assert_array_equal(outputs["double"], 2 * x)
    assert np.shares_memory(outputs["ip"], net.blobs["ip"].data)


def test_setter_copies_into_the_blob(net):
    net.blobs["data"].data = 7  # numpy broadcasting
    np.testing.assert_array_equal(net.blobs["data"].data, np.full((2, 3), 7))
    net.params["ip"][1].data = np.zeros(4)
    with pytest.raises(ValueError):
        net.blobs["data"].data = np.zeros((5, 5))


def test_reshape_gives_fresh_views(net):
    data = net.blobs["data"]
    data.reshape(5, 3)
    assert data.shape == (5, 3) and data.data.shape == (5, 3)
    net.reshape()
    assert net.blobs["ip"].shape == (5, 4) and net.blobs["ip"].data.shape == (5, 4)
    data.reshape((1, 3))
    assert data.data.shape == (1, 3)
    # Growing gives the blob new storage: a view fetched before stays valid memory, no longer the blob's.
    old = data.data
    data.reshape(64, 3)
    old[...] = 5
    assert data.data.shape == (64, 3) and not np.shares_memory(old, data.data)
    data.reshape(1, 3)
    x = np.ones((1, 3), np.float32)
    data.data[...] = x
    assert net.forward()["double"].shape == (1, 3)


def test_forward_inputs_reshape_and_copy(net):
    x = np.random.default_rng(2).normal(size=(6, 3))  # float64: converted
    outputs = net.forward(data=x)
    assert net.blobs["data"].shape == (6, 3)
    np.testing.assert_allclose(outputs["double"], 2 * x.astype(np.float32))
    assert outputs["ip"].shape == (6, 4)


def test_views_keep_the_net_alive(write):
    view = crema.Net(write("alive.prototxt", NET), crema.TEST).params["ip"][0].data
    gc.collect()
    view[...] = 3  # the net is gone from Python, its memory is not
    assert float(view.sum()) == 36.0
    blob = crema.Net(write("alive2.prototxt", NET), crema.TEST).blobs["ip"]
    gc.collect()
    assert blob.data.shape == (2, 4)
