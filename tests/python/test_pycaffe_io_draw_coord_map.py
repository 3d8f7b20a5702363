"""caffe.io's messages and oversample, caffe.draw's graphs, and caffe.coord_map's crops of FCN-style NetSpec nets."""

import numpy as np
import pytest

import caffe
import caffe.coord_map
import caffe.draw
from caffe import layers as L
from caffe.proto import caffe_pb2
from google.protobuf import text_format


def test_datum_messages_round_trip():
    array = np.random.default_rng(0).integers(0, 256, size=(3, 4, 5), dtype=np.uint8)
    datum = caffe.io.array_to_datum(array, 9)
    assert isinstance(datum, caffe_pb2.Datum)
    assert (datum.channels, datum.height, datum.width, datum.label) == (3, 4, 5, 9)
    assert datum.data == array.tobytes() and len(datum.float_data) == 0
    np.testing.assert_array_equal(caffe.io.datum_to_array(datum), array)
    unlabelled = caffe.io.array_to_datum(array.astype(np.float64) / 7)
    assert not unlabelled.HasField("label") and unlabelled.data == b""
    np.testing.assert_allclose(unlabelled.float_data, (array.astype(np.float64) / 7).ravel(), rtol=1e-6)
    np.testing.assert_allclose(caffe.io.datum_to_array(unlabelled), array / 7, rtol=1e-6)
    # A Datum built field by field, as an LMDB writer does.
    by_hand = caffe_pb2.Datum(channels=1, height=2, width=2, data=bytes([1, 2, 3, 4]), label=3)
    np.testing.assert_array_equal(caffe.io.datum_to_array(by_hand), [[[1, 2], [3, 4]]])


def test_blobproto_messages_with_diff_and_vectors():
    rng = np.random.default_rng(1)
    array = rng.normal(size=(2, 3, 4)).astype(np.float32)
    diff = rng.normal(size=(2, 3, 4)).astype(np.float32)
    blob = caffe.io.array_to_blobproto(array, diff)
    assert isinstance(blob, caffe_pb2.BlobProto) and list(blob.shape.dim) == [2, 3, 4]
    np.testing.assert_array_equal(caffe.io.blobproto_to_array(blob), array)
    np.testing.assert_array_equal(caffe.io.blobproto_to_array(blob, return_diff=True), diff)
    legacy = caffe_pb2.BlobProto(num=1, channels=2, height=1, width=2, data=[1, 2, 3, 4])
    np.testing.assert_array_equal(caffe.io.blobproto_to_array(legacy), np.arange(1, 5).reshape(1, 2, 1, 2))
    arrays = [array, np.arange(5, dtype=np.float32)]
    serialized = caffe.io.arraylist_to_blobprotovector_str(arrays)
    vector = caffe_pb2.BlobProtoVector.FromString(serialized)
    assert [list(b.shape.dim) for b in vector.blobs] == [[2, 3, 4], [5]]
    back = caffe.io.blobprotovector_str_to_arraylist(serialized)
    for mine, theirs in zip(back, arrays):
        np.testing.assert_array_equal(mine, theirs)


def test_oversample_corners_centre_and_mirrors():
    images = [np.arange(5 * 6 * 2, dtype=np.float32).reshape(5, 6, 2) + 100 * i for i in range(2)]
    crops = caffe.io.oversample(images, (3, 4))
    assert crops.shape == (20, 3, 4, 2) and crops.dtype == np.float32
    for i, image in enumerate(images):
        expected = [image[0:3, 0:4], image[0:3, 2:6], image[2:5, 0:4], image[2:5, 2:6], image[1:4, 1:5]]
        for k, crop in enumerate(expected):
            np.testing.assert_array_equal(crops[10 * i + k], crop)
            np.testing.assert_array_equal(crops[10 * i + 5 + k], crop[:, ::-1])


LENET_LIKE = """
name: "drawn"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "label" type: "Input" top: "label" include { phase: TRAIN } input_param { shape { dim: 1 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1" param { lr_mult: 1 } param { lr_mult: 2 }
        convolution_param { num_output: 4 kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" include { phase: TRAIN } }
"""


def test_pydot_graph_nodes_edges_and_labels():
    net = text_format.Merge(LENET_LIKE, caffe_pb2.NetParameter())
    graph = caffe.draw.get_pydot_graph(net, "TB", display_lrm=True)
    names = {node.get_name().strip('"') for node in graph.get_nodes()}
    layer_nodes = {f"{layer.name}_{layer.type}" for layer in net.layer}
    blob_nodes = {f"{blob}_blob" for blob in ("data", "label", "conv1", "pool1", "ip1", "loss")}
    assert names == layer_nodes | blob_nodes
    edges = {(e.get_source().strip('"'), e.get_destination().strip('"')) for e in graph.get_edges()}
    # One edge per bottom and per top of every layer (the in-place ReLU reads and writes conv1).
    assert len(graph.get_edges()) == sum(len(layer.bottom) + len(layer.top) for layer in net.layer)
    assert ("conv1_blob", "relu1_ReLU") in edges and ("relu1_ReLU", "conv1_blob") in edges
    assert ("pool1_blob", "ip1_InnerProduct") in edges
    conv = graph.get_node('"conv1_Convolution"')[0]
    label = conv.get("label")
    assert "kernel size: 3" in label and "stride: 1" in label and "pad: 1" in label and "lr mult: 1, 2" in label
    out_of_conv = [e for e in graph.get_edges() if e.get_source().strip('"') == "conv1_Convolution"]
    assert [e.get("label") for e in out_of_conv] == ['"4"']  # num_output on the edges out of a convolution
    # Phases: the TEST graph leaves the TRAIN-only layers out.
    test_graph = caffe.draw.get_pydot_graph(net, "LR", phase=caffe.TEST)
    test_names = {node.get_name().strip('"') for node in test_graph.get_nodes()}
    assert "loss_SoftmaxWithLoss" not in test_names and "label_Input" not in test_names
    assert "ip1_InnerProduct" in test_names


