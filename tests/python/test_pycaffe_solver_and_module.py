"""pycaffe's Solver API (the per-rule classes, get_solver, apply_update, add_callback, share_weights) and module
functions (layer_type_list, Timer, NCCL, has_nccl, solver_count/rank, set_multiprocess, set_random_seed)."""

import time

import numpy as np
import pytest

import caffe
import crema

NET = """
layer { name: "data" type: "DummyData" top: "data" top: "target"
        dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "uniform" min: -1 max: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" }
"""

RULE_SETTINGS = {
    "SGD": "momentum: 0.9",
    "Nesterov": "momentum: 0.9",
    "AdaGrad": "",
    "RMSProp": "rms_decay: 0.98",
    "AdaDelta": "momentum: 0.95 delta: 1e-6",
    "Adam": "momentum: 0.9 momentum2: 0.999",
}


def solver_text(net, prefix, rule="SGD", extra=""):
    return f"""net: "{net}"
type: "{rule}"
base_lr: 0.1
lr_policy: "fixed"
max_iter: 10
display: 0
snapshot_prefix: "{prefix}"
random_seed: 3
{RULE_SETTINGS[rule]}
{extra}
"""


@pytest.fixture
def make_solver(write, tmp_path):
    net = write("net.prototxt", NET)

    def make(rule="SGD", extra="", name="solver"):
        return write(f"{name}_{rule}.prototxt", solver_text(net, tmp_path / name, rule, extra))

    return make


def test_every_rule_has_its_class(make_solver):
    for rule in RULE_SETTINGS:
        path = make_solver(rule)
        solver = caffe.get_solver(path)
        cls = getattr(caffe, rule + "Solver")
        assert type(solver) is cls and isinstance(solver, caffe.Solver)
        assert solver.type == rule
        direct = cls(path)
        assert type(direct) is cls
        direct.step(2)
        assert direct.iter == 2
    with pytest.raises(caffe.Error, match="is of type Adam, not SGD"):
        caffe.SGDSolver(make_solver("Adam"))


def test_apply_update_is_one_sgd_step(make_solver):
    solver = caffe.SGDSolver(make_solver("SGD"))
    net = solver.net
    before = [blob.data.copy() for blob in net.params["ip"]]
    gradients = [np.full(blob.shape, 0.5, np.float32) * (i + 1) for i, blob in enumerate(net.params["ip"])]
    for blob, gradient in zip(net.params["ip"], gradients):
        blob.diff[...] = gradient
    solver.apply_update()
    assert solver.iter == 0  # the iteration count is step's
    for blob, old, gradient in zip(net.params["ip"], before, gradients):
        np.testing.assert_allclose(blob.data, old - 0.1 * gradient, rtol=1e-6, atol=1e-7)


def test_callbacks_run_each_iteration_in_order(make_solver):
    solver = caffe.get_solver(make_solver("SGD"))
    events = []

    def on_start():
        events.append(("start", solver.iter))

    def on_gradients():
        # After backward, before the update: the gradient is there, the weights not yet changed.
        weights = solver.net.params["ip"][0]
        events.append(("gradients", solver.iter, float(np.abs(weights.diff).sum()) > 0))

    solver.add_callback(on_start, on_gradients)
    solver.step(3)
    assert events == [("start", 0), ("gradients", 0, True), ("start", 1), ("gradients", 1, True),
                      ("start", 2), ("gradients", 2, True)]
    failing = caffe.get_solver(make_solver("SGD", name="failing"))

    def fail():
        raise ValueError("stop here")

    failing.add_callback(fail, None)
    with pytest.raises(ValueError, match="stop here"):
        failing.step(1)


def test_share_weights(make_solver, write):
    solver = caffe.get_solver(make_solver("SGD"))
    other = caffe.Net(write("net.prototxt", NET), caffe.TEST)
    solver.share_weights(other)
    solver.step(2)
    np.testing.assert_array_equal(other.params["ip"][0].data, solver.net.params["ip"][0].data)
    solver.net.params["ip"][0].data[...] = 4
    np.testing.assert_array_equal(other.params["ip"][0].data, 4)


