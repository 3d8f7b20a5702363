"""Net.to_onnx, crema export and crema.import_onnx: the ONNX model of a net holds its operators and its weights (read back with
crema.proto.onnx_pb2); a net the inference rewrites folded is written folded; --dynamic_batch names the batch. Where
python3-opencv is installed, its ONNX importer runs the models and gives crema's outputs (the C++ suite's
OnnxExportTest does that on every example net through OpenCV's C++ library)."""

import subprocess

import numpy as np
import pytest

import crema
from crema.proto import onnx_pb2

try:
    import cv2
except ImportError:
    cv2 = None

UNIT = """
name: "unit"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool1" top: "fc" inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""


@pytest.fixture
def unit(write, random_weights):
    """The prototxt and a .caffemodel of random weights and statistics for it."""
    path = write("unit.prototxt", UNIT)
    return path, random_weights(path, 5)


def read_model(path):
    model = onnx_pb2.ModelProto()
    with open(path, "rb") as f:
        model.ParseFromString(f.read())
    return model


def initializer(model, name):
    for tensor in model.graph.initializer:
        if tensor.name == name:
            return np.frombuffer(tensor.raw_data, dtype=np.float32).reshape(tuple(tensor.dims))
    raise KeyError(name)


def test_to_onnx_writes_the_operators_and_the_weights(unit, tmp_path):
    path, weights = unit
    crema.set_fold(False)
    try:
        net = crema.Net(path, crema.TEST, weights=weights)
        model_path = str(tmp_path / "plain.onnx")
        net.to_onnx(model_path)
    finally:
        crema.set_fold(True)
    model = read_model(model_path)
    assert model.opset_import[0].version == 13
    ops = [node.op_type for node in model.graph.node]
    assert ops == ["Conv", "BatchNormalization", "Mul", "Add", "Relu", "Pad", "AveragePool", "Flatten", "Gemm",
                   "Softmax"]
    np.testing.assert_array_equal(initializer(model, "conv1/weights"), net.params["conv1"][0].data)
    np.testing.assert_array_equal(initializer(model, "fc/weights"), net.params["fc"][0].data)
    # BatchNorm's statistics divided by its moving-average factor.
    np.testing.assert_allclose(initializer(model, "bn1/mean"), net.params["bn1"][0].data / 1.5, rtol=1e-6)
    assert [o.name for o in model.graph.output] == ["prob"]
    # Folded: the BatchNorm and Scale are in the convolution's weights and bias.
    net = crema.Net(path, crema.TEST, weights=weights)
    net.forward(data=np.zeros((2, 3, 9, 9), np.float32))
    assert net.rewrites
    net.to_onnx(str(tmp_path / "folded.onnx"), dynamic_batch=True)
    folded = read_model(str(tmp_path / "folded.onnx"))
    assert [node.op_type for node in folded.graph.node][:2] == ["Conv", "Relu"]
    assert "BatchNormalization" not in [node.op_type for node in folded.graph.node]
    assert folded.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def opencv_forward(model, image):
    if cv2 is None:
        pytest.skip("python3-opencv is not installed")
    reader = cv2.dnn.readNetFromONNX(model)
    reader.setInput(image)
    return reader.forward()


@pytest.mark.parametrize("fold", [False, True])
def test_to_onnx_runs_in_opencv(unit, tmp_path, fold):
    path, weights = unit
    crema.set_fold(fold)
    try:
        net = crema.Net(path, crema.TEST, weights=weights)
        image = np.random.default_rng(7).normal(size=(2, 3, 9, 9)).astype(np.float32)
        expected = net.forward(data=image)["prob"].copy()
        assert bool(net.rewrites) == fold
        model = str(tmp_path / "unit.onnx")
        net.to_onnx(model)
    finally:
        crema.set_fold(True)
    actual = opencv_forward(model, image)
    assert actual.shape == expected.shape
    assert np.max(np.abs(actual - expected)) <= 1e-4 * np.max(np.abs(expected))
    assert 0.25 < expected.max() < 0.99  # the probabilities mean something


def test_crema_export_writes_a_model_for_any_batch(unit, tmp_path, tools_dir):
    path, weights = unit
    model = str(tmp_path / "unit.onnx")
    result = subprocess.run([str(tools_dir / "crema"), "export", "--model=" + path, "--weights=" + weights,
                             "--output=" + model, "--dynamic_batch"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    net = crema.Net(path, crema.TEST, weights=weights)
    image = np.random.default_rng(8).normal(size=(2, 3, 9, 9)).astype(np.float32)
    expected = net.forward(data=image)["prob"].copy()
    # Without --output: one clear error.
    result = subprocess.run([str(tools_dir / "crema"), "export", "--model=" + path], capture_output=True, text=True)
    assert result.returncode == 1
    assert "give --output=MODEL.onnx" in result.stderr
    assert read_model(model).graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    actual = opencv_forward(model, np.concatenate([image, image, image]))
    assert actual.shape == (6, 5)
    for k in range(3):
        assert np.max(np.abs(actual[2 * k:2 * k + 2] - expected)) <= 1e-4 * np.max(np.abs(expected))


def test_import_onnx_writes_a_net_that_gives_the_models_outputs(unit, tmp_path):
    path, weights = unit
    crema.set_fold(False)
    try:
        net = crema.Net(path, crema.TEST, weights=weights)
        image = np.random.default_rng(9).normal(size=(2, 3, 9, 9)).astype(np.float32)
        expected = net.forward(data=image)["prob"].copy()
        net.to_onnx(str(tmp_path / "unit.onnx"))
    finally:
        crema.set_fold(True)
    layers = crema.import_onnx(str(tmp_path / "unit.onnx"), str(tmp_path / "back.prototxt"),
                               str(tmp_path / "back.caffemodel"))
    assert "conv1" in layers and "fc" in layers
    back = crema.Net(str(tmp_path / "back.prototxt"), crema.TEST, weights=str(tmp_path / "back.caffemodel"))
    actual = back.forward(data=image)["prob"]
    np.testing.assert_allclose(actual, expected, atol=1e-5 * np.abs(expected).max())
    with pytest.raises(crema.Error, match="is not an ONNX model"):
        (tmp_path / "bad.onnx").write_bytes(b"not a model")
        crema.import_onnx(str(tmp_path / "bad.onnx"), str(tmp_path / "x.prototxt"), str(tmp_path / "x.caffemodel"))
