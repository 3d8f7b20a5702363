"""Memory plans from Python (crema.set_memory_plan): off by default, so every blob keeps its values as in pycaffe;
turned on, a net shares memory between blobs, gives the unplanned net's results bit for bit (with recompute too),
keeps readable what keep_blobs names, and refuses passes from or to a layer."""

import numpy as np
import pytest

import crema

CHAIN = """
name: "chain"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 6 dim: 4 } shape { dim: 6 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 8 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "relu1" }
layer { name: "ip2" type: "InnerProduct" bottom: "relu1" top: "ip2"
        inner_product_param { num_output: 8 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "sigmoid2" type: "Sigmoid" bottom: "ip2" top: "sigmoid2" }
layer { name: "ip3" type: "InnerProduct" bottom: "sigmoid2" top: "ip3"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss" }
"""


def inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(6, 4)).astype(np.float32), (np.arange(6) % 5).astype(np.float32)


def train_side_by_side(plain, planned, inputs_of):
    """Three SGD steps on both nets from the same parameters and inputs: losses, parameter gradients and the inputs'
    gradients equal bit for bit."""
    for name, params in plain.params.items():
        for mine, theirs in zip(planned.params[name], params):
            mine.data[...] = theirs.data
    for iteration in range(3):
        x, y = inputs_of(iteration)
        losses = []
        for net in (plain, planned):
            net.clear_param_diffs()
            losses.append(net.forward(data=x, label=y)["loss"])
            net.backward()
        assert losses[0] == losses[1]
        for name, params in plain.params.items():
            for mine, theirs in zip(planned.params[name], params):
                np.testing.assert_array_equal(mine.diff, theirs.diff)
                mine.data[...] -= 0.1 * mine.diff
                theirs.data[...] -= 0.1 * theirs.diff
        np.testing.assert_array_equal(planned.blobs["data"].diff, plain.blobs["data"].diff)


def test_off_by_default_and_on_when_asked(write):
    path = write("chain.prototxt", CHAIN)
    assert crema.Net(path, crema.TRAIN).memory_plan is None
    crema.set_memory_plan("share")
    plan = crema.Net(path, crema.TRAIN).memory_plan
    assert plan["backward"]
    assert 0 < plan["planned_bytes"] < plan["unplanned_bytes"]
    assert plan["in_place"] > 0
    net = crema.Net(path, crema.TEST)
    assert net.memory_plan["backward"]  # a TEST net may run backward, as in Caffe
    net.plan_memory(backward=False)
    assert net.memory_plan["backward"] is False
    assert net.memory_plan["planned_bytes"] < plan["planned_bytes"]
    with pytest.raises(crema.Error, match="use 'share', 'recompute' or 'none'"):
        crema.set_memory_plan("some")


def test_planned_training_matches_unplanned_bit_for_bit(write):
    path = write("chain.prototxt", CHAIN)
    plain = crema.Net(path, crema.TRAIN)
    crema.set_memory_plan("share")
    planned = crema.Net(path, crema.TRAIN)
    train_side_by_side(plain, planned, inputs)


DEEP = """
name: "deep"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 4 dim: 8 dim: 16 dim: 16 } shape { dim: 4 } } }
""" + "".join(
    'layer {{ name: "conv{i}" type: "Convolution" bottom: "{b}" top: "conv{i}" convolution_param {{ num_output: 8 '
    'kernel_size: 3 pad: 1 weight_filler {{ type: "gaussian" std: 0.1 }} }} }}\n'
    'layer {{ name: "relu{i}" type: "ReLU" bottom: "conv{i}" top: "conv{i}" }}\n'.format(
        i=i, b="data" if i == 1 else "conv%d" % (i - 1))
    for i in range(1, 13)
) + """
layer { name: "ip" type: "InnerProduct" bottom: "conv12" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def test_recompute_takes_less_memory_and_trains_bit_for_bit(write):
    path = write("deep.prototxt", DEEP)
    plain = crema.Net(path, crema.TRAIN)
    crema.set_memory_plan("share")
    shared = crema.Net(path, crema.TRAIN)
    crema.set_memory_plan("recompute")
    recomputed = crema.Net(path, crema.TRAIN)
    plan = recomputed.memory_plan
    assert plan["replays"] > 0 and "conv2" in plan["replayed"]
    assert shared.memory_plan["replays"] == 0
    assert plan["planned_bytes"] < shared.memory_plan["planned_bytes"]
    rng = np.random.default_rng(3)
    train_side_by_side(
        plain,
        recomputed,
        lambda _: (rng.normal(size=(4, 8, 16, 16)).astype(np.float32), (np.arange(4) % 3).astype(np.float32)),
    )


def test_kept_blobs_stay_readable_and_partial_passes_are_refused(write):
    path = write("chain.prototxt", CHAIN)
    plain = crema.Net(path, crema.TEST)
    crema.set_memory_plan("share")
    planned = crema.Net(path, crema.TEST)
    planned.plan_memory(backward=False)
    for name, params in plain.params.items():
        for mine, theirs in zip(planned.params[name], params):
            mine.data[...] = theirs.data
    before = planned.memory_plan["planned_bytes"]
    planned.keep_blobs(["ip1", "ip2"])
    assert planned.memory_plan["planned_bytes"] > before
    x, y = inputs(7)
    assert planned.forward(data=x, label=y)["loss"] == plain.forward(data=x, label=y)["loss"]
    for name in ("ip1", "ip2"):
        np.testing.assert_array_equal(planned.blobs[name].data, plain.blobs[name].data)
    with pytest.raises(crema.Error, match="runs whole"):
        planned.forward(start="ip2")
    with pytest.raises(crema.Error, match="forward passes only"):
        planned.backward()
    with pytest.raises(crema.Error, match="no_such_blob"):
        planned.keep_blobs(["no_such_blob"])
