#!/usr/bin/env python3
"""Net surgery: turns the Fashion-MNIST LeNet into a fully convolutional net by recasting its InnerProduct layers
as convolutions, so that it classifies every 28x28 window of a larger image in one pass.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/net_surgery.py \
        --weights examples/fashion_mnist/lenet_iter_10000.caffemodel --out /tmp/surgery

Without --weights it first trains LeNet briefly from Python (--iterations). Writes into --out the converted
lenet_fcn_deploy.prototxt and lenet_fcn.caffemodel, and results.json. See examples/python/README.md.
"""

import argparse
import json
import pathlib
import re
import sys

import numpy as np

import crema
import fashion_mnist_data as fm


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", help="LeNet's trained .caffemodel (default: train one here first)")
    parser.add_argument("--deploy", default=str(fm.DEPLOY), help="the deploy prototxt the weights are for")
    parser.add_argument("--out", default="python_surgery", help="folder for the converted net and results")
    parser.add_argument("--iterations", type=int, default=500, help="training iterations when no --weights")
    parser.add_argument("--train-images", type=int, default=None, help="train on the first N images only")
    parser.add_argument("--tiles", default=None,
                        help="four test image indices for the 2x2 mosaic (default: the first Ankle boot, Trouser, "
                        "Bag and Dress)")
    return parser.parse_args(argv)


def layer_blocks(text):
    """The prototxt split into pieces: ('layer', block text) for each top-level layer { ... }, ('other', text)
    for everything between them. Braces inside comments and strings do not count."""
    pieces, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        if char == "#":
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        if char in "\"'":
            i = text.index(char, i + 1) + 1
            continue
        if char == "{":
            if depth == 0:
                opening = re.search(r"layer\s*$", text[start:i])
                if opening:
                    pieces.append(("other", text[start:start + opening.start()]))
                    start += opening.start()
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0 and text[start:].startswith("layer"):
                pieces.append(("layer", text[start:i + 1]))
                start = i + 1
        i += 1
    pieces.append(("other", text[start:]))
    return pieces


def top_level_fields(block):
    """{key: [values]} of a layer block's own fields (those of its nested messages left out)."""
    inner = block[block.index("{") + 1:block.rindex("}")]
    inner = re.sub(r"#[^\n]*", "", inner)
    while True:  # drop nested { ... }, innermost first
        flattened = re.sub(r"\w+\s*:?\s*\{[^{}]*\}", " ", inner)
        if flattened == inner:
            break
        inner = flattened
    fields = {}
    for key, value in re.findall(r"(\w+)\s*:\s*(\"[^\"]*\"|'[^']*'|\S+)", inner):
        fields.setdefault(key, []).append(value.strip("\"'"))
    return fields


def convolutional_prototxt(deploy_text, net, input_shape):
    """The deploy text with every InnerProduct layer made a Convolution named '<name>-conv' (new names, so that
    copying the trained weights by name leaves them for the surgery), and the Input shaped `input_shape`.

    The first InnerProduct sees a C x H x W blob and becomes an H x W convolution; the ones after it see 1 x 1
    positions and become 1 x 1 convolutions. Tops keep their names, so the layers after them are unchanged."""
    pieces, renamed, scores = [], {}, None
    for kind, text in layer_blocks(deploy_text):
        fields = top_level_fields(text) if kind == "layer" else {}
        layer_type = fields.get("type", [""])[0]
        if layer_type == "InnerProduct":
            name, bottom, top = fields["name"][0], fields["bottom"][0], fields["top"][0]
            num_output = net.params[name][0].shape[0]
            bottom_shape = net.blobs[bottom].shape
            kernel_h, kernel_w = bottom_shape[2:] if len(bottom_shape) == 4 else (1, 1)
            renamed[name], scores = name + "-conv", top
            text = (f'layer {{\n  name: "{name}-conv"\n  type: "Convolution"\n  bottom: "{bottom}"\n'
                    f'  top: "{top}"\n  convolution_param {{ num_output: {num_output} '
                    f"kernel_h: {kernel_h} kernel_w: {kernel_w} }}\n}}")
        elif layer_type == "Input":
            dims = " ".join(f"dim: {d}" for d in input_shape)
            text = re.sub(r"shape\s*:?\s*\{[^{}]*\}", f"shape {{ {dims} }}", text, count=1)
        if kind == "other":  # the original's comments describe the original
            text = re.sub(r"(?m)^\s*#[^\n]*\n", "", text)
        pieces.append(text)
    header = ("# Written by examples/python/net_surgery.py: LeNet with its InnerProduct layers recast as "
              "convolutions\n# (" + ", ".join(f"{old} -> {new}" for old, new in renamed.items()) + ").\n")
    return header + "".join(pieces), renamed, scores


