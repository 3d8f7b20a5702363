"""Data to and from numpy: Datum records, BlobProto files (a mean.binaryproto), images, and the Transformer that
turns images into a net's input (the names follow pycaffe's caffe.io).

    image = crema.io.load_image("cat.jpg")                   # H x W x 3 float32 in [0, 1], R G B
    t = crema.io.Transformer({"data": net.blobs["data"].shape})
    t.set_transpose("data", (2, 0, 1))                       # H x W x C -> C x H x W
    t.set_channel_swap("data", (2, 1, 0))                    # R G B -> B G R, the order crema's data layers use
    t.set_raw_scale("data", 255)                             # [0, 1] -> [0, 255]
    t.set_mean("data", crema.io.blobproto_to_array("mean.binaryproto")[0])
    net.blobs["data"].data[...] = t.preprocess("data", image)

Datum and BlobProto are caffe_pb2 messages, as in pycaffe (serialized bytes where Python has no protobuf module);
their bytes are made and read by crema's C++ code, and images are decoded by the same OpenCV code as the ImageData
layer and convert_imageset.
"""

import os

import numpy as np

from . import _crema
from ._crema import Error

__all__ = [
    "Transformer",
    "arraylist_to_blobprotovector_str",
    "blobprotovector_str_to_arraylist",
    "oversample",
    "array_to_blobproto",
    "array_to_datum",
    "blobproto_to_array",
    "datum_to_array",
    "load_image",
    "resize_image",
]


def _pb2():
    """crema.proto.caffe_pb2, or None where Python has no protobuf module."""
    try:
        from .proto import caffe_pb2
    except ImportError:
        return None
    return caffe_pb2


def _is_message(value, name):
    return hasattr(value, "SerializeToString") and getattr(getattr(value, "DESCRIPTOR", None), "name", None) == name


def datum_to_array(datum):
    """The values of a Datum as channels x height x width: uint8 for byte data (an encoded image is decoded,
    channels as stored: B G R for colour), float32 for float_data.

    Given a caffe_pb2.Datum (pycaffe's way), returns the array only (the label is datum.label); given the
    serialized bytes (an LMDB record), returns (array, label)."""
    if _is_message(datum, "Datum"):
        return _crema.datum_to_array(datum.SerializeToString())[0]
    return _crema.datum_to_array(bytes(datum))


def array_to_datum(arr, label=None):
    """A caffe_pb2.Datum of a channels x height x width array: uint8 arrays as bytes (`data`), any other numeric
    dtype as float32 `float_data`; the label is set when given. Without Python's protobuf module: the serialized
    Datum (bytes)."""
    array = np.asarray(arr)
    if array.ndim != 3:
        raise Error(f"array_to_datum: a Datum holds a channels x height x width array, not one of shape {array.shape}")
    write = _crema.uint8_array_to_datum if array.dtype == np.uint8 else _crema.float_array_to_datum
    serialized = write(array, 0 if label is None else int(label))
    pb2 = _pb2()
    if pb2 is None:
        return serialized
    datum = pb2.Datum.FromString(serialized)
    if label is None:
        datum.ClearField("label")
    return datum


def _read_file(path):
    try:
        with open(path, "rb") as source:
            return source.read()
    except OSError as error:
        raise Error(f"cannot read '{path}': {error.strerror}") from None


def blobproto_to_array(blob, return_diff=False):
    """The values of a BlobProto in its shape: `shape` when set, else the legacy num x channels x height x width.

    `blob` is a caffe_pb2.BlobProto (pycaffe's way; return_diff=True gives its diff), serialized bytes, or the
    path of a .binaryproto file such as compute_image_mean's mean."""
    if _is_message(blob, "BlobProto"):
        if return_diff:
            if blob.HasField("shape"):
                shape = tuple(blob.shape.dim)
            else:
                shape = (blob.num, blob.channels, blob.height, blob.width)
            values = blob.double_diff if len(blob.double_diff) else blob.diff
            dtype = np.float64 if len(blob.double_diff) else np.float32
            values = np.array(values, dtype=dtype)
            if values.size != int(np.prod(shape)):
                raise Error(f"blobproto_to_array: the BlobProto's diff holds {values.size} values, its shape {shape}")
            return values.reshape(shape)
        return _crema.blobproto_to_array(blob.SerializeToString(), "BlobProto")
    if return_diff:
        raise Error("blobproto_to_array: return_diff=True needs a caffe_pb2.BlobProto")
    if isinstance(blob, (str, os.PathLike)):
        path = os.fspath(blob)
        return _crema.blobproto_to_array(_read_file(path), path)
    return _crema.blobproto_to_array(bytes(blob), "BlobProto bytes")


