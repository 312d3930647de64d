#!/usr/bin/python3
"""Writes bench/ort/trivial.onnx: one Identity on a 1-element float tensor. ort_worker.js times
ONNX Runtime on it to measure the per-call overhead of node, the binding and session.run, which
`loom bench --ort` reports beside ORT's row. The file is committed; run this to make it again."""
import os

import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "trivial", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="loom")
model.ir_version = 7
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trivial.onnx")
onnx.save(model, out + ".tmp")
os.replace(out + ".tmp", out)
print("wrote", out)