def transplant(net, fcn, renamed):
    """Copies each InnerProduct's weights into its convolution through numpy views: the same numbers, as
    InnerProduct flattens its bottom in C x H x W order, which is a convolution kernel's order."""
    for old, new in renamed.items():
        weights, bias = net.params[old]
        conv_weights, conv_bias = fcn.params[new]
        conv_weights.data[...] = weights.data.reshape(conv_weights.shape)
        conv_bias.data[...] = bias.data


def default_tiles(labels):
    return [int(np.flatnonzero(labels == k)[0]) for k in (9, 1, 8, 3)]


def mosaic(images):
    """Four 28x28 images as one 56x56 image: top left, top right, bottom left, bottom right."""
    return np.block([[images[0], images[1]], [images[2], images[3]]])


def main(argv=None):
    args = parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    fm.check_dataset()
    if args.weights:
        weights = pathlib.Path(args.weights)
    else:
        print(f"no --weights: training LeNet for {args.iterations} iterations first")
        weights = fm.train_lenet(out, args.iterations, args.train_images, 500 if args.train_images else None)

    images, labels = fm.load("test", 2000)
    net = crema.Net(args.deploy, crema.TEST, weights=str(weights))
    net.forward(data=fm.as_input(images[:1]))  # shapes every blob for one 28x28 image

    size = 2 * images.shape[1]
    text, renamed, scores = convolutional_prototxt(pathlib.Path(args.deploy).read_text(), net, (1, 1, size, size))
    fcn_prototxt = out / "lenet_fcn_deploy.prototxt"
    fcn_prototxt.write_text(text)
    fcn = crema.Net(str(fcn_prototxt), crema.TEST, weights=str(weights))  # the convolutions' weights by name
    transplant(net, fcn, renamed)
    fcn_weights = out / "lenet_fcn.caffemodel"
    fcn.save(str(fcn_weights))
    print(f"wrote {fcn_prototxt} and {fcn_weights}; converted {', '.join(renamed)}")

    # On 28x28 inputs the converted net computes the same numbers, as 1x1 score maps.
    batch = fm.as_input(images[:100])
    net.forward(data=batch)
    fcn.forward(data=batch)
    same_28 = 0.0
    for name in (scores, "prob"):  # the last InnerProduct's scores, and the softmax of them
        assert fcn.blobs[name].shape == net.blobs[name].shape + (1, 1), fcn.blobs[name].shape
        original = net.blobs[name].data
        # Relative to the scores' size: the two layers sum the same products in different orders.
        scale = max(1.0, float(np.abs(original).max()))
        same_28 = max(same_28, float(np.abs(fcn.blobs[name].data[:, :, 0, 0] - original).max()) / scale)
    print(f"28x28, {len(batch)} images: largest (relative) difference of the scores and probabilities {same_28:.2e}")

    # On a 2x2 mosaic it slides the classifier with LeNet's stride (2 * 2 pooling = 4): the map's corners are
    # the windows that are exactly the tiles.
    tiles = [int(t) for t in args.tiles.split(",")] if args.tiles else default_tiles(labels)
    tile_probabilities = net.forward(data=fm.as_input(images[tiles]))["prob"].copy()
    score_map = fcn.forward(data=fm.as_input(mosaic(images[tiles])[None]))["prob"][0].copy()
    last_row, last_column = score_map.shape[1] - 1, score_map.shape[2] - 1
    corners = [score_map[:, 0, 0], score_map[:, 0, last_column], score_map[:, last_row, 0],
               score_map[:, last_row, last_column]]
    corner_difference = float(max(np.abs(c - p).max() for c, p in zip(corners, tile_probabilities)))
    print(f"56x56 mosaic of test images {tiles} (labels {[fm.CLASS_NAMES[labels[t]] for t in tiles]}):")
    print(f"score map {score_map.shape[1]}x{score_map.shape[2]}, classes (argmax) per position:")
    for row in score_map.argmax(axis=0):
        print("  " + " ".join(f"{k}" for k in row))
    print("  (" + ", ".join(f"{k} {name}" for k, name in enumerate(fm.CLASS_NAMES)) + ")")
    for where, corner, tile in zip(("top left", "top right", "bottom left", "bottom right"), corners,
                                   tile_probabilities):
        print(f"  {where:<12} corner: {fm.CLASS_NAMES[corner.argmax()]:<12} {corner.max():.3f}; "
              f"tile alone: {fm.CLASS_NAMES[tile.argmax()]:<12} {tile.max():.3f}")
    print(f"largest difference between the corners and the tiles classified alone: {corner_difference:.2e}")

    results = {"weights": str(weights), "fcn_prototxt": str(fcn_prototxt), "fcn_weights": str(fcn_weights),
               "converted": renamed, "max_difference_28": same_28, "tiles": tiles,
               "tile_labels": [int(labels[t]) for t in tiles],
               "tile_classes": tile_probabilities.argmax(axis=1).tolist(),
               "corner_classes": [int(c.argmax()) for c in corners], "max_difference_corners": corner_difference,
               "score_map_shape": list(score_map.shape)}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
