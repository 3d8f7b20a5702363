"""A Python loss layer written for pycaffe, as users have them: it imports `caffe`, not `crema`, and reads the
blobs' legacy attributes (num, count). Used by test_caffe_package.py, from Python and from `crema train`."""

import numpy as np

import caffe


class EuclideanLossLayer(caffe.Layer):
    """sum((x - y)^2) / (2 * num), the loss of Caffe's EuclideanLoss."""

    def setup(self, bottom, top):
        if len(bottom) != 2:
            raise Exception("EuclideanLossLayer needs two bottoms")

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise Exception("EuclideanLossLayer: the bottoms differ in size")
        self.residual = np.zeros_like(bottom[0].data, dtype=np.float32)
        top[0].reshape(1)

    def forward(self, bottom, top):
        self.residual[...] = bottom[0].data - bottom[1].data.reshape(bottom[0].data.shape)
        top[0].data[...] = np.sum(np.square(self.residual)) / bottom[0].num / 2.0

    def backward(self, top, propagate_down, bottom):
        for i in range(2):
            if propagate_down[i]:
                direction = 1.0 if i == 0 else -1.0
                gradient = direction * top[0].diff[0] * self.residual / bottom[i].num
                bottom[i].diff[...] = gradient.reshape(bottom[i].data.shape)
