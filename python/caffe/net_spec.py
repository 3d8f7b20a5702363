"""caffe.net_spec is crema.net_spec (the same module object): pycaffe's name for it."""

import sys

import crema.net_spec

sys.modules[__name__] = crema.net_spec
