#!/usr/bin/env python3
"""crema's layers over random settings against float64 references (docs/reliability.md, "Layers against references
over random settings").

Each case draws a layer's settings and a bottom at random from its seed, runs it forward and backward through the
crema module, and compares the output and the gradients with PyTorch's float64 operators over the operands rounded as
the precision rounds them, within a bound of the type's rounding times the products' magnitudes (the same operator
over the operands' absolute values). Run with the module built (make) and Debian's python3-torch:

    PYTHONPATH=build/python /usr/bin/python3 scripts/layers_vs_references.py --kind conv --precision bf16 --seeds 600
    ONEDNN_MAX_CPU_ISA=AVX2 PYTHONPATH=build/python /usr/bin/python3 scripts/layers_vs_references.py --kind all

Kinds: conv (Convolution and Deconvolution alone, any engine the registry picks), pool (Pooling after a 1x1 identity
convolution, so that it runs in oneDNN's layouts), lrn (LRN across channels likewise). Prints each case that differs
and exits 1 where any did.
"""

import argparse
import math
import os
import random
import sys
import tempfile

import numpy as np
import torch

import crema

F = torch.nn.functional


def bf16(values):
    """float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def make_net(text, phase=crema.TRAIN):
    with tempfile.NamedTemporaryFile("w", suffix=".prototxt", delete=False) as f:
        f.write(text)
    try:
        return crema.Net(f.name, phase)
    finally:
        os.unlink(f.name)


def report(problems, seed, what):
    if problems:
        print(f"seed {seed}: {what}: " + "; ".join(problems), flush=True)
    return bool(problems)


def within(name, got, want, magnitude, tolerance, problems):
    """Whether |got - want| <= tolerance * magnitude + 1e-6 everywhere; else a line in `problems`."""
    if got.shape != want.shape:
        problems.append(f"{name}: shape {got.shape} against {want.shape}")
        return
    limit = tolerance * magnitude + 1e-6
    over = np.abs(got - want) > limit
    if over.any():
        i = np.unravel_index(np.argmax(np.abs(got - want) - limit), got.shape)
        problems.append(f"{name}: {over.sum()} of {got.size} off, worst {got[i]:.6g} against {want[i]:.6g}")


def conv_case(seed, precision):
    r = random.Random(seed)
    deconv = r.random() < 0.35
    g = r.choice([1, 1, 1, 2, 3])
    C, O = g * r.choice([1, 2, 3, 5, 8, 16, 17, 21, 32]), g * r.choice([1, 2, 3, 5, 8, 16, 21, 33])
    kh = r.choice([1, 1, 2, 3, 5])
    kw = r.choice([kh, kh, 1, 3])
    sh = r.choice([1, 1, 2, 3])
    s = (sh, r.choice([sh, 1, 2]))
    ph = r.choice([0, 0, 1, 2])
    p = (ph, r.choice([ph, 0, 1]))
    d = r.choice([1, 1, 1, 2])
    N, H = r.choice([1, 2, 3]), r.choice([1, 2, 5, 6, 7, 9, 14, 30])
    W = r.choice([H, 1, 3, 6, 8, 11])
    bias = r.random() < 0.6
    kind = "Deconvolution" if deconv else "Convolution"
    what = f"{kind} N{N} C{C} H{H} W{W} O{O} kernel {kh}x{kw} stride {s} pad {p} dilation {d} group {g}"
    try:
        net = make_net(
            f'force_backward: true\nlayer {{ name: "data" type: "Input" top: "data" '
            f"input_param {{ shape {{ dim: {N} dim: {C} dim: {H} dim: {W} }} }} }}\n"
            f'layer {{ name: "c" type: "{kind}" bottom: "data" top: "y" convolution_param {{ num_output: {O} '
            f"kernel_h: {kh} kernel_w: {kw} stride_h: {s[0]} stride_w: {s[1]} pad_h: {p[0]} pad_w: {p[1]} "
            f'dilation: {d} group: {g} bias_term: {"true" if bias else "false"} '
            f'weight_filler {{ type: "gaussian" std: 1 }} bias_filler {{ type: "gaussian" std: 1 }} }} }}\n'
        )
    except crema.Error:
        return None  # settings crema refuses (an empty output, ...)
    if net.blobs["y"].data.size == 0:
        return None
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(net.blobs["data"].data.shape).astype(np.float32)
    net.blobs["data"].data[...] = x
    net.forward()
    y = net.blobs["y"].data.copy()
    dy = rng.standard_normal(y.shape).astype(np.float32)
    net.blobs["y"].diff[...] = dy
    for blob in net.params["c"]:
        blob.diff[...] = 0
    net.backward()
    rounded = bf16 if precision == "bf16" else (lambda v: v)
    b = net.params["c"][1].data.astype(np.float64) if bias else None

    def run(xv, wv, bv, dyv):
        tx, tw = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
        tb = torch.tensor(bv) if bv is not None else None
        if deconv:
            ty = F.conv_transpose2d(tx, tw, tb, s, p, 0, g, d)
        else:
            ty = F.conv2d(tx, tw, tb, s, p, d, g)
        ty.backward(torch.tensor(dyv))
        return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()

    X, Wt, DY = (rounded(v).astype(np.float64) for v in (x, net.params["c"][0].data, dy))
    try:
        want = run(X, Wt, b, DY)
    except RuntimeError:
        return None  # a kernel past the padded input, which Caffe allows and PyTorch does not
    magnitude = run(np.abs(X), np.abs(Wt), None if b is None else np.abs(b), np.abs(DY))
    tolerance = 2e-5 if precision == "bf16" else 2e-6
    problems = []
    within("output", y, want[0], magnitude[0], tolerance, problems)
    within("input gradient", net.blobs["data"].diff, want[1], magnitude[1], tolerance, problems)
    within("weight gradient", net.params["c"][0].diff, want[2], magnitude[2], tolerance, problems)
    if bias:  # the bias gradient sums the output gradient as the layer reads it
        within("bias gradient", net.params["c"][1].diff, DY.sum(axis=(0, 2, 3)), np.abs(DY).sum(axis=(0, 2, 3)),
               tolerance, problems)
    return report(problems, seed, what)


def identity_stem(N, C, H, W):
    """A net whose 1x1 identity convolution 'a' brings the data into oneDNN's layouts."""
    return (f'force_backward: true\nlayer {{ name: "data" type: "Input" top: "data" '
            f"input_param {{ shape {{ dim: {N} dim: {C} dim: {H} dim: {W} }} }} }}\n"
            f'layer {{ name: "c" type: "Convolution" bottom: "data" top: "a" convolution_param {{ num_output: {C} '
            f"kernel_size: 1 bias_term: false }} }}\n")


