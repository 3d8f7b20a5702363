"""Data to and from numpy: Datum records, BlobProto files (a mean.binaryproto), images, and the Transformer that
turns images into a net's input (the names follow pycaffe's caffe.io).

    image = crema.io.load_image("cat.jpg")                   # H x W x 3 float32 in [0, 1], R G B
    t = crema.io.Transformer({"data": net.blobs["data"].shape})
    t.set_transpose("data", (2, 0, 1))                       # H x W x C -> C x H x W
    t.set_channel_swap("data", (2, 1, 0))                    # R G B -> B G R, the order crema's data layers use
    t.set_raw_scale("data", 255)                             # [0, 1] -> [0, 255]
    t.set_mean("data", crema.io.blobproto_to_array("mean.binaryproto")[0])
    net.blobs["data"].data[...] = t.preprocess("data", image)

The Datum and BlobProto bytes are made and read by crema's C++ schema code (no protobuf module needed), images are
decoded by the same OpenCV code as the ImageData layer and convert_imageset.
"""

import os

import numpy as np

from . import _crema
from ._crema import Error

__all__ = [
    "Transformer",
    "array_to_blobproto",
    "array_to_datum",
    "blobproto_to_array",
    "datum_to_array",
    "load_image",
    "resize_image",
]


def datum_to_array(datum):
    """(channels x height x width array, label) of a serialized Datum: uint8 for byte data (an encoded image is
    decoded, channels as stored: B G R for colour), float32 for float_data."""
    return _crema.datum_to_array(bytes(datum))


def array_to_datum(array, label=0):
    """A serialized Datum of a channels x height x width array: uint8 arrays as bytes (`data`), any other numeric
    dtype as float32 `float_data`."""
    array = np.asarray(array)
    if array.ndim != 3:
        raise Error(f"array_to_datum: a Datum holds a channels x height x width array, not one of shape {array.shape}")
    if array.dtype == np.uint8:
        return _crema.uint8_array_to_datum(array, int(label))
    return _crema.float_array_to_datum(array, int(label))


def blobproto_to_array(blobproto):
    """The values of a BlobProto (serialized bytes, or the path of a .binaryproto file such as compute_image_mean's
    mean) in its shape: `shape` when set, else the legacy num x channels x height x width."""
    if isinstance(blobproto, (str, os.PathLike)):
        path = os.fspath(blobproto)
        try:
            with open(path, "rb") as source:
                data = source.read()
        except OSError as error:
            raise Error(f"cannot read '{path}': {error.strerror}") from None
        return _crema.blobproto_to_array(data, path)
    return _crema.blobproto_to_array(bytes(blobproto), "BlobProto bytes")


def array_to_blobproto(array):
    """A serialized BlobProto of `array` (its shape, values as float32)."""
    return _crema.array_to_blobproto(np.asarray(array))


def load_image(path, color=True):
    """The image at `path` as float32 height x width x channels in [0, 1]: R G B when `color` (grey images are
    repeated into three channels), else one grey channel. Decoded by crema's OpenCV image reader."""
    pixels = _crema.read_image(os.fspath(path), bool(color))  # channels x height x width, B G R
    image = pixels.transpose(1, 2, 0)
    if color:
        image = image[:, :, ::-1]
    return np.ascontiguousarray(image, dtype=np.float32) / np.float32(255)


def resize_image(image, new_dims, interp_order=1):
    """`image` (height x width or height x width x channels) resized to new_dims = (height, width): bilinear
    (interp_order=1; pixel centres aligned, as OpenCV's INTER_LINEAR) or nearest (interp_order=0). Returns
    float32 for float32 input, else float64."""
    image = np.asarray(image)
    if image.ndim not in (2, 3):
        raise Error(f"resize_image: expected height x width (x channels), not shape {image.shape}")
    height, width = (int(d) for d in new_dims)
    if height <= 0 or width <= 0:
        raise Error(f"resize_image: the new size {height} x {width} is not positive")
    dtype = np.float32 if image.dtype == np.float32 else np.float64
    source = image.astype(dtype, copy=False)
    if source.shape[:2] == (height, width):
        return source.copy()

    def positions(new, old):
        return np.clip((np.arange(new, dtype=np.float64) + 0.5) * (old / new) - 0.5, 0, old - 1)

    ys, xs = positions(height, source.shape[0]), positions(width, source.shape[1])
    if interp_order == 0:
        return source[np.floor(ys + 0.5).astype(int)][:, np.floor(xs + 0.5).astype(int)].copy()
    if interp_order != 1:
        raise Error(f"resize_image: interp_order is 0 (nearest) or 1 (bilinear), not {interp_order}")
    y0 = np.floor(ys).astype(int)
    x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, source.shape[0] - 1)
    x1 = np.minimum(x0 + 1, source.shape[1] - 1)
    wy = (ys - y0).reshape((-1, 1) + (1,) * (source.ndim - 2))
    wx = (xs - x0).reshape((1, -1) + (1,) * (source.ndim - 2))
    top = source[y0][:, x0] * (1 - wx) + source[y0][:, x1] * wx
    bottom = source[y1][:, x0] * (1 - wx) + source[y1][:, x1] * wx
    return (top * (1 - wy) + bottom * wy).astype(dtype)