def test_draw_net_renders(tmp_path):
    net = text_format.Merge(LENET_LIKE, caffe_pb2.NetParameter())
    png = caffe.draw.draw_net(net, "LR")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    path = tmp_path / "net.svg"
    caffe.draw.draw_net_to_file(net, str(path), "TB", caffe.TRAIN)
    svg = path.read_text()
    assert "<svg" in svg and "conv1" in svg and "SoftmaxWithLoss" in svg


def fcn_like():
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, 20, 20]))
    n.conv1 = L.Convolution(n.data, num_output=2, kernel_size=3, pad=5, weight_filler=dict(type="xavier"))
    n.relu1 = L.ReLU(n.conv1, in_place=True)
    n.pool1 = L.Pooling(n.relu1, kernel_size=2, stride=2)
    n.conv2 = L.Convolution(n.pool1, num_output=3, kernel_size=3, weight_filler=dict(type="xavier"))
    n.up = L.Deconvolution(n.conv2, convolution_param=dict(num_output=3, kernel_size=4, stride=2, bias_term=False))
    n.score = caffe.coord_map.crop(n.up, n.data)
    return n


def test_coord_map_composes_layers():
    n = fcn_like()
    # Hand-worked: conv1 x -> x + 4 (pad 5, kernel 3); pool x -> x / 2 - 1/4; conv2 x -> x - 1; deconv x -> 2x + 3/2.
    # data -> up: 2 * ((x + 4) / 2 - 1/4 - 1) + 3/2 = x + 3, so up's coordinate of data's x is x + 3.
    axis, a, b = caffe.coord_map.coord_map_from_to(n.up, n.data)
    assert axis == 1
    np.testing.assert_allclose(a, 1)
    np.testing.assert_allclose(b, -3)
    axis, a, b = caffe.coord_map.coord_map_from_to(n.pool1, n.data)
    np.testing.assert_allclose(a, 2)
    np.testing.assert_allclose(b, -3.5)  # data -> pool1: x / 2 + 7/4, inverted
    with pytest.raises(ValueError, match="scale"):
        caffe.coord_map.crop(n.pool1, n.data)


def test_crop_aligns_a_built_net(tmp_path):
    n = fcn_like()
    proto = n.to_proto()
    crop_layer = next(layer for layer in proto.layer if layer.type == "Crop")
    assert crop_layer.crop_param.axis == 2 and list(crop_layer.crop_param.offset) == [3]
    path = tmp_path / "fcn.prototxt"
    path.write_text(str(proto))
    net = caffe.Net(str(path), caffe.TEST)
    up_height = net.blobs["up"].height  # conv1 28, pool1 14, conv2 12, up (12 - 1) * 2 + 4
    assert up_height == 26
    assert net.blobs["score"].shape == (1, 3, 20, 20)
    out = net.forward(data=np.random.default_rng(2).normal(size=(1, 1, 20, 20)).astype(np.float32))
    np.testing.assert_array_equal(out["score"], net.blobs["up"].data[:, :, 3:23, 3:23])


def test_net_spec_corner_cases_give_messages(tmp_path):
    n = caffe.NetSpec()
    n.a, n.b = L.Input(shape=[dict(dim=[2, 3]), dict(dim=[2, 5])], ntop=2)
    pair = (n.a, n.b)
    n.joined = L.Concat(pair, axis=1)  # a tuple of tops stands for its tops
    n.relu = L.ReLU(n.joined, in_place=True)
    n.split1, n.split2 = L.Slice(n.relu, slice_point=[4], ntop=2)
    n.silence = L.Silence(n.split2, ntop=0)
    proto = n.to_proto()
    assert isinstance(proto, caffe_pb2.NetParameter)
    layers = {layer.name: layer for layer in proto.layer}
    assert list(layers) == ["a", "joined", "relu", "split1", "silence"]
    assert list(layers["joined"].bottom) == ["a", "b"] and layers["joined"].concat_param.axis == 1
    assert list(layers["relu"].bottom) == list(layers["relu"].top) == ["joined"]
    assert list(layers["split1"].top) == ["split1", "split2"] and list(layers["silence"].top) == []
    # to_proto of several tops: the layers both depend on, once each.
    several = caffe.to_proto(n.split1, n.split2)
    assert isinstance(several, caffe_pb2.NetParameter)
    assert [layer.type for layer in several.layer] == ["Input", "Concat", "ReLU", "Slice"]
    # And the net runs: Concat then ReLU then Slice, against numpy.
    path = tmp_path / "corners.prototxt"
    path.write_text(str(proto))
    net = caffe.Net(str(path), caffe.TEST)
    a = np.random.default_rng(3).normal(size=(2, 3)).astype(np.float32)
    b = np.random.default_rng(4).normal(size=(2, 5)).astype(np.float32)
    result = net.forward(blobs=["split2"], a=a, b=b)
    joined = np.maximum(np.concatenate([a, b], axis=1), 0)
    np.testing.assert_array_equal(result["split1"], joined[:, :4])
    np.testing.assert_array_equal(result["split2"], joined[:, 4:])
