"""pycaffe's Net API on crema.Net: layer_dict, top_names, bottom_names, forward/backward with blobs= and diffs=,
forward_all and forward_backward_all over batches, set_input_arrays, save_hdf5/load_hdf5, copy_from, share_with,
reshape, and the constructor's (phase, level, stages, weights) order. References are computed in numpy."""

import collections

import numpy as np
import pytest

import caffe

NET = """
name: "small"
force_backward: true
layer { name: "input" type: "Input" top: "data" input_param { shape { dim: 4 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "ip" top: "ip" }
layer { name: "extra" type: "Power" bottom: "ip" top: "doubled" power_param { scale: 2 }
        include { stage: "extra" } }
"""

MEMORY_NET = """
layer { name: "mem" type: "MemoryData" top: "data" top: "label"
        memory_data_param { batch_size: 2 channels: 1 height: 1 width: 3 } }
layer { name: "out" type: "Power" bottom: "data" top: "out" }
"""


@pytest.fixture
def small(write):
    return write("small.prototxt", NET)


def reference(net, x):
    weights, bias = net.params["ip"][0].data, net.params["ip"][1].data
    return np.maximum(x.astype(np.float64) @ weights.T + bias, 0)


def test_dictionaries_and_names(small):
    net = caffe.Net(small, caffe.TEST)
    assert isinstance(net.layer_dict, collections.OrderedDict)
    assert list(net.layer_dict) == ["input", "ip", "relu"] == net._layer_names
    assert [layer.type for layer in net.layer_dict.values()] == ["Input", "InnerProduct", "ReLU"]
    assert [blob.shape for blob in net.layer_dict["ip"].blobs] == [(2, 3), (2,)]
    np.testing.assert_array_equal(net.layer_dict["ip"].blobs[1].data, net.params["ip"][1].data)
    assert net.top_names == collections.OrderedDict([("input", ["data"]), ("ip", ["ip"]), ("relu", ["ip"])])
    assert net.bottom_names == collections.OrderedDict([("input", []), ("ip", ["data"]), ("relu", ["ip"])])
    assert net._blob_names == ["data", "ip"] == list(net.blobs)
    assert net.inputs == ["data"] and net.outputs == ["ip"]


def test_constructor_orders_and_stages(small, tmp_path):
    plain = caffe.Net(small, caffe.TEST)
    staged = caffe.Net(small, caffe.TEST, 0, ["extra"])  # pycaffe's positional (phase, level, stages)
    assert "extra" not in plain.layer_dict and "extra" in staged.layer_dict
    assert staged.outputs == ["doubled"]
    path = str(tmp_path / "w.caffemodel")
    plain.params["ip"][0].data[...] = np.arange(6).reshape(2, 3)
    plain.save(path)
    for net in (caffe.Net(small, caffe.TEST, weights=path), caffe.Net(small, path, caffe.TEST),
                caffe.Net(small, caffe.TEST, stages=["extra"], weights=path)):
        np.testing.assert_array_equal(net.params["ip"][0].data, np.arange(6).reshape(2, 3))
    x = np.ones((4, 3), np.float32)
    out = caffe.Net(small, caffe.TEST, stages=["extra"], weights=path).forward(data=x)
    np.testing.assert_allclose(out["doubled"], 2 * reference(plain, x), rtol=1e-6)


def test_forward_and_backward_with_extra_blobs(small):
    net = caffe.Net(small, caffe.TEST)
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    out = net.forward(blobs=["data"], data=x)
    assert set(out) == {"ip", "data"}
    np.testing.assert_array_equal(out["data"], x)
    np.testing.assert_allclose(out["ip"], reference(net, x), rtol=1e-5, atol=1e-6)
    top_grad = np.random.default_rng(1).normal(size=(4, 2)).astype(np.float32)
    grads = net.backward(diffs=["ip"], ip=top_grad)
    assert set(grads) == {"data", "ip"}
    mask = reference(net, x) > 0
    np.testing.assert_allclose(grads["data"], (top_grad * mask) @ net.params["ip"][0].data, rtol=1e-5, atol=1e-6)
    with pytest.raises(caffe.Error, match="no blob 'nope'"):
        net.forward(blobs=["nope"])


