"""pycaffe's Detector: a Net (TEST phase) that classifies windows of images (R-CNN style), each window cropped,
optionally with context around it (context_pad), warped to the net's input size and preprocessed."""

import numpy as np

from . import io
from ._crema import Error, Net
from .classifier import _load_for_images

__all__ = ["Detector"]


class Detector(Net):
    """Detector(model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None, channel_swap=None,
    context_pad=None): the net of model_file with pretrained_file's weights; its input is preprocessed by an
    io.Transformer (transpose to C x H x W, channel_swap, raw_scale, mean, input_scale). context_pad: the pixels of
    context, at the input's scale, kept around each window."""

    def __init__(self, model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None, channel_swap=None,
                 context_pad=None):
        _load_for_images(self, model_file, pretrained_file, "Detector", mean, input_scale, raw_scale, channel_swap)
        self.configure_crop(context_pad)

    def detect_windows(self, images_windows):
        """[(image file name, windows)] -> one dict per window, in order: {'window': [ymin, xmin, ymax, xmax],
        'prediction': the net's first output for it, 'filename': the image file}. Windows are in pixels of the
        image as load_image reads it; ymax and xmax are exclusive."""
        crops = []
        for image_file, windows in images_windows:
            image = io.load_image(image_file).astype(np.float32)
            for window in windows:
                crops.append(self.crop(image, np.asarray(window)))
        input_name = self.inputs[0]
        if not crops:
            return []
        batch = np.array([self.transformer.preprocess(input_name, crop) for crop in crops], dtype=np.float32)
        predictions = self.forward_all(**{input_name: batch})[self.outputs[0]]
        # 1 x 1 spatial outputs (a convolutional classifier) as plain vectors.
        while predictions.ndim > 2 and predictions.shape[-1] == 1:
            predictions = predictions[..., 0]
        detections = []
        index = 0
        for image_file, windows in images_windows:
            for window in windows:
                detections.append({"window": window, "prediction": predictions[index], "filename": image_file})
                index += 1
        return detections

    def detect_selective_search(self, image_fnames):
        """Not available: pycaffe proposed windows with the selective_search_ijcv_with_python package (MATLAB),
        which crema does not ship. Propose windows yourself and call detect_windows."""
        raise Error("Detector.detect_selective_search is not available in crema (it needs MATLAB's selective "
                    "search); compute the windows elsewhere and call detect_windows([(image, windows), ...])")

    def crop(self, im, window):
        """The window [ymin, xmin, ymax, xmax] of image `im`, with context_pad pixels of context (at the input's
        scale) around it when configured: the window is enlarged so that, once warped to the input's size, it
        keeps that margin; parts outside the image are filled with the mean."""
        window = np.asarray(window)
        crop = im[int(window[0]):int(window[2]), int(window[1]):int(window[3])]
        if not self.context_pad:
            return crop
        box = window.astype(np.float64)
        crop_size = self.blobs[self.inputs[0]].width  # square inputs assumed, as in pycaffe
        scale = crop_size / (1.0 * crop_size - self.context_pad * 2)
        half_h = (box[2] - box[0] + 1) / 2.0
        half_w = (box[3] - box[1] + 1) / 2.0
        center = (box[0] + half_h, box[1] + half_w)
        scaled = scale * np.array((half_h, half_w))
        box = np.round(np.array((center[0] - scaled[0], center[1] - scaled[1],
                                 center[0] + scaled[0], center[1] + scaled[1])))
        full_h = box[2] - box[0] + 1
        full_w = box[3] - box[1] + 1
        scale_h, scale_w = crop_size / full_h, crop_size / full_w
        pad_y = int(round(max(0, -box[0]) * scale_h))
        pad_x = int(round(max(0, -box[1]) * scale_w))
        height, width = im.shape[:2]
        box = np.clip(box, 0.0, [height, width, height, width])
        crop_h = int(round((box[2] - box[0] + 1) * scale_h))
        crop_w = int(round((box[3] - box[1] + 1) * scale_w))
        crop_h = min(crop_h, crop_size - pad_y)
        crop_w = min(crop_w, crop_size - pad_x)
        context = im[int(box[0]):int(box[2]), int(box[1]):int(box[3])]
        result = np.ones(self.crop_dims, dtype=np.float32) * self.crop_mean
        if crop_h > 0 and crop_w > 0 and context.size:
            result[pad_y:pad_y + crop_h, pad_x:pad_x + crop_w] = io.resize_image(context, (crop_h, crop_w))
        return result

    def configure_crop(self, context_pad):
        """Sets context_pad, the crop's size (the input's height x width x channels) and the value that fills
        context outside the image: the mean, brought back to the image's scale and channel order."""
        input_name = self.inputs[0]
        shape = self.blobs[input_name].shape
        self.context_pad = context_pad
        transpose = self.transformer.transpose.get(input_name, (2, 0, 1))
        inverse = np.argsort(transpose)
        self.crop_dims = np.array(shape[1:])[inverse]
        self.crop_mean = np.zeros(self.crop_dims, dtype=np.float32)
        if context_pad and input_name in self.transformer.mean:
            mean = np.broadcast_to(self.transformer.mean[input_name], shape[1:]).astype(np.float32)
            raw_scale = self.transformer.raw_scale.get(input_name)
            if raw_scale is not None:
                mean = mean / np.float32(raw_scale)
            swap = self.transformer.channel_swap.get(input_name)
            if swap is not None:
                mean = mean[list(np.argsort(swap))]
            self.crop_mean = mean.transpose(inverse)
