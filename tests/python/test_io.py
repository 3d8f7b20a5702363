"""crema.io: Datum and BlobProto bytes against hand-encoded protobuf, images read as written, a mean file made by
compute_image_mean equal to numpy's mean, resizing against values worked out by hand, the Transformer's steps."""

import subprocess

import numpy as np
import pytest

import crema
from crema import io


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, wire_type, payload):
    """One protobuf field: its key, then a varint (wire type 0) or length-delimited bytes (2)."""
    key = varint(number << 3 | wire_type)
    return key + (varint(payload) if wire_type == 0 else varint(len(payload)) + payload)


def write_ppm(path, pixels):
    """pixels: H x W x 3 uint8, R G B (a binary PPM, which OpenCV reads; no imaging module needed)."""
    height, width = pixels.shape[:2]
    path.write_bytes(b"P6\n%d %d\n255\n" % (width, height) + pixels.tobytes())
    return path


def write_pgm(path, pixels):
    height, width = pixels.shape
    path.write_bytes(b"P5\n%d %d\n255\n" % (width, height) + pixels.tobytes())
    return path


def test_uint8_datum_is_the_protobuf_encoding_and_reads_back():
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    datum = io.array_to_datum(array, label=7)  # a caffe_pb2.Datum, as in pycaffe
    expected = (field(1, 0, 2) + field(2, 0, 3) + field(3, 0, 4) + field(4, 2, array.tobytes()) + field(5, 0, 7))
    assert datum.SerializeToString() == expected
    assert (datum.channels, datum.height, datum.width, datum.label) == (2, 3, 4, 7)
    values = io.datum_to_array(datum)  # a message: the array only (pycaffe's), the label is datum.label
    assert values.dtype == np.uint8
    np.testing.assert_array_equal(values, array)
    values, label = io.datum_to_array(expected)  # serialized bytes (an LMDB record): (array, label)
    assert label == 7 and values.dtype == np.uint8
    np.testing.assert_array_equal(values, array)


def test_float_datum_round_trip():
    array = np.random.default_rng(0).normal(size=(3, 2, 5)).astype(np.float32)
    values, label = io.datum_to_array(io.array_to_datum(array.astype(np.float64), label=-3).SerializeToString())
    assert label == -3 and values.dtype == np.float32
    np.testing.assert_array_equal(values, array)
    with pytest.raises(crema.Error, match="channels x height x width"):
        io.array_to_datum(np.zeros((2, 2)))


def test_encoded_datum_is_decoded(tmp_path):
    pixels = np.random.default_rng(1).integers(0, 256, size=(3, 5, 3), dtype=np.uint8)
    image_file = write_ppm(tmp_path / "a.ppm", pixels).read_bytes()
    datum = field(4, 2, image_file) + field(5, 0, 4) + field(7, 0, 1)  # data, label, encoded: true
    values, label = io.datum_to_array(datum)
    assert label == 4
    np.testing.assert_array_equal(values, pixels.transpose(2, 0, 1)[::-1])  # C x H x W, B G R


def test_blobproto_round_trip_and_files(tmp_path):
    array = np.random.default_rng(2).normal(size=(2, 3, 4)).astype(np.float32)
    data = io.array_to_blobproto(array).SerializeToString()
    shape = field(1, 2, varint(2) + varint(3) + varint(4))  # BlobShape.dim, packed
    assert data == field(5, 2, array.astype("<f4").tobytes()) + field(7, 2, shape)
    back = io.blobproto_to_array(data)
    assert back.shape == (2, 3, 4) and back.dtype == np.float32
    np.testing.assert_array_equal(back, array)
    path = tmp_path / "blob.binaryproto"
    path.write_bytes(data)
    np.testing.assert_array_equal(io.blobproto_to_array(path), array)
    np.testing.assert_array_equal(io.blobproto_to_array(str(path)), array)
    # A legacy BlobProto (num, channels, height, width; packed floats).
    legacy = (field(1, 0, 1) + field(2, 0, 2) + field(3, 0, 1) + field(4, 0, 2)
              + field(5, 2, np.array([1, 2, 3, 4], "<f4").tobytes()))
    np.testing.assert_array_equal(io.blobproto_to_array(legacy), np.arange(1, 5, dtype=np.float32).reshape(1, 2, 1, 2))
    with pytest.raises(crema.Error, match="holds 4 values, but its shape needs 6"):
        io.blobproto_to_array(field(7, 2, field(1, 2, varint(2) + varint(3))) + field(5, 2, bytes(16)))
    with pytest.raises(crema.Error, match="missing.binaryproto"):
        io.blobproto_to_array(tmp_path / "missing.binaryproto")


