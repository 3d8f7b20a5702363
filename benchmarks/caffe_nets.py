"""Caffe prototxt nets for the benchmarks' peers: the net read with crema's own schema (proto/crema.proto,
compiled for Python on first use by protoc, else by grpc_tools' protoc, else read by the small proto2 reader
below where neither is installed), the same layers as a PyTorch module, and a .caffemodel of that module's
weights for OpenCV's dnn module, so that every peer runs exactly the architecture of the prototxt.

Layer types: Input, Convolution, Pooling, ReLU, LRN, InnerProduct, Dropout, Concat, Softmax, Flatten, Sigmoid,
TanH, BatchNorm, Scale, Eltwise (what the benchmark nets use); another type is an error naming it. A BatchNorm
followed by a Scale with a bias on its output becomes one torch.nn.BatchNorm2d with its affine transform, PyTorch's
own form of the pair (cuDNN's batch normalization does both in one pass). Needs python3-protobuf and, for
TorchNet, python3-torch.
"""

import ast
import functools
import importlib
import os
import re
import struct
import subprocess
import sys
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def schema():
    """crema.proto for Python (package caffe): compiled by protoc, or by grpc_tools' protoc, and imported from a
    temporary folder; where neither is installed (a machine that got crema's binaries built elsewhere), or what
    it wrote does not import with this protobuf, the message classes built from read_proto's descriptor."""
    proto_dir = os.path.join(ROOT, "proto")
    for compiler in (["protoc"], [sys.executable, "-m", "grpc_tools.protoc"]):
        out = tempfile.mkdtemp(prefix="crema_pb2_")
        try:
            subprocess.run(compiler + ["--proto_path=" + proto_dir, "--python_out=" + out, "crema.proto"],
                           check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        sys.path.insert(0, out)
        try:
            return importlib.import_module("crema_pb2")
        except Exception as error:  # generated code of another protobuf version than the one installed
            sys.path.remove(out)
            print("caffe_nets: %s's crema_pb2 does not import (%s)" % (compiler[-1], error), file=sys.stderr)
    return _classes(read_proto(os.path.join(proto_dir, "crema.proto")))


# The proto2 reader: tokens are strings, numbers (1, -1, 1., .999, 1e-8, -inf), names and single characters;
# whitespace and comments fall out.
_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""
                    r"|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[A-Za-z_][\w.]*|[-+]?(?:inf|nan)|\S)", re.S)


