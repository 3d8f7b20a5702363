"""Layers written in Python (`type: "Python"`, python_param { module layer param_str }): run from crema.Net and
crema.get_solver, and by `crema train` through its embedded interpreter. The layers are in layers_for_tests.py."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import crema
import layers_for_tests

HERE = pathlib.Path(__file__).resolve().parent

# One net, two losses: the built-in EuclideanLoss, or the same loss written in Python (with its loss_weight given:
# a Python layer is no loss layer by its type).
NET = """
name: "regress"
layer {{ name: "data" type: "DummyData" top: "data" top: "target"
        dummy_data_param {{ shape {{ dim: 8 dim: 5 }} shape {{ dim: 8 dim: 3 }}
                           data_filler {{ type: "gaussian" std: 1 }} data_filler {{ type: "uniform" min: -1 max: 1 }} }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param {{ num_output: 6 weight_filler {{ type: "xavier" }} bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param {{ num_output: 3 weight_filler {{ type: "gaussian" std: 0.3 }} }} }}
{loss}
"""
BUILT_IN_LOSS = 'layer { name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "target" top: "loss" }'
PYTHON_LOSS = """layer { name: "loss" type: "Python" bottom: "ip2" bottom: "target" top: "loss" loss_weight: 1
        python_param { module: "layers_for_tests" layer: "EuclideanLoss" } }"""

SOLVER = """
net: "{net}"
base_lr: 0.05
momentum: 0.9
lr_policy: "fixed"
max_iter: 15
display: 0
snapshot_prefix: "{prefix}"
solver_mode: CPU
random_seed: 7
"""


def one_layer_net(write, layer, param_str="", shape=(2, 3), name="py"):
    return write(
        f"{name}.prototxt",
        f"""force_backward: true
        layer {{ name: "input" type: "Input" top: "x" input_param {{ shape {{ {" ".join(f"dim: {d}" for d in shape)} }} }} }}
        layer {{ name: "{name}" type: "Python" bottom: "x" top: "y"
                python_param {{ module: "layers_for_tests" layer: "{layer}" param_str: "{param_str}" }} }}""",
    )


def params_of(net):
    return {layer: [blob.data.copy() for blob in blobs] for layer, blobs in net.params.items()}


def param_diffs_of(net):
    return {layer: [blob.diff.copy() for blob in blobs] for layer, blobs in net.params.items()}


def test_python_euclidean_loss_matches_the_built_in_one(write):
    # Both nets start from the module's default seed: the same weights and the same DummyData values.
    nets = {kind: crema.Net(write(kind + ".prototxt", NET.format(loss=loss)), crema.TRAIN)
            for kind, loss in (("built_in", BUILT_IN_LOSS), ("python", PYTHON_LOSS))}
    for net in nets.values():
        net.forward()
        net.backward()
    built_in, python = nets["built_in"], nets["python"]
    assert python.layers[-1].type == "Python"
    np.testing.assert_array_equal(python.blobs["target"].data, built_in.blobs["target"].data)
    loss = built_in.blobs["loss"].data.item()
    assert loss > 0.1
    np.testing.assert_allclose(python.blobs["loss"].data.item(), loss, rtol=1e-5)
    np.testing.assert_allclose(python.blobs["ip2"].diff, built_in.blobs["ip2"].diff, rtol=1e-5, atol=1e-7)
    assert np.abs(python.blobs["ip2"].diff).max() > 1e-3
    for layer, diffs in param_diffs_of(built_in).items():
        for mine, theirs in zip(param_diffs_of(python)[layer], diffs):
            np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-6)


def test_param_str_phase_name_and_reshape_on_new_shapes(write):
    layers_for_tests.Scale.calls.clear()
    net = crema.Net(one_layer_net(write, "Scale", param_str="2.5"), crema.TEST)
    assert layers_for_tests.Scale.calls[:2] == [("setup", "py", crema.TEST), ("reshape", (2, 3))]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(net.forward(x=x)["y"], 2.5 * x)
    calls = len(layers_for_tests.Scale.calls)
    net.forward(x=x)  # same shape: no reshape
    assert len(layers_for_tests.Scale.calls) == calls
    bigger = np.ones((4, 5), dtype=np.float32)
    np.testing.assert_array_equal(net.forward(x=bigger)["y"], 2.5 * bigger)
    assert layers_for_tests.Scale.calls[-1] == ("reshape", (4, 5))
    assert net.blobs["y"].shape == (4, 5)
    # backward through the Python layer
    grads = net.backward(y=np.full((4, 5), 2.0, dtype=np.float32))
    np.testing.assert_array_equal(grads["x"], np.full((4, 5), 5.0))


def test_a_class_not_derived_from_crema_layer_works_too(write):
    net = crema.Net(one_layer_net(write, "PlainObject"), crema.TEST)
    np.testing.assert_array_equal(net.forward(x=np.zeros((2, 3)))["y"], np.ones((2, 3)))


def test_python_exception_names_the_layer_and_shows_the_traceback(write):
    net = crema.Net(one_layer_net(write, "FailsInForward", param_str="seven", name="bad"), crema.TEST)
    with pytest.raises(crema.Error) as raised:
        net.forward(x=np.zeros((2, 3)))
    message = str(raised.value)
    assert "layer 'bad' (Python, module 'layers_for_tests', class 'FailsInForward')" in message
    assert "forward()" in message
    assert "Traceback" in message and "layers_for_tests.py" in message
    assert 'raise ZeroDivisionError(f"forward failed on purpose ({value})")' in message
    assert "ZeroDivisionError: forward failed on purpose (seven)" in message


def test_missing_module_or_class_is_named(write):
    bad_module = write(
        "m.prototxt",
        """layer { name: "input" type: "Input" top: "x" input_param { shape { dim: 1 } } }
           layer { name: "py" type: "Python" bottom: "x" top: "y" python_param { module: "no_such_module_xyz" layer: "L" } }""",
    )
    with pytest.raises(crema.Error, match=r"(?s)layer 'py' \(Python, module 'no_such_module_xyz', class 'L'\).*"
                                          r"No module named 'no_such_module_xyz'.*PYTHONPATH"):
        crema.Net(bad_module, crema.TEST)
    with pytest.raises(crema.Error, match=r"(?s)class 'NoSuchClass'.*AttributeError"):
        crema.Net(one_layer_net(write, "NoSuchClass"), crema.TEST)


def train_with_tool(tools_dir, solver):
    environment = dict(os.environ)
    # The layer's module is found through PYTHONPATH, like a user's; the crema package comes with the tool.
    environment["PYTHONPATH"] = str(HERE)
    return subprocess.run([str(tools_dir / "crema"), "train", f"--solver={solver}"], capture_output=True, text=True,
                          timeout=120, env=environment)


def test_crema_train_runs_python_layers(write, tmp_path, tools_dir):
    weights = {}
    for kind, loss in (("built_in", BUILT_IN_LOSS), ("python", PYTHON_LOSS)):
        net = write(kind + ".prototxt", NET.format(loss=loss))
        solver = write(kind + "_solver.prototxt", SOLVER.format(net=net, prefix=tmp_path / kind))
        result = train_with_tool(tools_dir, solver)
        assert result.returncode == 0, result.stderr[-3000:]
        path = tmp_path / f"{kind}_iter_15.caffemodel"
        assert path.exists()
        weights[kind] = params_of(crema.Net(net, crema.TEST, weights=str(path)))
    # From Python, the same solver gives the tool's weights to the bit.
    from_python = crema.get_solver(str(tmp_path / "python_solver.prototxt"))
    from_python.step(15)
    for layer, blobs in params_of(from_python.net).items():
        for mine, tools in zip(blobs, weights["python"][layer]):
            assert mine.tobytes() == tools.tobytes(), layer
    # And the Python loss trains as the built-in one does.
    for layer, blobs in weights["built_in"].items():
        for theirs, mine in zip(blobs, weights["python"][layer]):
            np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


def test_crema_train_reports_python_errors(write, tmp_path, tools_dir):
    net = write("bad.prototxt", NET.format(loss=PYTHON_LOSS.replace('layer: "EuclideanLoss"', 'layer: "FailsInForward"')))
    solver = write("bad_solver.prototxt", SOLVER.format(net=net, prefix=tmp_path / "bad"))
    result = train_with_tool(tools_dir, solver)
    assert result.returncode != 0
    assert "layer 'loss' (Python, module 'layers_for_tests', class 'FailsInForward')" in result.stderr
    assert "ZeroDivisionError: forward failed on purpose" in result.stderr
