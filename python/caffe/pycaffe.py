"""caffe.pycaffe is crema.pycaffe (the same module object): pycaffe's name for it."""

import sys

import crema.pycaffe

sys.modules[__name__] = crema.pycaffe
