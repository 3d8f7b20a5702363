"""Python layers used by test_python_layer.py (found on sys.path: pytest puts tests/python there; the tests that
run the crema tool put it on PYTHONPATH)."""

import numpy as np

import crema


class EuclideanLoss(crema.Layer):
    """Caffe's EuclideanLoss written in Python: sum((a - b)^2) / (2 * num); needs loss_weight on its top."""

    def setup(self, bottom, top):
        if len(bottom) != 2:
            raise ValueError("EuclideanLoss takes two bottoms")

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise ValueError("the two inputs must have the same number of values")
        self.difference = np.zeros(bottom[0].shape, dtype=np.float32)
        top[0].reshape(1)

    def forward(self, bottom, top):
        self.difference[...] = bottom[0].data - bottom[1].data.reshape(bottom[0].shape)
        top[0].data[...] = np.sum(self.difference**2) / bottom[0].shape[0] / 2.0

    def backward(self, top, propagate_down, bottom):
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                scale = sign * top[0].diff[0] / bottom[i].shape[0]
                bottom[i].diff[...] = scale * self.difference.reshape(bottom[i].shape)


class Scale(crema.Layer):
    """top = factor * bottom, the factor read from param_str; records its calls for the tests."""

    calls = []

    def setup(self, bottom, top):
        self.factor = float(self.param_str)
        Scale.calls.append(("setup", self.name, self.phase))

    def reshape(self, bottom, top):
        Scale.calls.append(("reshape", bottom[0].shape))
        top[0].reshape(*bottom[0].shape)

    def forward(self, bottom, top):
        top[0].data[...] = self.factor * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = self.factor * top[0].diff


class PlainObject:
    """A layer class not derived from crema.Layer (pycaffe's duck typing works too)."""

    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data + 1

    def backward(self, top, propagate_down, bottom):
        pass


def fail_in_forward(value):
    raise ZeroDivisionError(f"forward failed on purpose ({value})")


class FailsInForward(PlainObject):
    def forward(self, bottom, top):
        fail_in_forward(self.param_str)
