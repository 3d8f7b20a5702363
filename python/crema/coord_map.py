"""How the spatial coordinates of one NetSpec top map onto another's (pycaffe's caffe.coord_map), for
fully convolutional nets: `crop(top_from, top_to)` is the Crop layer that aligns an upsampled score map with the
input, with the offset worked out from the convolutions, poolings and deconvolutions between them.

A map is (axis, a, b): a coordinate x of one top is a * x + b in the other, on the spatial axes after `axis`.
"""

import numpy as np

from .net_spec import layers as L

__all__ = ["AxisMismatchException", "UndefinedMapException", "compose", "conv_params", "coord_map",
           "coord_map_from_to", "crop", "crop_params", "inverse"]

# Layers that keep every spatial coordinate where it is.
PASS_THROUGH_LAYERS = {
    "AbsVal", "BatchNorm", "Bias", "BNLL", "Clip", "Dropout", "Eltwise", "ELU", "Exp", "Log", "LRN", "MVN",
    "Power", "PReLU", "ReLU", "Scale", "Sigmoid", "Split", "Swish", "TanH", "Threshold",
}


class UndefinedMapException(Exception):
    """The layer's coordinate map is undefined (a layer that mixes or drops spatial positions)."""


class AxisMismatchException(Exception):
    """Two maps act on different axes and cannot be composed."""


def _fields(fn, param_field):
    """The layer's keywords, with those given inside its own parameter message (convolution_param=dict(...))."""
    params = dict(fn.params)
    params.update(params.pop(param_field, None) or {})
    return params


def conv_params(fn):
    """(axis, stride, effective kernel size, pad) of a Convolution, Deconvolution, Pooling or Im2col layer, as
    arrays over the spatial axes; the kernel size counts dilation."""
    params = _fields(fn, "pooling_param" if fn.type_name == "Pooling" else "convolution_param")
    legacy = {"kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w"} & set(params)
    if legacy:
        raise UndefinedMapException(f"coord_map: layer {fn.type_name} uses {sorted(legacy)}; give kernel_size, "
                                    "stride and pad instead")
    if "kernel_size" not in params:
        raise UndefinedMapException(f"coord_map: layer {fn.type_name} has no kernel_size")
    kernel = np.array(params["kernel_size"], ndmin=1)
    dilation = np.array(params.get("dilation", 1), ndmin=1)
    return (params.get("axis", 1), np.array(params.get("stride", 1), ndmin=1), (kernel - 1) * dilation + 1,
            np.array(params.get("pad", 0), ndmin=1))


def crop_params(fn):
    """(axis, offset) of a Crop layer (axis 2 unless given, offset 0)."""
    params = _fields(fn, "crop_param")
    return params.get("axis", 2), np.array(params.get("offset", 0), ndmin=1)


def coord_map(fn):
    """The map of a layer from its (first) bottom's coordinates to its tops'."""
    if fn.type_name in ("Convolution", "Pooling", "Im2col"):
        axis, stride, kernel, pad = conv_params(fn)
        return axis, 1 / stride, (pad - (kernel - 1) / 2) / stride
    if fn.type_name == "Deconvolution":
        axis, stride, kernel, pad = conv_params(fn)
        return axis, stride, (kernel - 1) / 2 - pad
    if fn.type_name in PASS_THROUGH_LAYERS:
        return None, 1, 0
    if fn.type_name == "Crop":
        axis, offset = crop_params(fn)
        return axis - 1, 1, -offset  # the map's axis is the last axis before the spatial ones
    raise UndefinedMapException(f"coord_map: no coordinate map for a {fn.type_name} layer")


def compose(base_map, next_map):
    """The map `base_map` after `next_map`: x -> a1 * (a2 * x + b2) + b1."""
    ax1, a1, b1 = base_map
    ax2, a2, b2 = next_map
    if ax1 is None:
        axis = ax2
    elif ax2 is None or ax1 == ax2:
        axis = ax1
    else:
        raise AxisMismatchException(f"coord_map: maps on axes {ax1} and {ax2}")
    return axis, a1 * a2, a1 * b2 + b1


def inverse(coord_map):
    axis, a, b = coord_map
    return axis, 1 / a, -b / a


def coord_map_from_to(top_from, top_to):
    """The map from top_from's coordinates to top_to's, through their nearest common ancestor (following each
    layer's first bottom only through Crop layers); raises RuntimeError where the two are not connected through
    layers with coordinate maps."""

    def bottoms_of(top):
        inputs = top.fn.inputs
        return inputs[:1] if top.fn.type_name == "Crop" else inputs

    def walk(start):
        """top -> the map from its coordinates to start's, for start and every ancestor reachable by maps."""
        maps = {start: (None, 1, 0)}
        frontier = [start]
        while frontier:
            top = frontier.pop()
            try:
                layer_map = coord_map(top.fn)
            except UndefinedMapException:
                continue
            for bottom in bottoms_of(top):
                if bottom not in maps:
                    maps[bottom] = compose(maps[top], layer_map)
                    frontier.append(bottom)
        return maps

    from_maps = walk(top_from)
    to_maps = walk(top_to)
    # The common ancestor nearest to top_to (the first found walking from it, breadth first).
    order = [top_to]
    seen = {top_to}
    for top in order:
        if top in from_maps:
            return compose(to_maps[top], inverse(from_maps[top]))
        try:
            coord_map(top.fn)
        except UndefinedMapException:
            continue
        for bottom in bottoms_of(top):
            if bottom not in seen:
                seen.add(bottom)
                order.append(bottom)
    raise RuntimeError("coord_map: could not compute the map between the tops: are they connected through "
                       "spatial layers (convolutions, poolings, crops, element-wise layers)?")


def crop(top_from, top_to):
    """A Crop layer (L.Crop) cutting top_from to top_to's extent: axis and offset from the coordinate map between
    them, which must be a pure shift (scale 1, offset >= 0)."""
    axis, a, b = coord_map_from_to(top_from, top_to)
    if not np.all(np.asarray(a) == 1):
        raise ValueError(f"crop: the tops' coordinates differ in scale ({a}), not only by a shift")
    if not np.all(np.asarray(b) <= 0):
        raise ValueError(f"crop: top_to is not inside top_from (shift {b})")
    return L.Crop(top_from, top_to, crop_param=dict(axis=axis + 1, offset=list(-np.round(b).astype(int))))