def test_layer_type_list():
    types = caffe.layer_type_list()
    assert types == sorted(types) and len(types) == len(set(types))
    for expected in ("Convolution", "InnerProduct", "Pooling", "ReLU", "Python", "MemoryData", "Data", "Input"):
        assert expected in types
    assert "NoSuchLayer" not in types


def test_every_listed_type_is_known_to_nets(write):
    # A type not in the list is refused by net construction with the list of known types, which is this list.
    with pytest.raises(caffe.Error) as raised:
        caffe.Net(write("bad.prototxt", 'layer { name: "x" type: "NoSuchLayer" top: "x" }'), caffe.TEST)
    message = str(raised.value)
    assert all(name in message for name in caffe.layer_type_list())


def test_timer():
    timer = caffe.Timer()
    timer.start()
    time.sleep(0.05)
    timer.stop()
    assert 45 <= timer.ms < 2000
    stopped = timer.ms
    time.sleep(0.02)
    assert timer.ms == stopped


def test_nccl_and_multiprocess_bookkeeping():
    assert caffe.has_nccl() is False
    with pytest.raises(caffe.Error, match="NCCL is not available"):
        caffe.NCCL(None, None)
    assert caffe.solver_count() == 1 and caffe.solver_rank() == 0
    try:
        caffe.set_solver_count(4)
        caffe.set_solver_rank(2)
        caffe.set_multiprocess(True)
        assert crema.solver_count() == 4 and crema.solver_rank() == 2
    finally:
        caffe.set_solver_count(1)
        caffe.set_solver_rank(0)
        caffe.set_multiprocess(False)
    with pytest.raises(caffe.Error):
        caffe.set_solver_count(0)


def test_random_seed_decides_fillers(write):
    path = write("seeded.prototxt", """
        layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 20 } } }
        layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip"
                inner_product_param { num_output: 50 weight_filler { type: "gaussian" std: 0.5 } } }""")
    try:
        caffe.set_random_seed(11)
        a = caffe.Net(path, caffe.TEST).params["ip"][0].data.copy()
        b = caffe.Net(path, caffe.TEST).params["ip"][0].data.copy()
        caffe.set_random_seed(12)
        c = caffe.Net(path, caffe.TEST).params["ip"][0].data.copy()
    finally:
        caffe.set_random_seed(1701)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.std() == pytest.approx(0.5, rel=0.1)  # 1000 draws of the gaussian filler


def test_multiplies_in_says_what_the_cpu_computes_in():
    assert crema.multiplies_in("fp32")
    assert not crema.multiplies_in("fp16")  # float16 products need a GPU's tensor cores
    with pytest.raises(crema.Error, match="crema.multiplies_in"):
        crema.multiplies_in("fp8")


def test_precision_from_the_solver_and_from_set_precision(make_solver):
    def trained(name, extra=""):
        solver = caffe.get_solver(make_solver("SGD", extra=extra, name=name))
        solver.step(10)
        return solver.net.params["ip"][0].data.copy()

    float32 = trained("float")
    bf16 = trained("bf16", "precision: BFLOAT16")
    assert np.all(np.isfinite(bf16))
    # The solver's precision holds where nothing overrides it: bf16 products give other weights than float32 ones
    # (on a CPU without bf16 instructions the layers compute in float32, and the weights are the same).
    assert (not np.array_equal(bf16, float32)) == crema.multiplies_in("bf16")
    # crema.set_precision overrides a solver's precision, as --precision does.
    crema.set_precision("fp32")
    assert crema.precision() == "float32"
    assert np.array_equal(trained("overridden", "precision: BFLOAT16"), float32)
    crema.set_precision("")
    assert crema.precision() == ""
    with pytest.raises(crema.Error, match="crema.set_precision: 'half' is no precision"):
        crema.set_precision("half")
