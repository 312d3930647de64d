#!/usr/bin/python3
"""Strip large float initializers from ONNX models (kept: name, shape, mean, std) so the graph travels small."""
import sys, json, onnx, numpy as np
from onnx import numpy_helper
src, dst = sys.argv[1], sys.argv[2]
m = onnx.load(src)
meta = {}
for init in m.graph.initializer:
    if init.data_type == onnx.TensorProto.FLOAT and np.prod(init.dims) >= 4096:
        a = numpy_helper.to_array(init)
        meta[init.name] = [float(a.mean()), float(a.std())]
        init.ClearField("raw_data"); del init.float_data[:]
onnx.save(m, dst)
json.dump(meta, open(dst + ".json", "w"))
