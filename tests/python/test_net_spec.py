"""crema.NetSpec writes prototxt that crema's parser reads as the same NetParameter as the hand-written text, and
that crema.Net builds; keywords land in the right messages; mistakes raise crema.Error naming layer and field."""

import numpy as np
import pytest

import crema
from crema.proto import caffe_pb2
from crema import layers as L
from crema import params as P

HAND_WRITTEN = """
layer { name: "data" type: "Data" top: "data" top: "label"
        transform_param { scale: 0.00390625 }
        data_param { source: "train_lmdb" backend: LMDB batch_size: 64 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        convolution_param { num_output: 20 kernel_size: 5 stride: 1 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip1" bottom: "label" top: "accuracy"
        include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" loss_weight: 1 }
"""


def lenet_like():
    n = crema.NetSpec()
    n.data, n.label = L.Data(
        source="train_lmdb", backend=P.Data.LMDB, batch_size=64, ntop=2, transform_param=dict(scale=1 / 256)
    )
    n.conv1 = L.Convolution(
        n.data,
        num_output=20,
        kernel_size=5,
        stride=1,
        weight_filler=dict(type="xavier"),
        param=[dict(lr_mult=1), dict(lr_mult=2, decay_mult=0)],
    )
    n.pool1 = L.Pooling(n.conv1, pool=P.Pooling.MAX, kernel_size=2, stride=2)
    n.ip1 = L.InnerProduct(n.pool1, num_output=10, weight_filler=dict(type="xavier"))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.accuracy = L.Accuracy(n.relu1, n.label, include=dict(phase=crema.TEST))
    n.loss = L.SoftmaxWithLoss(n.relu1, n.label, loss_weight=1)
    return n


def test_output_parses_to_the_hand_written_net():
    text = str(lenet_like().to_proto())
    assert crema._crema.parse_net_text(text) == crema._crema.parse_net_text(HAND_WRITTEN)
    # The generated text itself, not only its canonical form: what a reader of the printed prototxt sees.
    assert 'backend: LMDB' in text and "phase: TEST" in text and "kernel_size: 5" in text


def test_canonical_form_is_independent_of_field_order():
    shuffled = HAND_WRITTEN.replace("backend: LMDB batch_size: 64", "batch_size: 64 backend: LMDB")
    assert shuffled != HAND_WRITTEN
    assert crema._crema.parse_net_text(shuffled) == crema._crema.parse_net_text(HAND_WRITTEN)
    changed = HAND_WRITTEN.replace("batch_size: 64", "batch_size: 32")
    assert crema._crema.parse_net_text(changed) != crema._crema.parse_net_text(HAND_WRITTEN)


def test_net_builds_from_the_output_and_computes(tmp_path):
    n = crema.NetSpec()
    n.data, n.target = L.Input(shape=[dict(dim=[2, 3]), dict(dim=[2, 4])], ntop=2)
    n.ip = L.InnerProduct(n.data, num_output=4, weight_filler=dict(type="gaussian", std=0.5),
                          bias_filler=dict(type="constant", value=0.25))
    n.relu = L.ReLU(n.ip, in_place=True)
    n.loss = L.EuclideanLoss(n.relu, n.target)
    proto = n.to_proto(name="from_python")  # a caffe_pb2.NetParameter, as in pycaffe
    assert isinstance(proto, caffe_pb2.NetParameter)
    path = tmp_path / "net.prototxt"
    path.write_text(str(proto))
    net = crema.Net(str(path), crema.TRAIN)
    assert net.name == "from_python"
    assert list(net.layer_names) == ["data", "ip", "relu", "loss"] == [layer.name for layer in proto.layer]
    assert list(net.blobs) == ["data", "target", "ip", "loss"]  # relu wrote over ip in place
    assert net.blobs["ip"].shape == (2, 4)
    assert np.all(net.params["ip"][1].data == np.float32(0.25))
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    target = np.ones((2, 4), np.float32)
    loss = net.forward(data=x, target=target)["loss"]
    weights, bias = net.params["ip"][0].data, net.params["ip"][1].data
    expected = np.sum((np.maximum(x @ weights.T + bias, 0) - target) ** 2) / 2 / 2
    assert loss == pytest.approx(expected, rel=1e-5)


def test_automatic_names_layer_names_and_layers_without_tops():
    n = crema.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2, 6, 6]))
    hidden = L.Convolution(n.data, num_output=3, kernel_size=3)  # never assigned: named after its type
    n.out = L.Pooling(L.Pooling(hidden, kernel_size=2), kernel_size=1, name="last_pool")
    n.silence = L.Silence(n.out, ntop=0)
    text = str(n.to_proto())
    canonical = crema._crema.parse_net_text(text)
    assert canonical == crema._crema.parse_net_text("""
        layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 6 dim: 6 } } }
        layer { name: "Convolution1" type: "Convolution" bottom: "data" top: "Convolution1"
                convolution_param { num_output: 3 kernel_size: 3 } }
        layer { name: "Pooling1" type: "Pooling" bottom: "Convolution1" top: "Pooling1"
                pooling_param { kernel_size: 2 } }
        layer { name: "last_pool" type: "Pooling" bottom: "Pooling1" top: "out" pooling_param { kernel_size: 1 } }
        layer { name: "silence" type: "Silence" bottom: "out" }
    """)


