"""Forward and backward passes driven from Python agree with the same arithmetic done in numpy, with central
differences of the loss, and with themselves when run in pieces (forward/backward with start= and end=)."""

import numpy as np
import pytest

import crema

REGRESSION = """
name: "regression"
force_backward: true
layer { name: "data" type: "Input" top: "data" top: "target"
        input_param { shape { dim: 4 dim: 5 } shape { dim: 4 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 }
                              bias_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" }
"""

CLASSIFIER = """
name: "classifier"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 6 dim: 4 } shape { dim: 6 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 8 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""


def regression_inputs(seed=3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)


def test_regression_matches_numpy(write):
    net = crema.Net(write("regression.prototxt", REGRESSION), crema.TRAIN)
    x, t = regression_inputs()
    w, b = (p.data.astype(np.float64) for p in net.params["ip"])
    loss = net.forward(data=x, target=t)["loss"]
    y = x @ w.T + b
    expected_loss = ((y - t) ** 2).sum() / (2 * len(x))
    np.testing.assert_allclose(net.blobs["ip"].data, y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)

    net.clear_param_diffs()
    input_diffs = net.backward()
    dy = (y - t) / len(x)
    np.testing.assert_allclose(net.params["ip"][0].diff, dy.T @ x, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(net.params["ip"][1].diff, dy.sum(axis=0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(input_diffs["data"], dy @ w, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(net.blobs["data"].diff, dy @ w, rtol=1e-4, atol=1e-6)


def test_parameter_gradients_accumulate(write):
    net = crema.Net(write("regression.prototxt", REGRESSION), crema.TRAIN)
    x, t = regression_inputs()
    net.forward(data=x, target=t)
    net.clear_param_diffs()
    net.backward()
    once = net.params["ip"][0].diff.copy()
    net.backward()
    np.testing.assert_allclose(net.params["ip"][0].diff, 2 * once, rtol=1e-5)
    net.clear_param_diffs()
    assert not net.params["ip"][0].diff.any()


def test_numeric_gradient_check(write):
    """Central differences of the loss, in float64 around float32 values, against backward's gradients."""
    net = crema.Net(write("regression.prototxt", REGRESSION), crema.TRAIN)
    x, t = regression_inputs(seed=5)
    net.forward(data=x, target=t)
    net.clear_param_diffs()
    net.backward()
    checked = [net.params["ip"][0], net.params["ip"][1], net.blobs["data"]]
    analytic = [blob.diff.copy() for blob in checked]
    step = 1e-2
    for blob, gradient in zip(checked, analytic):
        values = blob.data
        for index in np.ndindex(values.shape):
            original = values[index]
            values[index] = original + step
            plus = float(net.forward()["loss"])
            values[index] = original - step
            minus = float(net.forward()["loss"])
            values[index] = original
            numeric = (plus - minus) / (2 * step)
            assert abs(numeric - gradient[index]) <= 1e-2 * max(1.0, abs(numeric)), (blob.name, index)


def test_softmax_classifier_matches_numpy(write):
    net = crema.Net(write("classifier.prototxt", CLASSIFIER), crema.TRAIN)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 4, 0], np.float32)
    w1, b1 = (p.data.astype(np.float64) for p in net.params["ip1"])
    w2, b2 = (p.data.astype(np.float64) for p in net.params["ip2"])
    loss = float(net.forward(data=x, label=labels)["loss"])
    hidden = np.maximum(x @ w1.T + b1, 0)
    scores = hidden @ w2.T + b2
    scores -= scores.max(axis=1, keepdims=True)
    probabilities = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    rows = np.arange(6)
    np.testing.assert_allclose(loss, -np.log(probabilities[rows, labels.astype(int)]).mean(), rtol=1e-5)
    net.clear_param_diffs()
    net.backward()
    dscores = probabilities.copy()
    dscores[rows, labels.astype(int)] -= 1
    dscores /= 6
    np.testing.assert_allclose(net.params["ip2"][0].diff, dscores.T @ hidden, rtol=1e-4, atol=1e-6)
    dhidden = (dscores @ w2) * (hidden > 0)
    np.testing.assert_allclose(net.params["ip1"][0].diff, dhidden.T @ x, rtol=1e-4, atol=1e-6)


def test_forward_and_backward_in_pieces(write):
    net = crema.Net(write("classifier.prototxt", CLASSIFIER), crema.TRAIN)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    labels = np.array([4, 3, 2, 1, 0, 1], np.float32)
    whole = {name: value.copy() for name, value in net.forward(data=x, label=labels).items()}
    net.clear_param_diffs()
    net.backward()
    whole_diffs = [p.diff.copy() for layer in ("ip1", "ip2") for p in net.params[layer]]

    net.blobs["ip2"].data[...] = 0
    net.blobs["loss"].data[...] = 0
    first = net.forward(end="relu1")
    assert list(first) == ["ip1"]
    assert not net.blobs["ip2"].data.any()  # ip2 did not run
    last = net.forward(start="ip2")
    np.testing.assert_array_equal(last["loss"], whole["loss"])

    net.clear_param_diffs()
    net.backward(end="ip2")  # loss and ip2 only
    assert not net.params["ip1"][0].diff.any() and net.params["ip2"][0].diff.any()
    net.backward(start="relu1")
    pieces = [p.diff for layer in ("ip1", "ip2") for p in net.params[layer]]
    for expected, got in zip(whole_diffs, pieces):
        np.testing.assert_array_equal(got, expected)

    with pytest.raises(crema.Error, match="no layer 'nope'"):
        net.forward(start="nope")
    with pytest.raises(crema.Error, match="comes after"):
        net.forward(start="ip2", end="ip1")
