"""Nets written as Python code, printed as prototxt (the net_spec idiom of Caffe's Python module).

    from crema import layers as L, params as P
    n = crema.NetSpec()
    n.data, n.label = L.Data(source="train_lmdb", backend=P.Data.LMDB, batch_size=64, ntop=2,
                             transform_param=dict(scale=1 / 256))
    n.ip1 = L.InnerProduct(n.data, num_output=10, weight_filler=dict(type="xavier"))
    n.loss = L.SoftmaxWithLoss(n.ip1, n.label)
    print(n.to_proto())                   # a caffe_pb2.NetParameter; str() of it is the prototxt

A keyword of a layer goes to the layer's own parameter message (`num_output` of an InnerProduct layer into
`inner_product_param`), else to LayerParameter itself (`param`, `loss_weight`, `include`, `*_param`). The field
names, which fields repeat and the enum values come from crema's compiled schema (crema._crema.net_schema), so
there is no copy of crema.proto here to fall out of step with it, and no protobuf module is needed.
"""

import collections
import math
import numbers

from . import _crema
from ._crema import Error

__all__ = ["NetSpec", "NetProto", "Top", "layers", "params", "to_proto"]

_Field = collections.namedtuple("_Field", "name repeated kind type enum")

# Layer types whose parameters are kept in another type's message (the schema names messages after one type).
_SHARED_PARAMS = {
    "Deconvolution": "convolution_param",
    "Im2col": "convolution_param",
    "LSTM": "recurrent_param",
    "RNN": "recurrent_param",
    "SoftmaxWithLoss": "softmax_param",
}

_schema_cache = {}


def _schema():
    """{message: {field: _Field}}, and {layer type: its parameter field of LayerParameter}."""
    if not _schema_cache:
        messages = {}
        for message, fields in _crema.net_schema().items():
            messages[message] = collections.OrderedDict(
                (name, _Field(name, repeated, kind, type_name, dict(enum)))
                for name, repeated, kind, type_name, enum in fields
            )
        param_fields = {}
        for field in messages["LayerParameter"].values():
            if field.kind == "message" and field.name.endswith("_param") and field.type.endswith("Parameter"):
                param_fields[field.type[: -len("Parameter")]] = field.name
        for layer_type, field in _SHARED_PARAMS.items():
            if field in messages["LayerParameter"]:
                param_fields.setdefault(layer_type, field)
        _schema_cache["messages"] = messages
        _schema_cache["param_fields"] = param_fields
    return _schema_cache["messages"], _schema_cache["param_fields"]


class Top:
    """One output blob of a layer written with crema.layers; its name is the NetSpec attribute it is assigned to.
    `fn` (its layer) and `n` (its index among the layer's tops) are pycaffe's names for `function` and `index`."""

    def __init__(self, function, index):
        self.function = function
        self.index = index

    @property
    def fn(self):
        return self.function

    @property
    def n(self):
        return self.index

    def to_proto(self):
        return to_proto(self)

    def __repr__(self):
        return f"<crema.Top {self.index} of {self.function.type_name}>"


class Function:
    """A layer call L.Type(bottoms..., keywords...): its type, inputs, keywords and tops."""

    def __init__(self, type_name, inputs, kwargs):
        self.type_name = type_name
        # A tuple (or list) of tops, as L.Type(..., ntop=2) returns, stands for its tops in order.
        flat = []
        for bottom in inputs:
            flat.extend(bottom if isinstance(bottom, (tuple, list)) else [bottom])
        inputs = flat
        for bottom in inputs:
            if not isinstance(bottom, Top):
                raise Error(
                    f"L.{type_name}: a bottom must be a top of another layer (n.name, or what L.Type(...) "
                    f"returned), not {type(bottom).__name__} {bottom!r}"
                )
        self.inputs = tuple(inputs)
        self.kwargs = dict(kwargs)
        self.ntop = self.kwargs.pop("ntop", 1)
        self.in_place = self.kwargs.pop("in_place", False)
        self.layer_name = self.kwargs.pop("name", None)
        if not isinstance(self.ntop, int) or self.ntop < 0:
            raise Error(f"L.{type_name}: ntop must be a non-negative integer, not {self.ntop!r}")
        if self.in_place and self.ntop != len(self.inputs):
            raise Error(
                f"L.{type_name}: in_place=True writes each top over its bottom, so it needs as many bottoms as "
                f"tops ({len(self.inputs)} bottoms, ntop={self.ntop})"
            )
        for reserved in ("bottom", "top", "type"):
            if reserved in self.kwargs:
                raise Error(
                    f"L.{type_name}: '{reserved}' is set by NetSpec (bottoms are the arguments, tops are named "
                    f"by the attributes they are assigned to, the type by L.<Type>)"
                )
        self.tops = tuple(Top(self, i) for i in range(self.ntop))

    @property
    def params(self):
        """The layer's keywords (pycaffe's Function.params), as given."""
        return self.kwargs


