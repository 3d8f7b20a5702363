#!/usr/bin/env python3
"""Writes the deploy prototxt of a bottleneck ResNet (He et al., "Deep Residual Learning for Image Recognition",
2015) in the form of the authors' released Caffe models: convolutions without bias, each followed by BatchNorm and
Scale (with bias), ReLU in place, projection shortcuts (1x1 convolution) at the first block of every stage, the
stride on the first 1x1 convolution of a stage's first block, and the layer names of those models (res2a_branch2a,
bn2a_branch2a, scale2a_branch2a, ...), so that their .caffemodel files load by name.

BatchNorm's use_global_stats is left to its default, which follows the phase: batch statistics in TRAIN (as
`crema time` runs a net), the stored ones in TEST (inference, `crema test`).

  examples/imagenet/make_resnet_deploy.py [--depth 50|101|152] [--batch 1] > resnet50_deploy.prototxt
"""

import argparse

STAGES = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def conv(lines, name, bottom, top, outputs, kernel, stride=1, pad=0):
    lines.append('layer {\n  name: "%s"\n  type: "Convolution"\n  bottom: "%s"\n  top: "%s"\n'
                 '  convolution_param {\n    num_output: %d\n    kernel_size: %d\n    pad: %d\n    stride: %d\n'
                 '    bias_term: false\n  }\n}' % (name, bottom, top, outputs, kernel, pad, stride))


def norm(lines, suffix, blob):
    """BatchNorm and Scale in place on `blob`, named bn<suffix> and scale<suffix>."""
    lines.append('layer {\n  name: "bn%s"\n  type: "BatchNorm"\n  bottom: "%s"\n  top: "%s"\n}' % (suffix, blob, blob))
    lines.append('layer {\n  name: "scale%s"\n  type: "Scale"\n  bottom: "%s"\n  top: "%s"\n'
                 '  scale_param {\n    bias_term: true\n  }\n}' % (suffix, blob, blob))


def relu(lines, name, blob):
    lines.append('layer {\n  name: "%s"\n  type: "ReLU"\n  bottom: "%s"\n  top: "%s"\n}' % (name, blob, blob))


def resnet(depth, batch):
    lines = ['name: "ResNet-%d"' % depth,
             'layer {\n  name: "data"\n  type: "Input"\n  top: "data"\n'
             '  input_param {\n    shape {\n      dim: %d\n      dim: 3\n      dim: 224\n      dim: 224\n    }\n  }\n}'
             % batch]
    conv(lines, "conv1", "data", "conv1", 64, 7, 2, 3)
    norm(lines, "_conv1", "conv1")
    relu(lines, "conv1_relu", "conv1")
    lines.append('layer {\n  name: "pool1"\n  type: "Pooling"\n  bottom: "conv1"\n  top: "pool1"\n'
                 '  pooling_param {\n    pool: MAX\n    kernel_size: 3\n    stride: 2\n  }\n}')
    bottom, width = "pool1", 64
    for stage, blocks in enumerate(STAGES[depth]):
        for block in range(blocks):
            # Blocks are lettered a, b, c... in ResNet-50; the deeper nets' long stages use a, b1, b2, ...
            letter = "abcdefghijklmnopqrstuvwxyz"[block] if blocks <= 6 else ("a" if block == 0 else "b%d" % block)
            unit = "%d%s" % (stage + 2, letter)
            stride = 2 if block == 0 and stage > 0 else 1
            shortcut = bottom
            if block == 0:
                shortcut = "res%s_branch1" % unit
                conv(lines, shortcut, bottom, shortcut, width * 4, 1, stride)
                norm(lines, unit + "_branch1", shortcut)
            blob = bottom
            for part, (outputs, kernel, part_stride, pad) in zip(
                    "abc", ((width, 1, stride, 0), (width, 3, 1, 1), (width * 4, 1, 1, 0))):
                name = "res%s_branch2%s" % (unit, part)
                conv(lines, name, blob, name, outputs, kernel, part_stride, pad)
                norm(lines, "%s_branch2%s" % (unit, part), name)
                if part != "c":
                    relu(lines, name + "_relu", name)
                blob = name
            lines.append('layer {\n  name: "res%s"\n  type: "Eltwise"\n  bottom: "%s"\n  bottom: "%s"\n'
                         '  top: "res%s"\n  eltwise_param {\n    operation: SUM\n  }\n}' % (unit, shortcut, blob, unit))
            relu(lines, "res%s_relu" % unit, "res" + unit)
            bottom = "res" + unit
        width *= 2
    lines.append('layer {\n  name: "pool5"\n  type: "Pooling"\n  bottom: "%s"\n  top: "pool5"\n'
                 '  pooling_param {\n    pool: AVE\n    kernel_size: 7\n    stride: 1\n  }\n}' % bottom)
    lines.append('layer {\n  name: "fc1000"\n  type: "InnerProduct"\n  bottom: "pool5"\n  top: "fc1000"\n'
                 '  inner_product_param {\n    num_output: 1000\n  }\n}')
    lines.append('layer {\n  name: "prob"\n  type: "Softmax"\n  bottom: "fc1000"\n  top: "prob"\n}')
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, choices=sorted(STAGES), default=50)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    print("# ResNet-%d deploy net, written by examples/imagenet/make_resnet_deploy.py --depth %d"
          % (args.depth, args.depth))
    print(resnet(args.depth, args.batch), end="")


if __name__ == "__main__":
    main()