def test_load_image_gives_rgb_in_unit_range(tmp_path):
    pixels = np.random.default_rng(3).integers(0, 256, size=(4, 6, 3), dtype=np.uint8)
    image = io.load_image(write_ppm(tmp_path / "rgb.ppm", pixels))
    assert image.shape == (4, 6, 3) and image.dtype == np.float32
    np.testing.assert_allclose(image, pixels / 255.0, rtol=0, atol=1e-7)
    gray = np.random.default_rng(4).integers(0, 256, size=(3, 5), dtype=np.uint8)
    path = write_pgm(tmp_path / "gray.pgm", gray)
    np.testing.assert_allclose(io.load_image(path, color=False), gray[:, :, None] / 255.0, atol=1e-7)
    np.testing.assert_allclose(io.load_image(path), np.repeat(gray[:, :, None], 3, axis=2) / 255.0, atol=1e-7)
    with pytest.raises(crema.Error, match="nothing.png"):
        io.load_image(tmp_path / "nothing.png")


def test_mean_file_of_compute_image_mean_is_numpy_mean(tmp_path, tools_dir):
    rng = np.random.default_rng(5)
    images = [rng.integers(0, 256, size=(5, 4, 3), dtype=np.uint8) for _ in range(3)]
    (tmp_path / "images").mkdir()
    lines = []
    for i, pixels in enumerate(images):
        write_ppm(tmp_path / "images" / f"{i}.ppm", pixels)
        lines.append(f"{i}.ppm {i}\n")
    (tmp_path / "list.txt").write_text("".join(lines))
    run = dict(check=True, capture_output=True, cwd=tmp_path)
    tools_dir = tools_dir.resolve()  # the tools run in tmp_path
    subprocess.run([str(tools_dir / "convert_imageset"), "images/", "list.txt", "db"], **run)
    subprocess.run([str(tools_dir / "compute_image_mean"), "db", "mean.binaryproto"], **run)
    mean = io.blobproto_to_array(tmp_path / "mean.binaryproto")
    expected = np.mean([pixels.transpose(2, 0, 1)[::-1] for pixels in images], axis=0, dtype=np.float64)
    assert mean.shape == (1, 3, 5, 4)
    np.testing.assert_allclose(mean[0], expected, rtol=1e-6)


def test_resize_image_against_hand_worked_values():
    ramp = np.array([[0.0, 1.0]], np.float32)
    np.testing.assert_allclose(io.resize_image(ramp, (1, 4)), [[0, 0.25, 0.75, 1]], atol=1e-7)
    wide = np.array([[1, 3, 5, 9]], np.float64)
    np.testing.assert_allclose(io.resize_image(wide, (1, 2)), [[2, 7]])  # halving averages neighbours
    assert io.resize_image(ramp, (1, 4)).dtype == np.float32
    assert io.resize_image(wide, (1, 2)).dtype == np.float32  # float32 whatever the input, as pycaffe
    constant = np.full((3, 5, 2), 0.7, np.float32)
    np.testing.assert_allclose(io.resize_image(constant, (7, 2)), np.full((7, 2, 2), 0.7), atol=1e-6)
    image = np.random.default_rng(6).random((4, 3, 3))
    np.testing.assert_array_equal(io.resize_image(image, (4, 3)), image.astype(np.float32))
    np.testing.assert_array_equal(io.resize_image(np.array([[1, 2], [3, 4]]), (4, 4), interp_order=0),
                                  [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]])


def test_transformer_steps_and_inverse():
    rng = np.random.default_rng(7)
    image = rng.random((4, 5, 3)).astype(np.float32)  # H x W x C, R G B
    mean = rng.random((3, 4, 5)).astype(np.float32)
    t = io.Transformer({"data": (1, 3, 4, 5)})
    t.set_transpose("data", (2, 0, 1))
    t.set_channel_swap("data", (2, 1, 0))
    t.set_raw_scale("data", 255)
    t.set_mean("data", mean)
    t.set_input_scale("data", 0.5)
    out = t.preprocess("data", image)
    expected = (image.transpose(2, 0, 1)[::-1] * 255 - mean) * 0.5
    assert out.shape == (3, 4, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.deprocess("data", out[None]), image, atol=1e-5)

    per_channel = io.Transformer({"data": (2, 3, 2, 2)})
    per_channel.set_transpose("data", (2, 0, 1))
    per_channel.set_mean("data", [1, 2, 3])
    big = np.ones((4, 4, 3), np.float32)  # resized to 2 x 2 first
    expected = np.array([0, -1, -2], np.float32)[:, None, None] * np.ones((3, 2, 2))
    np.testing.assert_allclose(per_channel.preprocess("data", big), expected)
    with pytest.raises(crema.Error, match="does not fit"):
        per_channel.set_mean("data", np.zeros((3, 4, 4)))
    with pytest.raises(crema.Error, match="'label' is not one of its inputs"):
        per_channel.set_raw_scale("label", 2)
