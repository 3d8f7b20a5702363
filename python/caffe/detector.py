"""caffe.detector is crema.detector (the same module object): pycaffe's name for it."""

import sys

import crema.detector

sys.modules[__name__] = crema.detector