def array_to_blobproto(arr, diff=None):
    """A caffe_pb2.BlobProto of `arr` (its shape in `shape`, values as float32; `diff`, of the same shape, as its
    diff). Without Python's protobuf module: the serialized BlobProto (bytes; diff not supported)."""
    array = np.asarray(arr)
    serialized = _crema.array_to_blobproto(array)
    pb2 = _pb2()
    if pb2 is None:
        if diff is not None:
            raise Error("array_to_blobproto: a diff needs Python's protobuf module (python3-protobuf)")
        return serialized
    blob = pb2.BlobProto.FromString(serialized)
    if diff is not None:
        diff = np.asarray(diff, dtype=np.float32)
        if diff.shape != array.shape:
            raise Error(f"array_to_blobproto: the diff's shape {diff.shape} is not the array's {array.shape}")
        blob.diff.extend(diff.flat)
    return blob


def arraylist_to_blobprotovector_str(arraylist):
    """A serialized BlobProtoVector of the arrays (one BlobProto each)."""
    pb2 = _pb2()
    if pb2 is None:
        raise Error("arraylist_to_blobprotovector_str needs Python's protobuf module (python3-protobuf)")
    vector = pb2.BlobProtoVector()
    for array in arraylist:
        vector.blobs.add().ParseFromString(_crema.array_to_blobproto(np.asarray(array)))
    return vector.SerializeToString()


def blobprotovector_str_to_arraylist(str):  # noqa: A002 (pycaffe's parameter name)
    """The arrays of a serialized BlobProtoVector."""
    pb2 = _pb2()
    if pb2 is None:
        raise Error("blobprotovector_str_to_arraylist needs Python's protobuf module (python3-protobuf)")
    vector = pb2.BlobProtoVector.FromString(bytes(str))
    return [blobproto_to_array(blob) for blob in vector.blobs]


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
    dtype = np.float32
    source = image.astype(np.float64, copy=False)
    if source.shape[:2] == (height, width):
        return source.astype(dtype)

    def positions(new, old):
        return np.clip((np.arange(new, dtype=np.float64) + 0.5) * (old / new) - 0.5, 0, old - 1)

    ys, xs = positions(height, source.shape[0]), positions(width, source.shape[1])
    if interp_order == 0:
        return source[np.floor(ys + 0.5).astype(int)][:, np.floor(xs + 0.5).astype(int)].astype(dtype)
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


def oversample(images, crop_dims):
    """Ten crops of each image (height x width x channels, all of one size), as pycaffe's oversample: the four
    corners and the centre, then the same five mirrored left to right. Returns (10 * len(images)) x crop height x
    crop width x channels, float32, the crops of each image together."""
    images = [np.asarray(image) for image in images]
    if not images:
        return np.zeros((0,) + tuple(int(d) for d in crop_dims), np.float32)
    height, width = images[0].shape[:2]
    crop_h, crop_w = (int(d) for d in crop_dims)
    if crop_h > height or crop_w > width:
        raise Error(f"oversample: a {crop_h} x {crop_w} crop does not fit {height} x {width} images")
    starts = [(0, 0), (0, width - crop_w), (height - crop_h, 0), (height - crop_h, width - crop_w),
              (int(height / 2.0 - crop_h / 2.0), int(width / 2.0 - crop_w / 2.0))]
    crops = np.empty((10 * len(images), crop_h, crop_w, images[0].shape[2]), dtype=np.float32)
    for i, image in enumerate(images):
        if image.shape[:2] != (height, width):
            raise Error(f"oversample: the images differ in size ({image.shape[:2]} and {(height, width)})")
        for k, (y, x) in enumerate(starts):
            crop = image[y:y + crop_h, x:x + crop_w]
            crops[10 * i + k] = crop
            crops[10 * i + 5 + k] = crop[:, ::-1]
    return crops


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