def test_keywords_of_shared_messages_and_explicit_param_messages_merge():
    n = crema.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, 4, 4]))
    n.up = L.Deconvolution(n.data, num_output=2, kernel_size=4, stride=2, convolution_param=dict(bias_term=False))
    n.py = L.Python(n.up, module="my_layers", layer="Scale", param_str="{'factor': 2}")
    assert crema._crema.parse_net_text(str(n.to_proto())) == crema._crema.parse_net_text("""
        layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }
        layer { name: "up" type: "Deconvolution" bottom: "data" top: "up"
                convolution_param { num_output: 2 bias_term: false kernel_size: 4 stride: 2 } }
        layer { name: "py" type: "Python" bottom: "up" top: "py"
                python_param { module: "my_layers" layer: "Scale" param_str: "{\\'factor\\': 2}" } }
    """)


def test_strings_are_escaped_and_numbers_kept():
    n = crema.NetSpec()
    n.data = L.DummyData(shape=dict(dim=[2]), data_filler=dict(type="constant", value=np.float32(0.1)))
    n.out = L.Python(n.data, module='quote"back\\slash\nnewline', param_str="ünïcode")
    canonical = crema._crema.parse_net_text(str(n.to_proto()))
    assert canonical == crema._crema.parse_net_text(r"""
        layer { name: "data" type: "DummyData" top: "data"
                dummy_data_param { shape { dim: 2 } data_filler { type: "constant" value: 0.1 } } }
        layer { name: "out" type: "Python" bottom: "data" top: "out"
                python_param { module: "quote\"back\\slash\nnewline" param_str: "ünïcode" } }
    """)


def test_params_are_the_schema_enum_values():
    assert (P.Pooling.MAX, P.Pooling.AVE, P.Pooling.STOCHASTIC) == (0, 1, 2)
    assert (P.Data.LEVELDB, P.Data.LMDB) == (0, 1)
    with pytest.raises(AttributeError, match="NoSuchParameter"):
        P.NoSuch
    # An enum may be given by name too.
    n = crema.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, 2, 2]))
    n.pool = L.Pooling(n.data, pool="AVE", kernel_size=2)
    assert "pool: AVE" in crema._crema.parse_net_text(str(n.to_proto()))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: L.InnerProduct(d, num_outputs=3), r"layer 'bad' \(L.InnerProduct\): 'num_outputs' is neither a "
                                                     r"field of InnerProductParameter \(num_output, "),
        (lambda d: L.Pooling(d, pool="MIN"), "'MIN' is not a value of PoolMethod"),
        (lambda d: L.Pooling(d, pool=7), "7 is not a value of PoolMethod"),
        (lambda d: L.InnerProduct(d, num_output=[2, 3]), "'num_output' is not repeated"),
        (lambda d: L.InnerProduct(d, num_output=-2), r"inner_product_param.num_output: expected an integer >= 0"),
        (lambda d: L.InnerProduct(d, num_output=2.5), "expected an integer, not 2.5"),
        (lambda d: L.InnerProduct(d, weight_filler="xavier"), "FillerParameter message: give it as a dict"),
        (lambda d: L.InnerProduct(d, weight_filler=dict(kind="x")), "weight_filler: FillerParameter has no field 'k"),
    ],
)
def test_mistakes_name_the_layer_and_the_field(make, message):
    n = crema.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2]))
    n.bad = make(n.data)
    with pytest.raises(crema.Error, match=message):
        n.to_proto()


def test_call_mistakes_are_caught_early():
    with pytest.raises(crema.Error, match="in_place=True .* needs as many bottoms as tops"):
        L.ReLU(in_place=True)
    with pytest.raises(crema.Error, match="a bottom must be a top"):
        L.ReLU("data")
    with pytest.raises(crema.Error, match="'top' is set by NetSpec"):
        L.ReLU(top="x")
    n = crema.NetSpec()
    with pytest.raises(crema.Error, match="assign a top"):
        n.data = 3
    with pytest.raises(AttributeError):
        n.missing


def test_two_layers_of_one_name_are_written_as_given(tmp_path):
    # As in pycaffe, and as Caffe builds such a net: crema builds it too (with a warning naming both layers).
    n = crema.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2]))
    n.a = L.ReLU(n.data, name="same")
    n.b = L.ReLU(n.a, name="same")
    proto = n.to_proto()
    assert [layer.name for layer in proto.layer] == ["data", "same", "same"]
    path = tmp_path / "same.prototxt"
    path.write_text(str(proto))
    net = crema.Net(str(path), crema.TEST)
    net.blobs["data"].data[...] = [[-1.0, 2.0]]
    assert net.forward()["b"].tolist() == [[0.0, 2.0]]


def test_parse_errors_give_line_and_column():
    with pytest.raises(crema.Error, match=r"net text:2:\d+: .*"):
        crema._crema.parse_net_text('layer { name: "a"\n  typo: "b" }')