def test_forward_all_batches_and_pads(small):
    net = caffe.Net(small, caffe.TEST)
    x = np.random.default_rng(2).normal(size=(10, 3)).astype(np.float32)  # 4 + 4 + 2 (padded)
    out = net.forward_all(blobs=["data"], data=x)
    assert out["ip"].shape == (10, 2) and out["data"].shape == (10, 3)
    np.testing.assert_allclose(out["ip"], reference(net, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["data"], x)
    assert net.blobs["data"].shape == (4, 3)  # batch by batch, at the net's batch size
    np.testing.assert_array_equal(net.blobs["data"].data[2:], 0)  # the last batch was padded with zeros


def test_forward_backward_all(small):
    net = caffe.Net(small, caffe.TEST)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 3)).astype(np.float32)
    top_grad = rng.normal(size=(6, 2)).astype(np.float32)
    outs, diffs = net.forward_backward_all(data=x, ip=top_grad)
    np.testing.assert_allclose(outs["ip"], reference(net, x), rtol=1e-5, atol=1e-6)
    mask = reference(net, x) > 0
    assert diffs["data"].shape == (6, 3)
    np.testing.assert_allclose(diffs["data"], (top_grad * mask) @ net.params["ip"][0].data, rtol=1e-5, atol=1e-6)


def test_set_input_arrays(write):
    net = caffe.Net(write("memory.prototxt", MEMORY_NET), caffe.TRAIN)
    data = np.arange(12, dtype=np.float32).reshape(4, 1, 1, 3)
    labels = np.array([5, 6, 7, 8], np.float32)
    assert net.held_buffers == []
    net.set_input_arrays(data, labels)
    # The layer's copy of the items is memory outside the net's plan, listed beside it.
    assert net.held_buffers == [("mem", "the 4 items given", 4 * (12 + 4), "cpu")]
    first = net.forward(blobs=["label"])
    np.testing.assert_array_equal(first["out"], data[:2])
    np.testing.assert_array_equal(first["label"].ravel(), [5, 6])
    second = net.forward(blobs=["label"])
    np.testing.assert_array_equal(second["out"], data[2:])
    np.testing.assert_array_equal(second["label"].ravel(), [7, 8])
    np.testing.assert_array_equal(net.forward()["out"], data[:2])  # and round again
    with pytest.raises(caffe.Error, match="multiple of"):
        net.set_input_arrays(data[:3], labels[:3])
    with pytest.raises(caffe.Error, match="takes items of 1 x 1 x 3"):
        net.set_input_arrays(np.zeros((2, 1, 1, 4), np.float32), labels[:2])
    with pytest.raises(caffe.Error, match="not a MemoryData layer"):
        caffe.Net(write("small.prototxt", NET), caffe.TEST).set_input_arrays(data, labels)


def test_hdf5_copy_from_share_with_and_reshape(small, tmp_path):
    net = caffe.Net(small, caffe.TEST)
    net.params["ip"][0].data[...] = np.arange(6).reshape(2, 3) / 7
    path = tmp_path / "weights.bin"  # HDF5 whatever the name
    net.save_hdf5(str(path))
    assert path.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
    other = caffe.Net(small, caffe.TEST)
    assert not np.array_equal(other.params["ip"][0].data, net.params["ip"][0].data)
    other.load_hdf5(str(path))
    for mine, theirs in zip(other.params["ip"], net.params["ip"]):
        np.testing.assert_array_equal(mine.data, theirs.data)
    binary = tmp_path / "weights.caffemodel"
    net.save(str(binary))
    third = caffe.Net(small, caffe.TEST)
    assert third.copy_from(str(binary)) == ["ip"]
    np.testing.assert_array_equal(third.params["ip"][0].data, net.params["ip"][0].data)
    # share_with: the same memory from then on.
    fourth = caffe.Net(small, caffe.TEST)
    fourth.share_with(net)
    net.params["ip"][1].data[...] = [3, -3]
    np.testing.assert_array_equal(fourth.params["ip"][1].data, [3, -3])
    # reshape: a new batch size reaches the later blobs.
    fourth.blobs["data"].reshape(7, 3)
    fourth.reshape()
    assert fourth.blobs["ip"].shape == (7, 2)