def read_proto(path):
    """The FileDescriptorProto of a proto2 file in the subset crema.proto uses (package, messages with nested
    messages and enums, enums, optional/required/repeated fields with [default = ...] and [packed = ...],
    reserved numbers and names; options are skipped), built without protoc; any other construct is an error
    naming it."""
    from google.protobuf import descriptor_pb2

    Field = descriptor_pb2.FieldDescriptorProto
    labels = {"optional": Field.LABEL_OPTIONAL, "required": Field.LABEL_REQUIRED, "repeated": Field.LABEL_REPEATED}
    scalars = {name: getattr(Field, "TYPE_" + name.upper()) for name in (
        "double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool", "string", "bytes", "uint32",
        "sfixed32", "sfixed64", "sint32", "sint64")}
    with open(path) as f:
        tokens = [m.group(1) for m in _TOKEN.finditer(f.read()) if m.group(1)]
    pos = 0
    where = os.path.basename(path)

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take(expected=None):
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("%s: ends early" % where)
        token = tokens[pos]
        pos += 1
        if expected is not None and token != expected:
            raise ValueError("%s: '%s' where '%s' was expected (token %d)" % (where, token, expected, pos))
        return token

    def skip_statement():
        while take() != ";":
            pass

    def skip_options():
        if peek() == "[":
            while take() != "]":
                pass

    def reserved(message):
        take("reserved")
        while True:
            token = take()
            if token[0] in "\"'":
                message.reserved_name.append(ast.literal_eval(token))
            else:
                start = end = int(token, 0)
                if peek() == "to":
                    take()
                    last = take()
                    end = 536870911 if last == "max" else int(last, 0)
                message.reserved_range.add(start=start, end=end + 1)  # the descriptor's end is exclusive
            if take() == ";":
                return

    def enum(proto):
        take("enum")
        proto.name = take()
        take("{")
        while peek() != "}":
            if peek() in ("option", "reserved"):
                skip_statement()
                continue
            value = proto.value.add(name=take())
            take("=")
            value.number = int(take(), 0)
            skip_options()
            take(";")
        take("}")

    fields = []  # (FieldDescriptorProto, type name as written, scope) for the types named by messages and enums

    def field(proto, scope):
        proto.label = labels[take()]
        kind = take()
        proto.name = take()
        take("=")
        proto.number = int(take(), 0)
        if kind in scalars:
            proto.type = scalars[kind]
        else:
            fields.append((proto, kind, scope))
        if peek() == "[":
            take()
            while True:
                key = take()
                take("=")
                value = take()
                if key == "default":
                    if value[0] in "\"'":
                        value = ast.literal_eval(value)
                    elif kind in ("float", "double"):
                        value = repr(float(value))
                    proto.default_value = value
                elif key == "packed":
                    proto.options.packed = value == "true"
                elif key == "deprecated":
                    proto.options.deprecated = value == "true"
                if take() == "]":
                    break
        take(";")

    def message(proto, scope):
        take("message")
        proto.name = take()
        scope = scope + "." + proto.name
        take("{")
        while peek() != "}":
            token = peek()
            if token == "message":
                message(proto.nested_type.add(), scope)
            elif token == "enum":
                enum(proto.enum_type.add())
            elif token == "reserved":
                reserved(proto)
            elif token in labels:
                field(proto.field.add(), scope)
            elif token == "option":
                skip_statement()
            elif token == ";":
                take()
            else:
                raise ValueError("%s: '%s' in message %s is not read by caffe_nets' proto reader"
                                 % (where, token, scope[1:]))
        take("}")

    result = descriptor_pb2.FileDescriptorProto(name=os.path.basename(path))
    while peek() is not None:
        token = peek()
        if token == "syntax":
            take()
            take("=")
            if ast.literal_eval(take()) != "proto2":
                raise ValueError("%s: only proto2 is read by caffe_nets' proto reader" % where)
            take(";")
        elif token == "package":
            take()
            result.package = take()
            take(";")
        elif token == "option":
            skip_statement()
        elif token == "message":
            message(result.message_type.add(), "." + result.package if result.package else "")
        elif token == "enum":
            enum(result.enum_type.add())
        elif token == ";":
            take()
        else:
            raise ValueError("%s: '%s' is not read by caffe_nets' proto reader" % (where, token))

    # Every message and enum by its full name, then each field's type looked up from its message outwards, as
    # protoc does.
    kinds = {}

    def collect(scope, messages, enums):
        for proto in enums:
            kinds[scope + "." + proto.name] = Field.TYPE_ENUM
        for proto in messages:
            kinds[scope + "." + proto.name] = Field.TYPE_MESSAGE
            collect(scope + "." + proto.name, proto.nested_type, proto.enum_type)

    collect("." + result.package if result.package else "", result.message_type, result.enum_type)
    for proto, kind, scope in fields:
        if kind.startswith("."):
            candidates = [kind]
        else:
            parts = scope.split(".")
            candidates = [".".join(parts[:i] + [kind]) for i in range(len(parts), 0, -1)]
        found = next((c for c in candidates if c in kinds), None)
        if found is None:
            raise ValueError("%s: field %s has the unknown type %s" % (where, proto.name, kind))
        proto.type, proto.type_name = kinds[found], found
    return result


