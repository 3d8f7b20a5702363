"""Weights saved from Python load back, and a solver stepped from Python ends with the same bytes as `crema train`
run on the same solver file; snapshot, restore, solve and the test nets."""

import os
import re
import subprocess

import numpy as np
import pytest

import crema

# Fed by DummyData, whose fillers draw from the solver's seeded streams: the same data in every run.
NET = """
name: "regress"
layer { name: "data" type: "DummyData" top: "data" top: "target"
        dummy_data_param { shape { dim: 8 dim: 5 } shape { dim: 8 dim: 3 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "uniform" min: -1 max: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 6 weight_filler { type: "xavier" } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "target" top: "loss" }
"""

SOLVER = """
net: "{net}"
test_net: "{net}"
test_iter: 2
test_interval: 10
base_lr: 0.05
momentum: 0.9
weight_decay: 0.0005
lr_policy: "step"
gamma: 0.5
stepsize: 10
max_iter: 25
display: 0
snapshot_prefix: "{prefix}"
solver_mode: CPU
random_seed: 7
"""


def params_of(net):
    return {layer: [blob.data.copy() for blob in blobs] for layer, blobs in net.params.items()}


def assert_same_params(a, b):
    assert list(a) == list(b)
    for layer in a:
        for left, right in zip(a[layer], b[layer]):
            assert left.tobytes() == right.tobytes(), layer


@pytest.fixture
def solver_file(write, tmp_path):
    net = write("regress.prototxt", NET)

    def make(prefix, **changes):
        text = SOLVER.format(net=net, prefix=tmp_path / prefix)
        for key, value in changes.items():
            text = "\n".join(line for line in text.splitlines() if not line.startswith(key + ":"))
            text += f"\n{key}: {value}\n"
        return write(prefix + "_solver.prototxt", text)

    return make


def test_save_and_load_round_trip(write, tmp_path):
    prototxt = write("regress.prototxt", NET)
    net = crema.Net(prototxt, crema.TRAIN)
    for blobs in net.params.values():
        for blob in blobs:
            blob.data[...] = np.random.default_rng(blob.count).normal(size=blob.shape)
    saved = params_of(net)
    for name in ("w.caffemodel", "w.caffemodel.h5"):
        path = str(tmp_path / name)
        net.save(path)
        assert_same_params(params_of(crema.Net(prototxt, crema.TEST, weights=path)), saved)
        assert_same_params(params_of(crema.Net(prototxt, path, crema.TEST)), saved)  # pycaffe's order
        fresh = crema.Net(prototxt, crema.TEST)
        assert sorted(fresh.copy_from(path)) == ["ip1", "ip2"]
        assert_same_params(params_of(fresh), saved)


def test_solver_matches_crema_train(solver_file, tmp_path, tools_dir):
    tool_solver = solver_file("tool")
    result = subprocess.run([str(tools_dir / "crema"), "train", f"--solver={tool_solver}"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    tool_weights = tmp_path / "tool_iter_25.caffemodel"
    assert tool_weights.exists()

    solver = crema.get_solver(solver_file("python"))
    assert solver.type == "SGD" and solver.iter == 0
    solver.step(10)
    assert solver.iter == 10
    solver.step(15)
    assert solver.iter == 25
    state = solver.snapshot()
    assert state.endswith("python_iter_25.solverstate")
    python_weights = tmp_path / "python_iter_25.caffemodel"
    assert python_weights.read_bytes() == tool_weights.read_bytes()
    prototxt = str(tmp_path / "regress.prototxt")
    assert_same_params(params_of(solver.net), params_of(crema.Net(prototxt, crema.TRAIN, weights=str(tool_weights))))


def test_solve_restore_and_test_nets(solver_file, tmp_path):
    solver = crema.SGDSolver(solver_file("run", max_iter=12))
    assert len(solver.test_nets) == 1
    test_net = solver.test_nets[0]
    assert test_net.phase == crema.TEST
    # The test net shares the training net's parameters: the same memory.
    assert np.shares_memory(test_net.params["ip1"][0].data, solver.net.params["ip1"][0].data)
    solver.step(6)
    state = solver.snapshot()
    solver.step(6)
    after_12 = params_of(solver.net)

    resumed = crema.get_solver(solver_file("run", max_iter=12))
    resumed.restore(state)
    assert resumed.iter == 6
    resumed.step(6)
    assert_same_params(params_of(resumed.net), after_12)

    whole = crema.get_solver(solver_file("whole", max_iter=12))
    whole.solve()
    assert whole.iter == 12
    assert (tmp_path / "whole_iter_12.caffemodel").exists()
    assert_same_params(params_of(whole.net), after_12)

    with pytest.raises(crema.Error, match="not Adam"):
        crema.AdamSolver(solver_file("adam"))


def test_forward_matches_crema_test(solver_file, tmp_path, tools_dir):
    """A net run from Python batch by batch gives `crema test`'s per-batch losses on the same weights: the same
    DummyData draws (both seeded with crema's default seed) through the same layers."""
    solver = crema.get_solver(solver_file("trained", max_iter=5))
    solver.solve()
    weights = str(tmp_path / "trained_iter_5.caffemodel")
    prototxt = str(tmp_path / "regress.prototxt")
    result = subprocess.run([str(tools_dir / "crema"), "test", f"--model={prototxt}", f"--weights={weights}",
                             "--iterations=4"], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, GLOG_minloglevel="0", GLOG_logtostderr="1"))
    assert result.returncode == 0, result.stderr[-2000:]
    tool = [float(v) for v in re.findall(r"Batch \d+, loss = ([-+0-9.e]+)", result.stderr)]
    assert len(tool) == 4, result.stderr[-2000:]
    net = crema.Net(prototxt, crema.TEST, weights=weights)
    python = [float(net.forward()["loss"]) for _ in range(4)]
    # The tool prints six significant digits.
    np.testing.assert_allclose(python, tool, rtol=1e-5)
    assert len(set(tool)) == 4  # every batch is new data
