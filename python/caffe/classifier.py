"""caffe.classifier is crema.classifier (the same module object): pycaffe's name for it."""

import sys

import crema.classifier

sys.modules[__name__] = crema.classifier
