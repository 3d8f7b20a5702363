#!/usr/bin/env python3
"""Every example deploy net exported by crema (Net.to_onnx, as `crema export` writes it) and run by ONNX Runtime
(npm's onnxruntime-node, CPU): its outputs against crema's, within 1e-4 of their largest magnitude. The C++ suite checks the same files under OpenCV's ONNX importer
(OnnxExportTest.*); this script is the ONNX Runtime half.

Each net gets random parameters (He-scaled weights, small biases, BatchNorm statistics and moving-average factors
drawn), an input at the scale of its real ones, and its classifier's scores spread so the probabilities are neither
one-hot nor uniform. Nets with BatchNorm are exported folded (their inference form) and unfolded.

  npm install --ignore-scripts            (in benchmarks/, once: onnxruntime-node)
  PYTHONPATH=build/python python3 benchmarks/onnx_export_check.py [--nets lenet,caffenet] [--batch 2]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "build", "python"))

import crema  # noqa: E402

NETS = {
    "lenet": ("examples/fashion_mnist/lenet_deploy.prototxt", 0.0, 1.0),
    "cifar10_quick": ("examples/cifar10/cifar10_quick_deploy.prototxt", 0.0, 1.0),
    "caffenet": ("examples/imagenet/caffenet_deploy.prototxt", -128.0, 128.0),
    "alexnet": ("examples/imagenet/alexnet_deploy.prototxt", -128.0, 128.0),
    "googlenet": ("examples/imagenet/googlenet_deploy.prototxt", -128.0, 128.0),
    "resnet50": ("examples/imagenet/resnet50_deploy.prototxt", -1.0, 1.0),
    "caffenet_full_conv": ("examples/imagenet/caffenet_full_conv_deploy.prototxt", -128.0, 128.0),
    "rcnn_ilsvrc13": ("examples/rcnn/rcnn_ilsvrc13_deploy.prototxt", -128.0, 128.0),
    # Exp, Log, Swish, Crop, Slice, Tile, Reductions, Scale of two bottoms, ArgMax, Threshold.
    "more_layers": ("tests/data/onnx/more_layers.prototxt", -1.0, 1.0),
}


def fill(net, scale, rng):
    """Random parameters, by layer type, as the C++ interop test draws them."""
    for name, params in net.params.items():
        kind = net.layer_dict[name].type
        if kind in ("Convolution", "Deconvolution", "InnerProduct"):
            w = params[0].data
            fan_in = np.prod(w.shape[1:])
            w[...] = rng.normal(0, np.sqrt(2.0 / fan_in), w.shape)
            if len(params) > 1:
                params[1].data[...] = rng.normal(0, 0.2 * scale, params[1].data.shape)
        elif kind == "BatchNorm":
            factor = rng.uniform(0.5, 4)
            params[2].data[...] = factor
            params[0].data[...] = rng.normal(0, 0.5 * scale * factor, params[0].data.shape)
            params[1].data[...] = rng.uniform(0.5 * scale * scale * factor, 2 * scale * scale * factor,
                                              params[1].data.shape)
        elif kind == "Scale":
            params[0].data[...] = rng.uniform(0.5, 1.5, params[0].data.shape)
            if len(params) > 1:
                params[1].data[...] = rng.normal(0, 0.2, params[1].data.shape)
        else:
            for blob in params:
                blob.data[...] = rng.normal(0, 0.1, blob.data.shape)


def spread_scores(net, image):
    """Scales the last layer with parameters so the scores before the softmax spread with a standard deviation of 3."""
    last = list(net.params)[-1]
    if not any(net.layer_dict[n].type == "Softmax" for n in net.layer_dict):
        return
    top = net.top_names[last][0]
    net.forward(data=image, end=last)
    spread = float(np.std(net.blobs[top].data))
    for blob in net.params[last]:
        blob.data[...] *= 3.0 / spread


def run_ort(model, image, workdir):
    path = os.path.join(workdir, "input.bin")
    image.astype(np.float32).tofile(path)
    prefix = os.path.join(workdir, "output")
    out = subprocess.run(["node", os.path.join(HERE, "ort_outputs.js"), model, "data",
                          "x".join(str(d) for d in image.shape), path, prefix],
                         capture_output=True, text=True, check=True)
    shapes = json.loads(out.stdout)
    return {s["name"]: np.fromfile(prefix + ".%d.bin" % n, dtype=np.float32).reshape(s["dims"])
            for n, s in enumerate(shapes)}


def check(name, batch, fold, rng, workdir):
    path, low, high = NETS[name]
    crema.set_fold(fold)
    try:
        net = crema.Net(os.path.join(ROOT, path), crema.TEST)
        shape = list(net.blobs["data"].data.shape)
        shape[0] = batch
        net.blobs["data"].reshape(*shape)
        net.reshape()
        fill(net, max(abs(low), abs(high)), rng)
        image = rng.uniform(low, high, shape).astype(np.float32)
        spread_scores(net, image)
        if fold:
            # A net made with its weights runs folded (its inference form).
            weights = os.path.join(workdir, name + ".caffemodel")
            net.save(weights)
            net = crema.Net(os.path.join(ROOT, path), crema.TEST, weights=weights)
            net.blobs["data"].reshape(*shape)
            net.reshape()
        expected = {k: v.copy() for k, v in net.forward(data=image).items()}
        model = os.path.join(workdir, "%s%s.onnx" % (name, "_folded" if fold else ""))
        net.to_onnx(model)
        folded = bool(net.rewrites)
    finally:
        crema.set_fold(True)
    actual = run_ort(model, image, workdir)
    worst = 0.0
    for key, value in expected.items():
        got = actual[key]
        assert got.shape == value.shape, (name, key, got.shape, value.shape)
        largest = float(np.max(np.abs(value)))
        worst = max(worst, float(np.max(np.abs(got - value))) / largest)
    return folded, worst


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        sys.exit("onnx_export_check.py: run `npm install --ignore-scripts` in benchmarks/ first (onnxruntime-node)")
    version = json.load(open(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")))["version"]
    print("ONNX Runtime %s (onnxruntime-node, CPU); batch %d; tolerance 1e-4 of each output's largest magnitude"
          % (version, args.batch))
    print()
    print("| net | exported | worst difference / largest | within 1e-4 |")
    print("|---|---|---|---|")
    failures = 0
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.nets.split(","):
            for fold in (False, True):
                folded, worst = check(name, args.batch, fold, rng, workdir)
                if fold and not folded:
                    continue  # nothing folds: the same file as unfolded
                ok = worst <= 1e-4
                failures += not ok
                print("| %s | %s | %.2e | %s |" % (name, "folded" if folded else "as written", worst,
                                                   "yes" if ok else "NO"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
