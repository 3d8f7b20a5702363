"""caffe.Classifier and caffe.Detector against numpy references, and the scripts pycaffe's users run:
python/scripts/classify.py, detect.py and draw_net.py (pycaffe's flags)."""

import csv
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import caffe

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "python" / "scripts"

DEPLOY = """
name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.05 }
                              bias_filler { type: "gaussian" std: 0.5 } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
"""

MEAN = np.array([0.5, 10.0, 100.0], np.float32)  # per channel, in the net's (B G R) order and 0..255 scale


@pytest.fixture
def model(write, tmp_path):
    deploy = write("deploy.prototxt", DEPLOY)
    weights = str(tmp_path / "tiny.caffemodel")
    caffe.set_random_seed(5)
    try:
        caffe.Net(deploy, caffe.TEST).save(weights)
    finally:
        caffe.set_random_seed(1701)
    return deploy, weights


def write_ppm(path, pixels):
    height, width, _ = pixels.shape
    path.write_bytes(b"P6\n%d %d\n255\n" % (width, height) + pixels.tobytes())
    return str(path)


def probabilities(net_weights, crop):
    """The net on one H x W x 3 R G B crop in [0, 1]: transposed, swapped to B G R, scaled by 255, mean taken."""
    weights, bias = net_weights
    x = crop.transpose(2, 0, 1)[::-1].astype(np.float64) * 255 - MEAN[:, None, None]
    logits = weights @ x.ravel() + bias
    e = np.exp(logits - logits.max())
    return e / e.sum()


def weights_of(deploy, weights):
    net = caffe.Net(deploy, caffe.TEST, weights=weights)
    return net.params["ip"][0].data.astype(np.float64), net.params["ip"][1].data.astype(np.float64)


def test_classifier_oversampled_and_centre(model):
    deploy, weights = model
    rng = np.random.default_rng(0)
    images = [rng.random((6, 6, 3)).astype(np.float32) for _ in range(3)]
    classifier = caffe.Classifier(deploy, weights, image_dims=(6, 6), mean=MEAN, raw_scale=255,
                                  channel_swap=(2, 1, 0))
    assert isinstance(classifier, caffe.Net)
    reference_weights = weights_of(deploy, weights)
    predictions = classifier.predict(images)  # 3 images x 10 crops, batches of 2
    assert predictions.shape == (3, 5)
    for image, prediction in zip(images, predictions):
        crops = [image[y:y + 4, x:x + 4] for y, x in ((0, 0), (0, 2), (2, 0), (2, 2), (1, 1))]
        crops += [crop[:, ::-1] for crop in crops]
        expected = np.mean([probabilities(reference_weights, crop) for crop in crops], axis=0)
        np.testing.assert_allclose(prediction, expected, rtol=1e-4, atol=1e-6)
    centre = classifier.predict(images, oversample=False)
    for image, prediction in zip(images, centre):
        np.testing.assert_allclose(prediction, probabilities(reference_weights, image[1:5, 1:5]), rtol=1e-4,
                                   atol=1e-6)


def test_detector_windows_and_context(model, tmp_path):
    deploy, weights = model
    pixels = np.random.default_rng(1).integers(0, 256, size=(12, 12, 3), dtype=np.uint8)
    image_file = write_ppm(tmp_path / "scene.ppm", pixels)
    image = pixels.astype(np.float32) / 255
    detector = caffe.Detector(deploy, weights, mean=MEAN, raw_scale=255, channel_swap=(2, 1, 0))
    windows = np.array([[0, 0, 4, 4], [5, 3, 9, 7], [8, 8, 12, 12]])
    detections = detector.detect_windows([(image_file, windows)])
    reference_weights = weights_of(deploy, weights)
    assert [d["filename"] for d in detections] == [image_file] * 3
    for detection, window in zip(detections, windows):
        np.testing.assert_array_equal(detection["window"], window)
        crop = image[window[0]:window[2], window[1]:window[3]]
        np.testing.assert_allclose(detection["prediction"], probabilities(reference_weights, crop), rtol=1e-4,
                                   atol=1e-6)
    # context_pad 1 on a 4-pixel input: the window [2, 2, 6, 6] grows by a factor 4 / (4 - 2) about its centre,
    # to rows and columns 0..10, warped to 4 x 4.
    padded = caffe.Detector(deploy, weights, mean=MEAN, raw_scale=255, channel_swap=(2, 1, 0), context_pad=1)
    np.testing.assert_allclose(padded.crop(image, np.array([2, 2, 6, 6])),
                               caffe.io.resize_image(image[0:10, 0:10], (4, 4)), rtol=1e-6)
    # Context outside the image is the mean, at the image's scale and in its channel order.
    corner = padded.crop(image, np.array([0, 0, 4, 4]))
    np.testing.assert_allclose(corner[0, 0], MEAN[::-1] / 255, rtol=1e-6)
    with pytest.raises(caffe.Error, match="selective search"):
        detector.detect_selective_search([image_file])