class Transformer:
    """Turns images (height x width x channels, as load_image gives) into a net input's layout and back.

    Transformer({"data": (N, C, H, W)}); preprocess applies, in this order: resize to H x W, transpose, channel
    swap, raw scale, mean subtraction, input scale. deprocess undoes them in reverse (all but the resize)."""

    def __init__(self, inputs):
        self.inputs = {name: tuple(int(d) for d in shape) for name, shape in inputs.items()}
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def _check_input(self, name):
        if name not in self.inputs:
            raise Error(f"Transformer: '{name}' is not one of its inputs ({', '.join(self.inputs)})")

    def set_transpose(self, name, order):
        """The axes of the image in the input's order, e.g. (2, 0, 1) for H x W x C -> C x H x W."""
        self._check_input(name)
        order = tuple(int(axis) for axis in order)
        if len(order) != len(self.inputs[name]) - 1:
            raise Error(
                f"Transformer.set_transpose('{name}'): the order {order} must list the {len(self.inputs[name]) - 1} "
                f"axes of one item of the input of shape {self.inputs[name]}"
            )
        self.transpose[name] = order

    def set_channel_swap(self, name, order):
        """The new order of the channels (after the transpose), e.g. (2, 1, 0) for R G B -> B G R."""
        self._check_input(name)
        order = tuple(int(channel) for channel in order)
        if len(order) != self.inputs[name][1]:
            raise Error(
                f"Transformer.set_channel_swap('{name}'): the order {order} must list the input's "
                f"{self.inputs[name][1]} channels"
            )
        self.channel_swap[name] = order

    def set_raw_scale(self, name, scale):
        """Multiplies the image before the mean is subtracted (255 maps load_image's [0, 1] to [0, 255])."""
        self._check_input(name)
        self.raw_scale[name] = scale

    def set_mean(self, name, mean):
        """Subtracted after the raw scale: one value per channel, or a channels x height x width image (a mean
        file's, of the input's height and width)."""
        self._check_input(name)
        mean = np.asarray(mean, dtype=np.float32)
        channels, size = self.inputs[name][1], self.inputs[name][2:]
        if mean.ndim == 1:
            if mean.shape[0] != channels:
                raise Error(f"Transformer.set_mean('{name}'): {mean.shape[0]} channel means for {channels} channels")
            mean = mean.reshape((channels,) + (1,) * len(size))
        elif mean.shape != (channels,) + tuple(size):
            raise Error(
                f"Transformer.set_mean('{name}'): a mean of shape {mean.shape} does not fit the input's "
                f"{(channels,) + tuple(size)}"
            )
        self.mean[name] = mean

    def set_input_scale(self, name, scale):
        """Multiplies the image last, after the mean is subtracted."""
        self._check_input(name)
        self.input_scale[name] = scale

    def preprocess(self, name, data):
        """One image (height x width x channels, resized first when its height and width are not the input's) as
        one item of input `name`: float32, in the input's layout."""
        self._check_input(name)
        image = np.asarray(data).astype(np.float32, copy=False)
        size = tuple(self.inputs[name][2:])
        if len(size) == 2 and image.shape[:2] != size:
            image = resize_image(image, size)
        if name in self.transpose:
            image = image.transpose(self.transpose[name])
        if name in self.channel_swap:
            image = image[list(self.channel_swap[name])]
        if name in self.raw_scale:
            image = image * np.float32(self.raw_scale[name])
        if name in self.mean:
            image = image - self.mean[name]
        if name in self.input_scale:
            image = image * np.float32(self.input_scale[name])
        return np.ascontiguousarray(image, dtype=np.float32)

    def deprocess(self, name, data):
        """Undoes preprocess (all but the resize): an item of input `name` back as an image."""
        self._check_input(name)
        image = np.array(data, dtype=np.float32)
        if image.ndim == len(self.inputs[name]):  # a batch of one, as net.blobs[name].data[0:1]
            image = image[0]
        if name in self.input_scale:
            image = image / np.float32(self.input_scale[name])
        if name in self.mean:
            image = image + self.mean[name]
        if name in self.raw_scale:
            image = image / np.float32(self.raw_scale[name])
        if name in self.channel_swap:
            image = image[list(np.argsort(self.channel_swap[name]))]
        if name in self.transpose:
            image = image.transpose(tuple(np.argsort(self.transpose[name])))
        return image
