"""The inference rewrites from Python: a net made with weights that runs forward only folds BatchNorm and Scale into
the convolution before them and fuses the ReLU, where no blob a script may read changes; net.params stay the weights
as loaded and edits to them are folded again; crema.set_fold(False) keeps the plan as written."""

import numpy as np
import pytest

import crema

RESNET_UNIT = """
name: "unit"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2" convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "bn2" type: "BatchNorm" bottom: "conv2" top: "bn2" }
layer { name: "prob" type: "Softmax" bottom: "bn2" top: "prob" }
"""


@pytest.fixture
def unit(write, random_weights):
    """The prototxt and a .caffemodel of random weights and statistics for it."""
    path = write("unit.prototxt", RESNET_UNIT)
    return path, random_weights(path, 3)


def outputs(path, weights, image):
    net = crema.Net(path, crema.TEST, weights=weights)
    return net, net.forward(data=image)["prob"].copy()


def side_by_side(unit, seed, plan="none"):
    """The net made without and with the rewrites (the latter under memory plan `plan`), run on one random image:
    (image, unfolded net, its output, folded net, its output)."""
    path, weights = unit
    image = np.random.default_rng(seed).normal(size=(2, 3, 8, 8)).astype(np.float32)
    crema.set_fold(False)
    plain, expected = outputs(path, weights, image)
    crema.set_fold(True)
    crema.set_memory_plan(plan)
    net, actual = outputs(path, weights, image)
    return image, plain, expected, net, actual


def test_chains_in_place_fold_and_blobs_stay_readable(unit):
    _, plain, expected, net, actual = side_by_side(unit, 4)
    assert plain.rewrites == []
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    # Without a memory plan every blob stays readable: the chain in place folds, conv2 -> bn2 out of place does not.
    assert len(net.rewrites) == 1 and net.rewrites[0].startswith("conv1 (Convolution): folded bn1")
    np.testing.assert_allclose(net.blobs["conv1"].data, plain.blobs["conv1"].data, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(net.blobs["conv2"].data, plain.blobs["conv2"].data, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(net.blobs["bn2"].data, plain.blobs["bn2"].data, rtol=1e-5, atol=1e-5)
    # The layers and parameters are the prototxt's, as loaded: conv1 has no bias, BatchNorm its three blobs.
    assert net.layer_names == plain.layer_names
    assert [len(p) for p in net.params.values()] == [1, 3, 2, 2, 3]
    np.testing.assert_array_equal(net.params["conv1"][0].data, plain.params["conv1"][0].data)
    # A layer folded away cannot start a pass.
    with pytest.raises(crema.Error, match="was folded or fused into layer 'conv1'"):
        net.forward(start="bn1")


def test_edits_to_the_weights_are_folded_again(unit):
    image, plain, _, net, before = side_by_side(unit, 5)
    for n in (plain, net):
        n.params["bn1"][1].data[...] *= 3.0
        n.params["scale1"][0].data[...] *= -0.5
    expected = plain.forward(data=image)["prob"]
    actual = net.forward(data=image)["prob"]
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(actual - before).max() > 1e-3


def test_with_a_memory_plan_out_of_place_chains_fold_too(unit):
    _, _, expected, net, actual = side_by_side(unit, 6, plan="share")
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    assert [r.split(":")[0] for r in net.rewrites] == ["conv1 (Convolution)", "conv2 (Convolution)"]