class _Layers:
    """crema.layers (L): L.Type(bottoms..., ntop=1, in_place=False, name=None, **fields) -> its top(s)."""

    def __getattr__(self, type_name):
        if type_name.startswith("__"):
            raise AttributeError(type_name)

        def layer(*bottoms, **kwargs):
            function = Function(type_name, bottoms, kwargs)
            if function.ntop == 0:
                return function
            if function.ntop == 1:
                return function.tops[0]
            return function.tops

        layer.__name__ = type_name
        return layer


class _Enums:
    """The enum values of one parameter message, as attributes: P.Pooling.MAX, P.Data.LMDB."""

    def __init__(self, message, fields):
        self._message = message
        numbers_by_name = {}
        for field in fields.values():
            for name, number in field.enum.items():
                numbers_by_name.setdefault(name, set()).add(number)
        for name, values in numbers_by_name.items():
            if len(values) == 1:  # a name two enums give different numbers is ambiguous: left out
                setattr(self, name, values.pop())

    def __repr__(self):
        return f"<crema.params.{self._message[: -len('Parameter')]}>"


class _Params:
    """crema.params (P): P.<Type>.<ENUM VALUE>, the values of the enums of <Type>Parameter."""

    def __getattr__(self, type_name):
        if type_name.startswith("__"):
            raise AttributeError(type_name)
        messages, _ = _schema()
        message = type_name + "Parameter"
        if message not in messages:
            raise AttributeError(f"crema.params has no '{type_name}': the schema has no message {message}")
        return _Enums(message, messages[message])


layers = _Layers()
params = _Params()


# ----------------------------------------------------------------------------------------------------------------
# Text


def _quote(value, raw_utf8):
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    out = []
    for byte in data:
        if byte == 0x22:
            out.append('\\"')
        elif byte == 0x5C:
            out.append("\\\\")
        elif byte == 0x0A:
            out.append("\\n")
        elif byte < 0x20 or byte == 0x7F or (byte >= 0x80 and not raw_utf8):
            out.append(f"\\{byte:03o}")
        else:
            out.append(chr(byte))
    text = "".join(out)
    if raw_utf8:  # the multi-byte characters were copied byte by byte: put them back together
        text = text.encode("latin-1").decode("utf-8")
    return '"' + text + '"'


def _scalar_text(field, value, where):
    """The prototxt form of one value of a non-message field; raises crema.Error naming `where`."""
    kind = field.kind
    if kind == "enum":
        if isinstance(value, str):
            if value not in field.enum:
                raise Error(f"{where}: '{value}' is not a value of {field.type} ({', '.join(field.enum)})")
            return value
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            for name, number in field.enum.items():
                if number == int(value):
                    return name
            raise Error(f"{where}: {int(value)} is not a value of {field.type} ({_enum_list(field)})")
        raise Error(f"{where}: an enum value ({_enum_list(field)}) is a name or its number, not {value!r}")
    if kind == "bool":
        if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
            return "true" if value else "false"
        if isinstance(value, numbers.Integral) and int(value) in (0, 1):
            return "true" if int(value) else "false"
        raise Error(f"{where}: expected true or false, not {value!r}")
    if kind in ("int", "uint"):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise Error(f"{where}: expected an integer, not {value!r}")
        if kind == "uint" and int(value) < 0:
            raise Error(f"{where}: expected an integer >= 0, not {int(value)}")
        return str(int(value))
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise Error(f"{where}: expected a number, not {value!r}")
        if type(value).__name__ == "float32":
            return str(value)  # numpy's shortest form that reads back as the same float32
        number = float(value)
        if math.isnan(number):
            return "nan"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return repr(number)
    if kind == "string":
        if not isinstance(value, str):
            raise Error(f"{where}: expected a string, not {value!r}")
        return _quote(value, raw_utf8=True)
    if kind == "bytes":
        if not isinstance(value, (bytes, bytearray, str)):
            raise Error(f"{where}: expected bytes, not {value!r}")
        return _quote(value, raw_utf8=False)
    raise Error(f"{where}: fields of kind {kind} are not supported")


