"""`import caffe`: pycaffe's package name for crema's own objects; caffe_pb2; the legacy Blob attributes; a
pycaffe-style Python layer (`import caffe`, bottom[0].num) run from Python and by `crema train`."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import caffe
import caffe.coord_map
import caffe.draw
import caffe.io
import caffe.net_spec
import crema
import crema.proto
from caffe.proto import caffe_pb2
from google.protobuf import text_format

import test_python_layer as python_layer_tests

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]

PYCAFFE_LOSS = """layer { name: "loss" type: "Python" bottom: "ip2" bottom: "target" top: "loss" loss_weight: 1
        python_param { module: "pycaffe_layers" layer: "EuclideanLossLayer" } }"""


def test_caffe_names_are_cremas_objects():
    assert caffe.Net is crema.Net and caffe.Layer is crema.Layer and caffe.Blob is crema.Blob
    assert caffe.SGDSolver is crema.SGDSolver and caffe.get_solver is crema.get_solver
    assert caffe.io is crema.io and caffe.draw is crema.draw and caffe.coord_map is crema.coord_map
    assert caffe.net_spec is crema.net_spec and caffe.NetSpec is crema.NetSpec
    assert caffe.layers is crema.layers and caffe.params is crema.params
    assert caffe.io.Transformer is crema.io.Transformer
    assert caffe.proto.caffe_pb2 is crema.proto.caffe_pb2 is caffe_pb2
    assert caffe.Classifier is crema.Classifier and caffe.Detector is crema.Detector
    assert (caffe.TRAIN, caffe.TEST) == (0, 1) == (caffe_pb2.TRAIN, caffe_pb2.TEST)
    from caffe import layers as L, params as P  # noqa: F401  (pycaffe's idiom)
    from caffe.io import Transformer  # noqa: F401
    from caffe.pycaffe import Net  # noqa: F401
    assert Net is crema.Net


def test_blob_legacy_axes(write):
    net = crema.Net(write("legacy.prototxt", """
        layer { name: "in" type: "Input" top: "four" top: "two" top: "five"
                input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } shape { dim: 8 dim: 3 }
                              shape { dim: 1 dim: 2 dim: 3 dim: 4 dim: 5 } } }"""), caffe.TEST)
    four, two, five = (net.blobs[name] for name in ("four", "two", "five"))
    assert (four.num, four.channels, four.height, four.width, four.count) == (2, 3, 4, 5, 120)
    assert (two.num, two.channels, two.height, two.width, two.count) == (8, 3, 1, 1, 24)
    assert four.data.shape == four.shape == (2, 3, 4, 5)
    with pytest.raises(crema.Error, match="only defined for blobs of at most 4"):
        five.num
    four.reshape(6, 1, 2, 3)
    assert (four.num, four.channels, four.height, four.width, four.count) == (6, 1, 2, 3, 36)
    assert four.data.shape == (6, 1, 2, 3)


def test_caffe_pb2_reads_prototxt_and_matches_cremas_parser():
    train_test = REPO / "examples" / "fashion_mnist" / "lenet_train_test.prototxt"
    net = text_format.Merge(train_test.read_text(), caffe_pb2.NetParameter())
    assert isinstance(net, caffe_pb2.NetParameter)
    data = net.layer[0]
    assert data.type == "Data" and data.data_param.backend == caffe_pb2.DataParameter.LMDB
    # The message printed back is the same net to crema's C++ parser.
    assert crema._crema.parse_net_text(str(net)) == crema._crema.parse_net_text(train_test.read_text())
    assert caffe_pb2.NetParameter.FromString(net.SerializeToString()) == net  # binary round trip
    deploy = REPO / "examples" / "fashion_mnist" / "lenet_deploy.prototxt"
    message = text_format.Merge(deploy.read_text(), caffe_pb2.NetParameter())
    built = crema.Net(str(deploy), crema.TEST)
    assert [layer.name for layer in message.layer] == built.layer_names
    for layer in message.layer:
        if layer.type == "Convolution":
            assert layer.convolution_param.num_output == built.params[layer.name][0].num
            assert layer.convolution_param.kernel_size[0] == built.params[layer.name][0].height


def test_a_saved_caffemodel_carries_its_nets_definition(tmp_path):
    # What crema writes, caffe_pb2 reads as Caffe's: every layer's whole parameters beside its blobs, bottoms as the
    # prototxt named them (no Split layers), so the file alone rebuilds the net with the same outputs.
    deploy = REPO / "examples" / "fashion_mnist" / "lenet_deploy.prototxt"
    net = crema.Net(str(deploy), crema.TEST)
    path = tmp_path / "lenet.caffemodel"
    net.save(str(path))
    stored = caffe_pb2.NetParameter.FromString(path.read_bytes())
    written = text_format.Merge(deploy.read_text(), caffe_pb2.NetParameter())
    assert [layer.name for layer in stored.layer] == [layer.name for layer in written.layer]
    for saved, given in zip(stored.layer, written.layer):
        saved = caffe_pb2.LayerParameter.FromString(saved.SerializeToString())
        saved.ClearField("blobs")
        saved.ClearField("phase")
        assert saved == given, saved.name
    rebuilt = crema.Net(str(path), crema.TEST, weights=str(path))
    image = np.random.default_rng(4).uniform(0, 1, net.blobs["data"].data.shape).astype(np.float32)
    expected = net.forward(data=image)["prob"].copy()
    # The rebuilt net, given its weights, is folded for inference (ip1 runs its ReLU in oneDNN's inner product), the
    # first one is not: the same values to float rounding.
    np.testing.assert_allclose(rebuilt.forward(data=image)["prob"], expected, rtol=1e-5, atol=1e-7)


def test_caffe_pb2_is_registered_once():
    # Whatever is imported first, one module holds proto/crema.proto's classes, and the pool has the file once.
    script = """
