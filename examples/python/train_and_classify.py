#!/usr/bin/env python3
"""Trains LeNet on Fashion-MNIST from Python, writes the loss curve (CSV, and a PNG where matplotlib is there),
then classifies test images read straight from the IDX files with the deploy net and the trained weights.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/train_and_classify.py --iterations 1000 --out /tmp/lenet

Writes into --out: loss.csv (iteration, training loss, test accuracy where scored), loss.png (with matplotlib:
apt-get install python3-matplotlib), lenet_python.caffemodel, results.json. See examples/python/README.md.
"""

import argparse
import csv
import json
import pathlib
import sys
import time

import numpy as np

import crema
import fashion_mnist_data as fm


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000, help="training iterations (batches of 64)")
    parser.add_argument("--out", default="python_lenet", help="folder for the curve, weights and results")
    parser.add_argument("--chunk", type=int, default=20, help="iterations per solver.step call (one curve point)")
    parser.add_argument("--test-every", type=int, default=500, help="score the test net every this many iterations")
    parser.add_argument("--test-batches", type=int, default=20, help="test batches of 100 per score")
    parser.add_argument("--train-images", type=int, default=None,
                        help="train on the first N training images only (default: all; uses `make data`'s LMDB "
                        "when it exists)")
    parser.add_argument("--test-images", type=int, default=None, help="the test LMDB's size (default: all)")
    parser.add_argument("--classify", type=int, default=1000, help="test images to classify at the end")
    parser.add_argument("--show", type=int, default=10, help="of those, how many to print")
    parser.add_argument("--gpu", action="store_true", help="train and classify on GPU 0")
    return parser.parse_args(argv)


def train(args, out):
    train_db, test_db = fm.make_lmdbs(out, args.train_images, args.test_images)
    solver = crema.get_solver(fm.write_solver(out, train_db, test_db, args.iterations, args.test_batches))
    rows = []
    started = time.time()
    next_test = args.test_every
    while solver.iter < args.iterations:
        solver.step(min(args.chunk, args.iterations - solver.iter))
        # The training net's loss top holds the last step's loss: one point of the curve per chunk.
        row = {"iteration": solver.iter, "loss": float(solver.net.blobs["loss"].data), "test_accuracy": ""}
        if solver.iter >= next_test or solver.iter == args.iterations:
            next_test = (solver.iter // args.test_every + 1) * args.test_every
            row["test_accuracy"] = fm.score(solver, args.test_batches)
            print(f"iteration {solver.iter}: loss {row['loss']:.4f}, test accuracy {row['test_accuracy']:.4f} "
                  f"({time.time() - started:.1f} s)", flush=True)
        rows.append(row)
    weights = out / "lenet_python.caffemodel"
    solver.net.save(str(weights))
    return rows, weights


def write_curve(rows, out):
    with open(out / "loss.csv", "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=["iteration", "loss", "test_accuracy"])
        writer.writeheader()
        writer.writerows(rows)
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (apt-get install python3-matplotlib): wrote loss.csv, no loss.png")
        return None
    figure, loss_axis = plt.subplots(figsize=(7, 4))
    loss_axis.plot([r["iteration"] for r in rows], [r["loss"] for r in rows], label="training loss")
    loss_axis.set_xlabel("iteration")
    loss_axis.set_ylabel("loss")
    scored = [r for r in rows if r["test_accuracy"] != ""]
    accuracy_axis = loss_axis.twinx()
    accuracy_axis.plot([r["iteration"] for r in scored], [r["test_accuracy"] for r in scored], "o-", color="C1",
                       label="test accuracy")
    accuracy_axis.set_ylabel("test accuracy")
    accuracy_axis.set_ylim(0, 1)
    figure.legend(loc="center right")
    figure.tight_layout()
    figure.savefig(out / "loss.png", dpi=100)
    plt.close(figure)
    return out / "loss.png"


def classify(weights, count, show):
    images, labels = fm.load("test", count)
    net = crema.Net(str(fm.DEPLOY), crema.TEST, weights=str(weights))
    probabilities = np.concatenate([net.forward(data=fm.as_input(images[i:i + 100]))["prob"].copy()
                                    for i in range(0, len(images), 100)])
    predicted = probabilities.argmax(axis=1)
    for i in range(min(show, len(images))):
        top = np.argsort(probabilities[i])[::-1][:3]
        guesses = ", ".join(f"{fm.CLASS_NAMES[k]} {probabilities[i, k]:.3f}" for k in top)
        mark = "ok" if predicted[i] == labels[i] else "WRONG"
        print(f"test image {i}: {fm.CLASS_NAMES[labels[i]]:<12} -> {guesses}  [{mark}]")
    accuracy = float((predicted == labels).mean())
    print(f"classified {len(images)} test images: accuracy {accuracy:.4f}")
    return accuracy, predicted


def main(argv=None):
    args = parse_args(argv)
    fm.check_dataset()
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.gpu:
        crema.set_mode_gpu()
        crema.set_device(0)
    rows, weights = train(args, out)
    plot = write_curve(rows, out)
    accuracy, predicted = classify(weights, args.classify, args.show)
    results = {"iterations": args.iterations, "final_loss": rows[-1]["loss"],
               "test_accuracy": rows[-1]["test_accuracy"], "classified": len(predicted),
               "classify_accuracy": accuracy, "predicted": predicted[:args.show].tolist(),
               "weights": str(weights), "curve": str(out / "loss.csv"), "plot": str(plot) if plot else None}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
