"""caffe.draw is crema.draw (the same module object): pycaffe's name for it."""

import sys

import crema.draw

sys.modules[__name__] = crema.draw
