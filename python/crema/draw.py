"""Nets drawn as graphs (pycaffe's caffe.draw): layers as boxes, blobs as octagons, an arrow from each blob to the
layers that read it and from each layer to the blobs it writes. Needs pydot (Debian: python3-pydot) and Graphviz's
`dot` (graphviz) to render.

    from google.protobuf import text_format
    from crema.proto import caffe_pb2
    net = text_format.Merge(open("lenet.prototxt").read(), caffe_pb2.NetParameter())
    crema.draw.draw_net_to_file(net, "lenet.png", rankdir="LR", phase=crema.TRAIN)
"""

from ._crema import Error

__all__ = ["draw_net", "draw_net_to_file", "get_pydot_graph", "get_layer_label", "get_edge_label",
           "choose_color_by_layertype"]

# Fill colours of layer boxes by type (others: the default).
_COLORS = {"Convolution": "#FF5050", "Deconvolution": "#FF5050", "Pooling": "#FF9900", "InnerProduct": "#CC33FF"}
_DEFAULT_COLOR = "#6495ED"
_IN_PLACE_COLOR = "#90EE90"
_BLOB_COLOR = "#E0E0E0"


def _pydot():
    try:
        import pydot
    except ImportError as error:
        raise ImportError("crema.draw needs pydot: install python3-pydot (Debian)") from error
    return pydot


def choose_color_by_layertype(layertype):
    """The fill colour of a layer box of this type."""
    return _COLORS.get(layertype, _DEFAULT_COLOR)


def _quoted(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n") + '"'


def _first(values, default):
    values = list(values)
    return values[0] if values else default


def get_layer_label(layer, rankdir, display_lrm=False):
    """The text of a layer's box: name and (type), and for convolutions and poolings their kernel size, stride and
    pad; with display_lrm, the learning-rate multipliers of its parameters. Lines are stacked where the graph runs
    left to right (rankdir LR or RL), side by side where it runs top to bottom."""
    separator = " " if rankdir in ("TB", "BT") else "\\n"
    parts = [layer.name, f"({layer.type})"]
    if layer.type in ("Convolution", "Deconvolution"):
        conv = layer.convolution_param
        parts += [f"kernel size: {_first(conv.kernel_size, conv.kernel_h or 1)}",
                  f"stride: {_first(conv.stride, conv.stride_h or 1)}",
                  f"pad: {_first(conv.pad, conv.pad_h)}"]
    elif layer.type == "Pooling":
        pool = layer.pooling_param
        pool_name = pool.DESCRIPTOR.fields_by_name["pool"].enum_type.values_by_number[pool.pool].name
        parts += [f"pool: {pool_name}", f"kernel size: {pool.kernel_size or pool.kernel_h}",
                  f"stride: {pool.stride or pool.stride_h}", f"pad: {pool.pad or pool.pad_h}"]
    if display_lrm and len(layer.param):
        parts.append("lr mult: " + ", ".join(f"{p.lr_mult:g}" for p in layer.param))
    return separator.join(parts)


def get_edge_label(layer):
    """The label of the arrows out of a layer: the batch size of a Data layer, the outputs of a convolution or an
    InnerProduct, else none."""
    if layer.type == "Data":
        return f"Batch {layer.data_param.batch_size}"
    if layer.type in ("Convolution", "Deconvolution"):
        return str(layer.convolution_param.num_output)
    if layer.type == "InnerProduct":
        return str(layer.inner_product_param.num_output)
    return ""


def _included(layer, phase):
    """Whether the layer is in the net of `phase` (None: every layer), by its include and exclude rules' phases."""
    if phase is None:
        return True
    if len(layer.include) and len(layer.exclude):
        raise Error(f"layer '{layer.name}' has both include and exclude rules")
    if len(layer.include):
        return any(rule.HasField("phase") and rule.phase == phase for rule in layer.include) or any(
            not rule.HasField("phase") for rule in layer.include)
    return not any(rule.HasField("phase") and rule.phase == phase for rule in layer.exclude)


def get_pydot_graph(caffe_net, rankdir, label_edges=True, phase=None, display_lrm=False):
    """A pydot.Dot of a caffe_pb2.NetParameter: a node per layer (named `<layer>_<type>`) and per blob (named
    `<blob>_blob`), an edge per bottom and per top. phase (crema.TRAIN or crema.TEST) keeps the layers of that
    phase only; label_edges writes get_edge_label on the edges out of layers. An in-place layer (its one top is
    its one bottom) is drawn as a rounded box."""
    pydot = _pydot()
    graph = pydot.Dot(caffe_net.name or "Net", graph_type="digraph", rankdir=rankdir, compound="true")
    nodes = {}
    edges = []

    def node(name, **style):
        if name not in nodes:
            nodes[name] = pydot.Node(_quoted(name), **style)
        return name

    for layer in caffe_net.layer:
        if not _included(layer, phase):
            continue
        label = _quoted(get_layer_label(layer, rankdir, display_lrm))
        layer_node = f"{layer.name}_{layer.type}"
        in_place = len(layer.bottom) == 1 and len(layer.top) == 1 and layer.bottom[0] == layer.top[0]
        if in_place:
            node(layer_node, label=label, shape="record", style='"rounded,filled"', fillcolor=_IN_PLACE_COLOR)
        else:
            node(layer_node, label=label, shape="record", style="filled",
                 fillcolor=choose_color_by_layertype(layer.type))
        for bottom in layer.bottom:
            edges.append((node(bottom + "_blob", label=_quoted(bottom), shape="octagon", style="filled",
                               fillcolor=_BLOB_COLOR), layer_node, ""))
        edge_label = get_edge_label(layer) if label_edges else ""
        for top in layer.top:
            edges.append((layer_node, node(top + "_blob", label=_quoted(top), shape="octagon", style="filled",
                                           fillcolor=_BLOB_COLOR), edge_label))
    for pydot_node in nodes.values():
        graph.add_node(pydot_node)
    for source, target, edge_label in edges:
        graph.add_edge(pydot.Edge(nodes[source], nodes[target], label=_quoted(edge_label)))
    return graph


def draw_net(caffe_net, rankdir, ext="png", phase=None, display_lrm=False):
    """The drawing of a caffe_pb2.NetParameter, rendered by Graphviz in format `ext` (png, svg, pdf, dot, ...):
    bytes."""
    return get_pydot_graph(caffe_net, rankdir, phase=phase, display_lrm=display_lrm).create(format=ext)


def draw_net_to_file(caffe_net, filename, rankdir="LR", phase=None, display_lrm=False):
    """Writes draw_net's drawing to `filename`, in the format its extension names."""
    ext = filename[filename.rfind(".") + 1:]
    with open(filename, "wb") as out:
        out.write(draw_net(caffe_net, rankdir, ext, phase, display_lrm))
