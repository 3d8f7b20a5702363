#!/usr/bin/env python3
"""The model "trained elsewhere" of this example: a small ResNet for 28x28 grey images made in PyTorch (a 3x3 stem,
three stages of one BasicBlock each at 8, 16 and 32 channels, strided 1x1 projections, BatchNorm, global average
pooling, a 10-way Linear), at PyTorch's own initialisation with a fixed seed, exported by torch.onnx.export at opset
13 with its BatchNormalization nodes kept (training=PRESERVE, no constant folding), so that crema trains them.
resnet_fashion.onnx in this folder was written by it; run it again with python3-torch installed to remake it.

    /usr/bin/python3 examples/onnx/make_resnet.py
"""

import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.project = None
        if stride != 1 or cin != cout:
            self.project = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.project is None else self.project(x)))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.stages = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2), Block(16, 32, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


if __name__ == "__main__":
    torch.manual_seed(1701)
    model = SmallResNet().eval()
    path = os.path.join(HERE, "resnet_fashion.onnx")
    torch.onnx.export(model, (torch.zeros(1, 1, 28, 28),), path, opset_version=13, input_names=["data"],
                      output_names=["scores"], do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    print("wrote", path, os.path.getsize(path), "bytes")