def _enum_list(field):
    return ", ".join(f"{name} = {number}" for name, number in field.enum.items())


def _field_lines(field, value, indent, where):
    """The lines that set `field` to `value`; a repeated field takes a list (or one value), a message a dict."""
    values = list(value) if field.repeated and isinstance(value, (list, tuple)) else [value]
    if not field.repeated and isinstance(value, (list, tuple)):
        raise Error(f"{where}: '{field.name}' is not repeated; it takes one value, not a list")
    lines = []
    for item in values:
        if field.kind == "message":
            if not isinstance(item, collections.abc.Mapping):
                raise Error(
                    f"{where}: '{field.name}' is a {field.type} message: give it as a dict of its fields "
                    f"(e.g. {field.name}=dict(...)), not {item!r}"
                )
            lines.append(f"{indent}{field.name} {{")
            lines.extend(_message_lines(field.type, item.items(), indent + "  ", f"{where}.{field.name}"))
            lines.append(f"{indent}}}")
        else:
            lines.append(f"{indent}{field.name}: {_scalar_text(field, item, where + '.' + field.name)}")
    return lines


def _message_lines(message, items, indent, where):
    messages, _ = _schema()
    fields = messages[message]
    lines = []
    for name, value in items:
        if name not in fields:
            raise Error(f"{where}: {message} has no field '{name}' (its fields: {', '.join(fields)})")
        lines.extend(_field_lines(fields[name], value, indent, where))
    return lines


class NetProto:
    """What NetSpec.to_proto() returns: str() of it is the net's prototxt. `name` (None: not written) may be set."""

    def __init__(self, layer_blocks, name=None):
        self._layers = layer_blocks  # [(layer name, [lines])]
        self.name = name

    @property
    def layer_names(self):
        return [name for name, _ in self._layers]

    def __str__(self):
        lines = []
        if self.name is not None:
            lines.append("name: " + _quote(str(self.name), raw_utf8=True))
        for _, block in self._layers:
            lines.append("layer {")
            lines.extend(block)
            lines.append("}")
        return "\n".join(lines) + "\n"

    def canonical(self):
        """The text crema's parser makes of this net, printed back in the schema's order (see parse_net_text)."""
        return _crema.parse_net_text(str(self))

    def save(self, path):
        with open(path, "w", encoding="utf-8") as out:
            out.write(str(self))

    def __repr__(self):
        return f"<crema.NetProto of {len(self._layers)} layers>"


def _layer_lines(function, layer_name, bottoms, tops):
    messages, param_fields = _schema()
    layer_fields = messages["LayerParameter"]
    where = f"layer '{layer_name}' (L.{function.type_name})"
    param_field = param_fields.get(function.type_name)
    param_message = layer_fields[param_field].type if param_field else None

    layer_items = collections.OrderedDict()
    loose = collections.OrderedDict()  # keywords of the type's own parameter message
    for key, value in function.kwargs.items():
        if key == "param" or key.endswith("_param"):
            if key not in layer_fields:
                raise Error(f"{where}: LayerParameter has no field '{key}'")
            layer_items[key] = value
        elif param_message and key in messages[param_message]:
            loose[key] = value
        elif key in layer_fields:
            layer_items[key] = value
        else:
            own = "not"
            if param_message:
                own = f"neither a field of {param_message} ({', '.join(messages[param_message])}) nor"
            raise Error(f"{where}: '{key}' is {own} a field of LayerParameter")
    if loose:
        merged = dict(layer_items.get(param_field) or {})
        for key, value in loose.items():
            if key in merged:
                raise Error(f"{where}: '{key}' is given both as a keyword and in {param_field}")
            merged[key] = value
        layer_items[param_field] = merged

    lines = ["  name: " + _quote(layer_name, raw_utf8=True), "  type: " + _quote(function.type_name, raw_utf8=True)]
    lines += ["  bottom: " + _quote(bottom, raw_utf8=True) for bottom in bottoms]
    lines += ["  top: " + _quote(top, raw_utf8=True) for top in tops]
    for key, value in layer_items.items():
        lines.extend(_field_lines(layer_fields[key], value, "  ", where))
    return lines


