"""caffe.coord_map is crema.coord_map (the same module object): pycaffe's name for it."""

import sys

import crema.coord_map

sys.modules[__name__] = crema.coord_map
