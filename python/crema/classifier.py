"""pycaffe's Classifier: a Net (TEST phase) that takes images as load_image gives them and returns class
probabilities, averaging over ten crops of each image (oversample) or using the centre crop."""

import numpy as np

from . import io
from ._crema import TEST, Error, Net

__all__ = ["Classifier"]


def _load_for_images(net, model_file, pretrained_file, kind, mean, input_scale, raw_scale, channel_swap):
    """Builds `net` (a Classifier or Detector) for TEST with the trained weights, and gives it net.transformer for
    its one input: images as load_image gives them (H x W x C) transposed to C x H x W, then channel_swap,
    raw_scale, mean and input_scale, as pycaffe's two classes do."""
    Net.__init__(net, model_file, TEST, weights=pretrained_file)
    if len(net.inputs) != 1:
        raise Error(f"{kind}: the net has {len(net.inputs)} inputs ({net.inputs}); it takes one")
    input_name = net.inputs[0]
    net.transformer = io.Transformer({input_name: net.blobs[input_name].shape})
    net.transformer.set_transpose(input_name, (2, 0, 1))
    for setting, value in (("set_mean", mean), ("set_input_scale", input_scale), ("set_raw_scale", raw_scale),
                           ("set_channel_swap", channel_swap)):
        if value is not None:
            getattr(net.transformer, setting)(input_name, value)


class Classifier(Net):
    """Classifier(model_file, pretrained_file, image_dims=None, mean=None, input_scale=None, raw_scale=None,
    channel_swap=None): the net of model_file with the weights of pretrained_file, its input preprocessed by an
    io.Transformer (transpose to C x H x W, then channel_swap, raw_scale, mean, input_scale). Images are first
    resized to image_dims (default: the input's height and width), then cropped to the input's size."""

    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None):
        _load_for_images(self, model_file, pretrained_file, "Classifier", mean, input_scale, raw_scale, channel_swap)
        input_name = self.inputs[0]
        self.crop_dims = np.array(self.blobs[input_name].shape[2:])
        self.image_dims = np.array(image_dims if image_dims is not None else self.crop_dims)

    def predict(self, inputs, oversample=True):
        """The output (the net's first) of each image of `inputs` (height x width x channels arrays), N x classes:
        averaged over the ten crops of io.oversample, or of the centre crop with oversample=False."""
        inputs = list(inputs)
        images = np.zeros((len(inputs),) + tuple(int(d) for d in self.image_dims) + (inputs[0].shape[2],),
                          dtype=np.float32)
        for i, image in enumerate(inputs):
            images[i] = io.resize_image(image, self.image_dims)
        if oversample:
            crops = io.oversample(images, self.crop_dims)
        else:
            start = np.array(self.image_dims) / 2.0 - self.crop_dims / 2.0
            y, x = (int(round(v)) for v in start)
            crops = images[:, y:y + int(self.crop_dims[0]), x:x + int(self.crop_dims[1]), :]
        input_name = self.inputs[0]
        batch = np.array([self.transformer.preprocess(input_name, crop) for crop in crops], dtype=np.float32)
        predictions = self.forward_all(**{input_name: batch})[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape((len(predictions) // 10, 10, -1)).mean(axis=1)
        return predictions
