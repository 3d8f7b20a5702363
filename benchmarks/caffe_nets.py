"""Caffe prototxt nets for the benchmarks' peers: the net read with crema's own schema (proto/crema.proto,
compiled by protoc for Python on first use), the same layers as a PyTorch module, and a .caffemodel of that
module's weights for OpenCV's dnn module, so that every peer runs exactly the architecture of the prototxt.

Layer types: Input, Convolution, Pooling, ReLU, LRN, InnerProduct, Dropout, Concat, Softmax, Flatten, Sigmoid,
TanH (what the benchmark nets use); another type is an error naming it. Needs python3-protobuf and, for
TorchNet, python3-torch.
"""

import functools
import importlib
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def schema():
    """crema.proto compiled for Python (package caffe), imported from a temporary folder."""
    out = tempfile.mkdtemp(prefix="crema_pb2_")
    subprocess.run(["protoc", "--proto_path=" + os.path.join(ROOT, "proto"), "--python_out=" + out, "crema.proto"],
                   check=True)
    sys.path.insert(0, out)
    return importlib.import_module("crema_pb2")


def read_net(path, batch=None):
    """The NetParameter of a prototxt, with its Input layers' first dimension set to `batch` if given."""
    from google.protobuf import text_format

    net = schema().NetParameter()
    with open(path) as f:
        text_format.Merge(f.read(), net)
    if batch is not None:
        for layer in net.layer:
            if layer.type == "Input":
                for shape in layer.input_param.shape:
                    shape.dim[0] = batch
    return net


def _pair(values, h, w, default):
    """Caffe's repeated kernel_size/stride/pad (one value or one per axis) or its _h/_w forms."""
    if h or w:
        return (h, w)
    if len(values) == 0:
        return (default, default)
    return (values[0], values[-1])


def input_shapes(net):
    return {layer.top[0]: tuple(layer.input_param.shape[0].dim) for layer in net.layer if layer.type == "Input"}