def _classes(file_proto):
    """A module like protoc's _pb2 of `file_proto`: its messages' classes, its enums and their values."""
    from google.protobuf import descriptor_pool, message_factory
    from google.protobuf.internal import enum_type_wrapper

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(file_proto.SerializeToString())
    descriptor = pool.FindFileByName(file_proto.name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf 4.22 on
        make = message_factory.GetMessageClass
    else:
        make = message_factory.MessageFactory(pool).GetPrototype
    module = types.ModuleType(os.path.splitext(file_proto.name)[0] + "_pb2")
    module.DESCRIPTOR = descriptor
    for name, message in descriptor.message_types_by_name.items():
        setattr(module, name, make(message))
    for name, enum in descriptor.enum_types_by_name.items():
        setattr(module, name, enum_type_wrapper.EnumTypeWrapper(enum))
        for value in enum.values:
            setattr(module, value.name, value.number)
    return module


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
            layers = list(net.layer)
            # Scale layers folded into the BatchNorm before them (the affine part of torch's BatchNorm2d).
            self.folded = set()
            for before, after in zip(layers, layers[1:]):
                if (before.type == "BatchNorm" and after.type == "Scale" and len(after.bottom) == 1
                        and after.bottom[0] == before.top[0] and after.scale_param.bias_term
                        and after.scale_param.axis == 1 and after.scale_param.num_axes == 1):
                    self.folded.add(after.name)
            for index, layer in enumerate(layers):
                if layer.type == "Input" or layer.name in self.folded:
                    continue
                self.affine = index + 1 < len(layers) and layers[index + 1].name in self.folded
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
            if kind == "BatchNorm":
                p = layer.batch_norm_param
                channels = shape[1] if len(shape) > 1 else 1
                kind_2d = len(shape) == 4
                module = (nn.BatchNorm2d if kind_2d else nn.BatchNorm1d)(
                    channels, eps=p.eps, momentum=1.0 - p.moving_average_fraction, affine=self.affine)
                self.learned[layer.name] = module
                if p.HasField("use_global_stats") and p.use_global_stats:
                    return (lambda x, m=module: F.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias,
                                                             False, 0.0, m.eps)), shape
                return module, shape
            if kind == "Scale":
                p = layer.scale_param
                if len(layer.bottom) != 1 or p.axis != 1 or p.num_axes != 1:
                    raise ValueError("layer '%s': only a learned per-channel Scale is translated" % layer.name)
                view = (1, shape[1]) + (1,) * (len(shape) - 2)
                weight = nn.Parameter(torch.ones(shape[1]))
                bias = nn.Parameter(torch.zeros(shape[1])) if p.bias_term else None
                holder = nn.Module()
                holder.weight, holder.bias = weight, bias
                self.learned[layer.name] = holder
                if bias is None:
                    return (lambda x, w=weight: x * w.view(view)), shape
                return (lambda x, w=weight, b=bias: torch.addcmul(b.view(view), x, w.view(view))), shape
            if kind == "Eltwise":
                p = layer.eltwise_param
                if p.operation == 1:  # SUM
                    coeffs = list(p.coeff) or [1.0] * len(layer.bottom)
                    if all(c == 1.0 for c in coeffs):
                        return (lambda *xs: functools.reduce(torch.add, xs)), shape
                    return (lambda *xs, c=coeffs: functools.reduce(torch.add, [k * x for k, x in zip(c, xs)])), shape
                if p.operation == 0:  # PROD
                    return (lambda *xs: functools.reduce(torch.mul, xs)), shape
                return (lambda *xs: functools.reduce(torch.maximum, xs)), shape
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
    and blobs in Caffe's shapes: weights, then bias; a BatchNorm's running mean and variance and a scale factor of
    1 (Caffe keeps sums and the factor that divides them); a Scale folded into the BatchNorm before it (torch's
    affine BatchNorm2d) its weight and bias. Written field by field (BlobProto.data packed), since the CaffeNet
    family's 60 million weights are slow through protobuf's Python lists."""
    import torch

    pb = schema()
    with open(path, "wb") as f:
        batch_norm = None  # the module of the last BatchNorm, whose affine part a folded Scale holds
        for layer in net.layer:
            if layer.name in model.folded:
                tensors = [batch_norm.weight, batch_norm.bias]
            elif layer.name in model.learned:
                module = model.learned[layer.name]
                if layer.type == "BatchNorm":
                    batch_norm = module
                    tensors = [module.running_mean, module.running_var, torch.ones(1)]
                else:
                    tensors = [module.weight] + ([module.bias] if module.bias is not None else [])
            else:
                continue
            head = pb.LayerParameter(name=layer.name, type=layer.type).SerializeToString()
            blobs = b""
            for tensor in tensors:
                shape = pb.BlobShape(dim=list(tensor.shape)).SerializeToString()
                values = tensor.detach().contiguous().numpy().astype("<f4").tobytes()
                blob = _field(7, shape) + _field(5, values)  # BlobProto.shape = 7, BlobProto.data = 5 (packed)
                blobs += _field(7, blob)  # LayerParameter.blobs = 7
            f.write(_field(100, head + blobs))  # NetParameter.layer = 100


assert struct.calcsize("<f") == 4
