#!/usr/bin/env python3
"""Writes the PyTorch-made ONNX models the import tests read (OnnxImportTest.PyTorch*): a ResNet-18-shaped net
(BasicBlocks [2, 2, 2, 2], strided 1x1 projections, BatchNorm in eval mode with drawn statistics) and a
GoogLeNet-shaped one (a 7x7 stem, MaxPool with ceil_mode, two inception modules of 1x1, 3x3, 5x5 and pool-projection
towers, the second's pool an average over padding, average pooling, dropout, softmax), each with random weights from a fixed seed, exported by torch.onnx.export at opset
13, without constant folding (the BatchNormalization nodes kept), with an input and PyTorch's output for it (float32 files: NAME.input.bin, NAME.output.bin, shapes in
NAME.shapes.txt). Run once with python3-torch; the tests need only the files.

    /usr/bin/python3 tests/data/onnx/make_pytorch_models.py
"""

import os
import sys

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "onnx"))
from make_resnet import Block  # noqa: E402  (the example's BasicBlock: the same module in both)


class ResNet18Shaped(nn.Module):
    def __init__(self, widths=(8, 16, 32, 32), classes=10, channels=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
            cin = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class Inception(nn.Module):
    def __init__(self, cin, c1, c3r, c3, c5r, c5, proj, average=False):
        super().__init__()
        relu = nn.ReLU
        self.b1 = nn.Sequential(nn.Conv2d(cin, c1, 1), relu())
        self.b2 = nn.Sequential(nn.Conv2d(cin, c3r, 1), relu(), nn.Conv2d(c3r, c3, 3, padding=1), relu())
        self.b3 = nn.Sequential(nn.Conv2d(cin, c5r, 1), relu(), nn.Conv2d(c5r, c5, 5, padding=2), relu())
        pool = nn.AvgPool2d(3, 1, 1) if average else nn.MaxPool2d(3, 1, 1)  # the average counts its padding
        self.b4 = nn.Sequential(pool, nn.Conv2d(cin, proj, 1), relu())

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class GoogLeNetShaped(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
                                  nn.Conv2d(16, 24, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True))
        self.a = Inception(24, 8, 8, 12, 4, 6, 6)
        self.b = Inception(32, 12, 10, 16, 4, 8, 8, average=True)
        self.pool = nn.AvgPool2d(8)
        self.drop = nn.Dropout(0.4)
        self.fc = nn.Linear(44, classes)

    def forward(self, x):
        x = self.pool(self.b(self.a(self.stem(x))))
        return torch.softmax(self.fc(self.drop(torch.flatten(x, 1))), 1)


def randomize(model, generator):
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            c = module.num_features
            module.running_mean.copy_(torch.randn(c, generator=generator) * 0.3)
            module.running_var.copy_(torch.rand(c, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(c, generator=generator) + 0.5)
            module.bias.data.copy_(torch.randn(c, generator=generator) * 0.2)


def write(name, model, shape, seed):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = model.eval()
    with torch.no_grad():
        randomize(model, generator)
        x = torch.randn(*shape, generator=generator)
        y = model(x)
    torch.onnx.export(model, (x,), os.path.join(HERE, name + ".onnx"), opset_version=13, input_names=["data"],
                      output_names=["output"], do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    x.numpy().astype(np.float32).tofile(os.path.join(HERE, name + ".input.bin"))
    y.numpy().astype(np.float32).tofile(os.path.join(HERE, name + ".output.bin"))
    with open(os.path.join(HERE, name + ".shapes.txt"), "w") as f:
        f.write(" ".join(map(str, x.shape)) + "\n" + " ".join(map(str, y.shape)) + "\n")
    print(name, tuple(x.shape), "->", tuple(y.shape), os.path.getsize(os.path.join(HERE, name + ".onnx")), "bytes")


if __name__ == "__main__":
    write("resnet18_shaped", ResNet18Shaped(), (2, 3, 32, 32), 1)
    write("googlenet_shaped", GoogLeNetShaped(), (2, 3, 64, 64), 2)