import sys
import caffe.proto.caffe_pb2 as a
import crema.proto.caffe_pb2 as b
from crema.proto import crema_pb2
from google.protobuf import descriptor_pool
assert a is b is crema_pb2
holders = [m for m in list(sys.modules.values()) if getattr(getattr(m, "DESCRIPTOR", None), "name", "") == "proto/crema.proto"]
assert len({id(m) for m in holders}) == 1, holders
pool = descriptor_pool.Default()
assert pool.FindMessageTypeByName("caffe.NetParameter") is a.NetParameter.DESCRIPTOR
assert pool.FindFileByName("proto/crema.proto") is a.DESCRIPTOR
print("ok")
"""
    for first in ("import caffe", "import crema", "from caffe.proto import caffe_pb2"):
        result = subprocess.run([sys.executable, "-c", first + "\n" + script], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_pycaffe_style_python_loss_from_python(write):
    nets = {kind: caffe.Net(write(kind + ".prototxt", python_layer_tests.NET.format(loss=loss)), caffe.TRAIN)
            for kind, loss in (("built_in", python_layer_tests.BUILT_IN_LOSS), ("pycaffe", PYCAFFE_LOSS))}
    for net in nets.values():
        net.forward()
        net.backward()
    built_in, pycaffe = nets["built_in"], nets["pycaffe"]
    # An independent reference: the loss from the blobs' values in numpy.
    residual = built_in.blobs["ip2"].data - built_in.blobs["target"].data
    reference = np.sum(residual.astype(np.float64) ** 2) / residual.shape[0] / 2
    assert pycaffe.blobs["loss"].data.item() == pytest.approx(reference, rel=1e-5)
    np.testing.assert_allclose(pycaffe.blobs["ip2"].diff, residual / residual.shape[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(pycaffe.blobs["ip2"].diff, built_in.blobs["ip2"].diff, rtol=1e-5, atol=1e-7)


def test_crema_train_runs_a_layer_that_imports_caffe(write, tmp_path, tools_dir):
    net = write("pycaffe.prototxt", python_layer_tests.NET.format(loss=PYCAFFE_LOSS))
    solver = write("pycaffe_solver.prototxt", python_layer_tests.SOLVER.format(net=net, prefix=tmp_path / "pycaffe"))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(HERE)  # the layer's module only: `import caffe` must come with the tool
    result = subprocess.run([str(tools_dir / "crema"), "train", f"--solver={solver}"], capture_output=True,
                            text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    trained = crema.Net(net, crema.TEST, weights=str(tmp_path / "pycaffe_iter_15.caffemodel"))
    # The same solver stepped from Python (the same layer module) ends with the tool's weights, to the bit.
    from_python = caffe.SGDSolver(solver)
    from_python.step(15)
    for layer, blobs in from_python.net.params.items():
        for mine, tools in zip(blobs, trained.params[layer]):
            assert mine.data.tobytes() == tools.data.tobytes(), layer
    # And it trains as the built-in loss does (the tool on the built-in loss's net).
    built_in = write("built_in.prototxt", python_layer_tests.NET.format(loss=python_layer_tests.BUILT_IN_LOSS))
    built_in_solver = write("built_in_solver.prototxt",
                            python_layer_tests.SOLVER.format(net=built_in, prefix=tmp_path / "built_in"))
    result = subprocess.run([str(tools_dir / "crema"), "train", f"--solver={built_in_solver}"],
                            capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    reference = crema.Net(built_in, crema.TEST, weights=str(tmp_path / "built_in_iter_15.caffemodel"))
    for layer, blobs in reference.params.items():
        for theirs, mine in zip(blobs, trained.params[layer]):
            np.testing.assert_allclose(mine.data, theirs.data, rtol=1e-4, atol=1e-5)