def run_script(name, *args):
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(caffe.__file__).resolve().parents[1]),
                                                 environment.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(SCRIPTS / name), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=environment)


def test_classify_script(model, tmp_path):
    deploy, weights = model
    rng = np.random.default_rng(2)
    folder = tmp_path / "images"
    folder.mkdir()
    images = []
    for i in range(3):
        pixels = rng.integers(0, 256, size=(6, 6, 3), dtype=np.uint8)
        write_ppm(folder / f"{i}.ppm", pixels)
        images.append(pixels.astype(np.float32) / 255)
    mean_file = tmp_path / "mean.npy"
    np.save(mean_file, np.broadcast_to(MEAN[:, None, None], (3, 6, 6)))
    out = tmp_path / "out.npy"
    result = run_script("classify.py", "--model_def", deploy, "--pretrained_model", weights, "--images_dim", "6,6",
                        "--mean_file", mean_file, "--ext", "ppm", "--center_only", folder, out)
    assert result.returncode == 0, result.stderr
    predictions = np.load(out)
    reference_weights = weights_of(deploy, weights)
    assert predictions.shape == (3, 5)
    for image, prediction in zip(images, predictions):
        np.testing.assert_allclose(prediction, probabilities(reference_weights, image[1:5, 1:5]), rtol=1e-4,
                                   atol=1e-6)
    # A .npy of images, oversampled.
    stack = tmp_path / "images.npy"
    np.save(stack, np.array(images))
    result = run_script("classify.py", "--model_def", deploy, "--pretrained_model", weights, "--images_dim", "6,6",
                        "--mean_file", mean_file, stack, out)
    assert result.returncode == 0, result.stderr
    expected = caffe.Classifier(deploy, weights, image_dims=(6, 6), mean=MEAN, raw_scale=255,
                                channel_swap=(2, 1, 0)).predict(images)
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-5)


def test_detect_script(model, tmp_path):
    deploy, weights = model
    pixels = np.random.default_rng(3).integers(0, 256, size=(10, 10, 3), dtype=np.uint8)
    image_file = write_ppm(tmp_path / "scene.ppm", pixels)
    windows_file = tmp_path / "windows.csv"
    windows_file.write_text(f"filename,ymin,xmin,ymax,xmax\n{image_file},0,0,4,4\n{image_file},2,5,6,9\n")
    mean_file = tmp_path / "mean.npy"
    np.save(mean_file, np.broadcast_to(MEAN[:, None, None], (3, 4, 4)))
    out = tmp_path / "detections.csv"
    result = run_script("detect.py", "--crop_mode", "list", "--model_def", deploy, "--pretrained_model", weights,
                        "--mean_file", mean_file, "--context_pad", 0, windows_file, out)
    assert result.returncode == 0, result.stderr
    with open(out, newline="") as source:
        rows = list(csv.DictReader(source))
    assert list(rows[0])[:5] == ["filename", "ymin", "xmin", "ymax", "xmax"] and len(rows[0]) == 10
    reference_weights = weights_of(deploy, weights)
    image = pixels.astype(np.float32) / 255
    for row, (y0, x0, y1, x1) in zip(rows, [(0, 0, 4, 4), (2, 5, 6, 9)]):
        assert row["filename"] == image_file and [int(row[c]) for c in ("ymin", "xmin", "ymax", "xmax")] == [y0, x0, y1, x1]
        prediction = [float(row[f"class{i}"]) for i in range(5)]
        np.testing.assert_allclose(prediction, probabilities(reference_weights, image[y0:y1, x0:x1]), rtol=1e-4,
                                   atol=1e-6)
    images_list = tmp_path / "images.txt"
    images_list.write_text(image_file + "\n")
    result = run_script("detect.py", "--model_def", deploy, "--pretrained_model", weights, images_list, out)
    assert result.returncode != 0 and "selective search" in result.stderr


def test_draw_net_script(tmp_path):
    from test_pycaffe_io_draw_coord_map import LENET_LIKE

    prototxt = tmp_path / "net.prototxt"
    prototxt.write_text(LENET_LIKE)
    png = tmp_path / "net.png"
    result = run_script("draw_net.py", prototxt, png)
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for phase, has_loss in (("ALL", True), ("TRAIN", True), ("TEST", False)):
        dot = tmp_path / f"net_{phase}.dot"
        result = run_script("draw_net.py", "--rankdir", "TB", "--phase", phase, "--display_lrm", prototxt, dot)
        assert result.returncode == 0, result.stderr
        text = dot.read_text()
        assert "rankdir=TB" in text and "conv1_Convolution" in text and "lr mult" in text
        assert ("loss_SoftmaxWithLoss" in text) == has_loss