def torch_net(net):
    """The net as a torch.nn.Module whose forward takes the Input blobs by name and returns the blobs that no
    layer reads (the outputs)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class TorchNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = []  # (layer name, bottoms, tops, callable)
            self.learned = nn.ModuleDict()  # layer name -> module with weight (and bias)
            shapes = dict(input_shapes(net))
            for layer in net.layer:
                if layer.type == "Input":
                    continue
                bottoms, tops = list(layer.bottom), list(layer.top)
                in_shape = shapes[bottoms[0]]
                fn, out_shape = self._layer(layer, in_shape, [shapes[b] for b in bottoms])
                self.steps.append((layer.name, bottoms, tops, fn))
                for top in tops:
                    shapes[top] = out_shape
            read = {b for layer in net.layer for b in layer.bottom}
            self.outputs = [t for layer in net.layer for t in layer.top if t not in read]

        def _layer(self, layer, shape, all_shapes):
            kind = layer.type
            in_place = len(layer.bottom) == 1 and len(layer.top) == 1 and layer.bottom[0] == layer.top[0]
            if kind == "Convolution":
                p = layer.convolution_param
                kernel = _pair(p.kernel_size, p.kernel_h, p.kernel_w, 1)
                stride = _pair(p.stride, p.stride_h, p.stride_w, 1)
                pad = _pair(p.pad, p.pad_h, p.pad_w, 0)
                dilation = (p.dilation[0], p.dilation[-1]) if len(p.dilation) else (1, 1)
                conv = nn.Conv2d(shape[1], p.num_output, kernel, stride, pad, dilation, p.group, p.bias_term)
                self.learned[layer.name] = conv
                out = [(shape[2 + i] + 2 * pad[i] - (dilation[i] * (kernel[i] - 1) + 1)) // stride[i] + 1
                       for i in range(2)]
                return conv, (shape[0], p.num_output, out[0], out[1])
            if kind == "Pooling":
                p = layer.pooling_param
                if p.global_pooling:
                    kernel, stride, pad = (shape[2], shape[3]), (1, 1), (0, 0)
                else:
                    kernel = _pair([p.kernel_size] if p.HasField("kernel_size") else [], p.kernel_h, p.kernel_w, 1)
                    stride = _pair([p.stride] if p.HasField("stride") else [], p.stride_h, p.stride_w, 1)
                    pad = _pair([p.pad] if p.HasField("pad") else [], p.pad_h, p.pad_w, 0)
                ceil = p.round_mode == 0  # CEIL, Caffe's default
                out = []
                for i in range(2):
                    span = shape[2 + i] + 2 * pad[i] - kernel[i]
                    o = (-(-span // stride[i]) if ceil else span // stride[i]) + 1
                    if ceil and pad[i] > 0 and (o - 1) * stride[i] >= shape[2 + i] + pad[i]:
                        o -= 1
                    out.append(o)
                if p.pool == 0:
                    fn = nn.MaxPool2d(kernel, stride, pad, ceil_mode=ceil)
                else:
                    fn = nn.AvgPool2d(kernel, stride, pad, ceil_mode=ceil, count_include_pad=True)
                return fn, (shape[0], shape[1], out[0], out[1])
            if kind == "ReLU":
                slope = layer.relu_param.negative_slope
                return (nn.LeakyReLU(slope, inplace=in_place) if slope else nn.ReLU(inplace=in_place)), shape
            if kind == "Sigmoid":
                return nn.Sigmoid(), shape
            if kind == "TanH":
                return nn.Tanh(), shape
            if kind == "LRN":
                p = layer.lrn_param
                if p.norm_region != 0:
                    raise ValueError("layer '%s': only ACROSS_CHANNELS LRN is translated" % layer.name)
                return nn.LocalResponseNorm(p.local_size, alpha=p.alpha, beta=p.beta, k=p.k), shape
            if kind == "InnerProduct":
                p = layer.inner_product_param
                inputs = 1
                for d in shape[1:]:
                    inputs *= d
                linear = nn.Linear(inputs, p.num_output, p.bias_term)
                self.learned[layer.name] = linear
                return (lambda x, linear=linear: linear(torch.flatten(x, 1))), (shape[0], p.num_output)
            if kind == "Dropout":
                return nn.Dropout(layer.dropout_param.dropout_ratio), shape  # in place would break the ReLU before
            if kind == "Concat":
                axis = layer.concat_param.axis
                total = sum(s[axis] for s in all_shapes)
                out = list(shape)
                out[axis] = total
                return (lambda *xs, axis=axis: torch.cat(xs, axis)), tuple(out)
            if kind == "Softmax":
                return nn.Softmax(dim=layer.softmax_param.axis), shape
            if kind == "Flatten":
                size = 1
                for d in shape[1:]:
                    size *= d
                return (lambda x: torch.flatten(x, 1)), (shape[0], size)
            raise ValueError("layer '%s': type %s is not translated to PyTorch" % (layer.name, kind))

        def forward(self, **inputs):
            blobs = dict(inputs)
            for _, bottoms, tops, fn in self.steps:
                blobs[tops[0]] = fn(*[blobs[b] for b in bottoms])
            return [blobs[name] for name in self.outputs]

    model = TorchNet()
    # Registered so that .train()/.eval() reach the Dropout and pooling modules too.
    model.others = nn.ModuleList([fn for _, _, _, fn in model.steps if isinstance(fn, nn.Module)])
    return model


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def write_caffemodel(net, model, path):
    """The weights of `model` (torch_net(net)) as a binary NetParameter: each learned layer with its name, type
    and blobs (weights, then bias) in Caffe's shapes. Written field by field (BlobProto.data packed), since the
    CaffeNet family's 60 million weights are slow through protobuf's Python lists."""
    pb = schema()
    with open(path, "wb") as f:
        for layer in net.layer:
            if layer.name not in model.learned:
                continue
            module = model.learned[layer.name]
            head = pb.LayerParameter(name=layer.name, type=layer.type).SerializeToString()
            blobs = b""
            for tensor in [module.weight] + ([module.bias] if module.bias is not None else []):
                shape = pb.BlobShape(dim=list(tensor.shape)).SerializeToString()
                values = tensor.detach().contiguous().numpy().astype("<f4").tobytes()
                blob = _field(7, shape) + _field(5, values)  # BlobProto.shape = 7, BlobProto.data = 5 (packed)
                blobs += _field(7, blob)  # LayerParameter.blobs = 7
            f.write(_field(100, head + blobs))  # NetParameter.layer = 100


assert struct.calcsize("<f") == 4
