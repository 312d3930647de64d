#!/usr/bin/python3
"""Writes the hand-made hostile ONNX models of fuzz/regressions/onnx_import/ (each one of the
attacks tests/test_onnx_import.cpp's HostileModels tests build in C++), so the fuzzer starts from
them and tests/test_fuzz_regressions.cpp replays them. Debian's python3-onnx; run from anywhere."""
import os

from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions", "onnx_import")


def tiny(nodes, inits=(), out=("y", [2, 3])):
    """x:[2,3] -> Relu -> y, then \\p nodes; the graph output is \\p out."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")] + list(nodes), "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(out[0], TensorProto.FLOAT, out[1])], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def raw(name, dims, nbytes):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    t.raw_data = b"\0" * nbytes
    return t


def external(location):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], data_location=TensorProto.EXTERNAL)
    t.external_data.add(key="location", value=location)
    return tiny([helper.make_node("Add", ["y", "w"], ["z"], name="add_w")], [t], ("z", [2, 3]))


def main():
    i64 = TensorProto.INT64
    fill = helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill")
    fill.attribute.append(helper.make_attribute("value", 1))  # an INT, not a tensor
    models = {
        "huge_dim": tiny([], [raw("huge", [1 << 40], 100)]),
        "billion_floats_in_100_bytes": tiny([], [raw("claims", [10**9], 100)]),
        "external_dotdot": external("../secret.bin"),
        "external_absolute": external("/etc/passwd"),
        "self_cycle": tiny([helper.make_node("Add", ["y", "loop"], ["loop"], name="eats_itself")], (), ("loop", [2, 3])),
        "conv_one_input": tiny([helper.make_node("Conv", ["y"], ["z"], name="short")], (), ("z", [2, 3])),
        "expand_48GiB": tiny([helper.make_node("Expand", ["y", "big_shape"], ["z"], name="blow_up")],
                             [helper.make_tensor("big_shape", i64, [4], [1 << 21, 1 << 10, 2, 3])], ("z", [1 << 21, 1 << 10, 2, 3])),
        "range_vector_start": tiny([helper.make_node("Range", ["start", "one", "one"], ["r"], name="rng"),
                                    helper.make_node("Add", ["y", "r"], ["z"])],
                                   [helper.make_tensor("start", TensorProto.FLOAT, [2], [0, 1]),
                                    helper.make_tensor("one", TensorProto.FLOAT, [], [1])], ("z", [2, 3])),
        "constant_of_shape_int_value": tiny([fill, helper.make_node("Add", ["y", "c"], ["z"])],
                                            [helper.make_tensor("shape", i64, [2], [2, 3])], ("z", [2, 3])),
        "add_f32_i64": tiny([helper.make_node("Add", ["y", "int_bias"], ["z"], name="mixed_add")],
                            [helper.make_tensor("int_bias", i64, [3], [1, 2, 3])], ("z", [2, 3])),
    }
    os.makedirs(OUT, exist_ok=True)
    for name, m in models.items():
        with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