def forward_backward(net, x, rng):
    """Runs the stem net on `x` forward, and backward from a random output gradient that bf16 holds exactly; returns
    the output and that gradient."""
    net.blobs["data"].data[...] = x
    net.forward()
    y = net.blobs["y"].data.copy()
    dy = bf16(rng.standard_normal(y.shape).astype(np.float32))
    net.blobs["y"].diff[...] = dy
    net.backward()
    return y, dy


def pool_case(seed, precision):
    r = random.Random(seed)
    N, C, H = r.choice([1, 2, 3]), r.choice([1, 2, 3, 5, 16, 17, 20, 33, 64]), r.choice([1, 2, 5, 6, 7, 13, 14, 28])
    W = r.choice([H, 3, 8, 11])
    method = r.choice(["MAX", "AVE"])
    kh = r.choice([1, 2, 3, 5])
    k = (kh, r.choice([kh, kh, 1, 3]))
    sh = r.choice([1, 2, 3])
    s = (sh, r.choice([sh, 1, 2]))
    ph = r.choice([0, 0, 1, 2])
    p = (ph, r.choice([ph, 0, 1]))
    if p[0] >= k[0] or p[1] >= k[1]:
        return None
    # Caffe's output size (rounded up), the last window kept only where it starts inside the padded input.
    oh, ow = (int(math.ceil((n + 2 * q - kk) / ss)) + 1 for n, q, kk, ss in ((H, p[0], k[0], s[0]), (W, p[1], k[1], s[1])))
    if p[0] > 0 and (oh - 1) * s[0] >= H + p[0]:
        oh -= 1
    if p[1] > 0 and (ow - 1) * s[1] >= W + p[1]:
        ow -= 1
    if (oh - 1) * s[0] - p[0] >= H or (ow - 1) * s[1] - p[1] >= W or oh < 1 or ow < 1:
        return None  # a last window wholly in the padding: Caffe's own quirk, not compared here
    what = f"{method} pooling N{N} C{C} H{H} W{W} kernel {k} stride {s} pad {p}"
    try:
        net = make_net(identity_stem(N, C, H, W) +
                       f'layer {{ name: "p" type: "Pooling" bottom: "a" top: "y" pooling_param {{ pool: {method} '
                       f"kernel_h: {k[0]} kernel_w: {k[1]} stride_h: {s[0]} stride_w: {s[1]} pad_h: {p[0]} "
                       f"pad_w: {p[1]} }} }}\n")
    except crema.Error:
        return None
    net.params["c"][0].data[...] = np.eye(C).reshape(C, C, 1, 1)
    rng = np.random.default_rng(seed)
    if precision == "bf16":  # distinct values that bf16 holds exactly (the identity passes them unchanged)
        x = np.sign(rng.standard_normal((N, C, H, W))) * np.exp2(rng.integers(-10, 10, (N, C, H, W))) * \
            (1 + rng.integers(0, 128, (N, C, H, W)) / 128)
    else:
        x = rng.standard_normal((N, C, H, W))
    x = x.astype(np.float32)
    y, dy = forward_backward(net, x, rng)
    # The reference: each window's maximum (its first position on ties) or its sum over Caffe's divisor, the window
    # clipped to the padded input for the divisor and to the input for the values.
    X, DY = x.astype(np.float64), dy.astype(np.float64)
    want, dx = np.zeros((N, C, oh, ow)), np.zeros_like(X)
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * s[0] - p[0], j * s[1] - p[1]
            he, we = min(hs + k[0], H + p[0]), min(ws + k[1], W + p[1])
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, H), min(we, W)
            window = X[:, :, hs:he, ws:we].reshape(N, C, -1)
            if method == "MAX":
                want[:, :, i, j] = window.max(axis=2)
                at = window.argmax(axis=2)
                for n in range(N):
                    for c in range(C):
                        dx[n, c, hs + at[n, c] // (we - ws), ws + at[n, c] % (we - ws)] += DY[n, c, i, j]
            else:
                want[:, :, i, j] = window.sum(axis=2) / size
                dx[:, :, hs:he, ws:we] += DY[:, :, i, j][:, :, None, None] / size
    problems = []
    bound = 2.0 ** -8 if precision == "bf16" else 1e-6  # AVE's results and the gradient may lie in bf16 there
    within("output", y, want, np.abs(want) + np.abs(X).max() * 1e-3, bound, problems)
    within("input gradient", net.blobs["data"].diff, dx, np.abs(dx) + np.abs(DY).max() * 1e-3, bound, problems)
    return report(problems, seed, what)


def lrn_case(seed, precision):
    r = random.Random(seed)
    N, C, H = r.choice([1, 2, 3]), r.choice([1, 2, 3, 5, 16, 17, 20, 33, 64, 96]), r.choice([1, 2, 5, 7, 13, 27])
    W = r.choice([H, 3, 8])
    size, alpha = r.choice([1, 3, 5, 7]), r.choice([1e-4, 1e-2, 0.5, 2.0])
    beta, k = r.choice([0.75, 0.5, 1.0]), r.choice([1.0, 2.0])
    what = f"LRN N{N} C{C} H{H} W{W} local_size {size} alpha {alpha} beta {beta} k {k}"
    net = make_net(identity_stem(N, C, H, W) +
                   f'layer {{ name: "n" type: "LRN" bottom: "a" top: "y" lrn_param {{ local_size: {size} '
                   f"alpha: {alpha} beta: {beta} k: {k} }} }}\n")
    net.params["c"][0].data[...] = np.eye(C).reshape(C, C, 1, 1)
    rng = np.random.default_rng(seed)
    x = bf16(rng.standard_normal((N, C, H, W)).astype(np.float32) * 3)
    y, dy = forward_backward(net, x, rng)
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    ty = F.local_response_norm(tx, size, alpha, beta, k)
    ty.backward(torch.tensor(dy.astype(np.float64)))
    # bf16's rule rounds its operands and results: a few units of its rounding, also of the terms that cancel.
    bound = 2.0 ** -7 if precision == "bf16" else 1e-5
    problems = []
    want_y, want_dx = ty.detach().numpy(), tx.grad.numpy()
    within("output", y, want_y, np.abs(want_y) + 0.01 * np.abs(x).max(), bound, problems)
    # The gradient's two terms (dy_c S_c^-beta and the sum over the window) may cancel: its magnitude is theirs.
    X, DY = x.astype(np.float64), dy.astype(np.float64)
    padded = np.pad(X * X, ((0, 0), (size // 2, size // 2), (0, 0), (0, 0)))
    scale = k + alpha / size * sum(padded[:, i:i + C] for i in range(size))
    cross = np.pad(np.abs(DY * X) * scale ** (-beta - 1), ((0, 0), (size // 2, size // 2), (0, 0), (0, 0)))
    magnitude = np.abs(DY) * scale ** -beta + 2 * alpha * beta / size * np.abs(X) * sum(
        cross[:, i:i + C] for i in range(size))
    within("input gradient", net.blobs["data"].diff, want_dx, magnitude + 0.01 * np.abs(want_dx).max(), bound,
           problems)
    return report(problems, seed, what)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=["conv", "pool", "lrn", "all"], default="all")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--seeds", type=int, default=200, help="cases of each kind")
    parser.add_argument("--first", type=int, default=0, help="the first case's seed")
    args = parser.parse_args()
    crema.set_log_level(2)
    crema.set_precision(args.precision)
    kinds = {"conv": conv_case, "pool": pool_case, "lrn": lrn_case}
    failed = False
    for name, case in kinds.items():
        if args.kind not in (name, "all"):
            continue
        ran = differed = 0
        for seed in range(args.first, args.first + args.seeds):
            result = case(seed, args.precision)
            if result is None:
                continue
            ran += 1
            differed += result
        print(f"{name} ({args.precision}): {differed} of {ran} cases differ")
        failed |= differed > 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
