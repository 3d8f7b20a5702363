"""caffe.io is crema.io (the same module object): pycaffe's name for it."""

import sys

import crema.io

sys.modules[__name__] = crema.io