def _message(net):
    """A NetProto as a caffe_pb2.NetParameter (what pycaffe's to_proto returns), or as it is where Python has no
    protobuf module."""
    try:
        from google.protobuf import text_format

        from .proto import caffe_pb2
    except ImportError:
        return net
    return text_format.Merge(str(net), caffe_pb2.NetParameter())


def to_proto(*outputs):
    """A caffe_pb2.NetParameter of every layer the given tops (or ntop=0 layers) depend on, inputs first (without
    Python's protobuf module: a NetProto, whose str() is the same prototxt)."""
    return _message(_net_proto(*outputs))


def _net_proto(*outputs, names=None):
    """The NetProto of every layer the given tops (or ntop=0 layers) depend on, inputs first."""
    names = dict(names or {})  # Top (or ntop=0 layer) -> the name it was assigned to
    auto_counts = collections.Counter()
    layer_tops = {}  # Function -> the names of its tops as written
    blocks = []

    def top_name(top):
        if top not in names:
            auto_counts[top.function.type_name] += 1
            names[top] = f"{top.function.type_name}{auto_counts[top.function.type_name]}"
        return names[top]

    # Depth first, bottoms before the layer that reads them, iteratively: a deep net must not hit Python's
    # recursion limit.
    roots = [output.function if isinstance(output, Top) else output for output in outputs]
    for root in roots:
        if not isinstance(root, Function):
            raise Error(f"to_proto: expected tops or layers, not {type(root).__name__}")
        stack = [(root, False)]
        while stack:
            function, expanded = stack.pop()
            if function in layer_tops:
                continue
            if not expanded:
                stack.append((function, True))
                for bottom in reversed(function.inputs):
                    if bottom.function not in layer_tops:
                        stack.append((bottom.function, False))
                continue
            bottoms = [layer_tops[bottom.function][bottom.index] for bottom in function.inputs]
            if function.in_place:
                tops = list(bottoms)
                for top in function.tops:
                    top_name(top)  # the attribute name still names the layer
            else:
                tops = [top_name(top) for top in function.tops]
            if function.layer_name is not None:
                name = str(function.layer_name)
            elif function in names:
                name = names[function]
            elif function.tops:
                name = names[function.tops[0]]
            else:
                auto_counts[function.type_name] += 1
                name = f"{function.type_name}{auto_counts[function.type_name]}"
            layer_tops[function] = tops
            blocks.append((name, _layer_lines(function, name, bottoms, tops)))
    return NetProto(blocks)


class NetSpec:
    """A net built by assigning layers' tops to attributes (n.ip1 = L.InnerProduct(n.data, num_output=10)); the
    attribute names the top, and the layer unless name= says otherwise. n["name"] works as n.name does."""

    def __init__(self):
        super().__setattr__("tops", collections.OrderedDict())

    def __setattr__(self, name, value):
        if not isinstance(value, (Top, Function)):
            raise Error(f"NetSpec.{name}: assign a top of a layer (L.Type(...)), not {type(value).__name__}")
        self.tops[name] = value

    def __getattr__(self, name):
        try:
            return self.__dict__["tops"][name]
        except KeyError:
            raise AttributeError(f"this NetSpec has no top '{name}'") from None

    def __setitem__(self, name, value):
        self.__setattr__(name, value)

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __delattr__(self, name):
        del self.tops[name]

    def __contains__(self, name):
        return name in self.tops

    def to_proto(self, name=None):
        """The net as a caffe_pb2.NetParameter (str() of it is the prototxt); `name` sets the net's name."""
        names = {}
        for attribute, value in self.tops.items():
            names.setdefault(value, attribute)  # a top, or a layer without tops (ntop=0)
        net = _net_proto(*self.tops.values(), names=names)
        net.name = name
        return _message(net)
