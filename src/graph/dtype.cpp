#include "graph/dtype.h"

#include "support/error.h"

namespace loom {

namespace {
struct DTypeInfo {
    DType type;
    const char *name;
    int size;
    int onnx;
};
// ONNX numbers from onnx.proto's TensorProto.DataType.
constexpr DTypeInfo kInfo[] = {
    {DType::F32, "f32", 4, 1},  {DType::F16, "f16", 2, 10}, {DType::F64, "f64", 8, 11},
    {DType::I64, "i64", 8, 7},  {DType::I32, "i32", 4, 6},  {DType::I16, "i16", 2, 5},
    {DType::I8, "i8", 1, 3},    {DType::U8, "u8", 1, 2},    {DType::Bool, "bool", 1, 9}, {DType::BF16, "bf16", 2, 16},
};
const DTypeInfo &info(DType t) {
    for (const auto &i : kInfo)
        if (i.type == t) return i;
    throw InternalError("unknown DType");
}
}  // namespace

const char *dtype_name(DType t) { return info(t).name; }
int dtype_size(DType t) { return info(t).size; }
bool dtype_is_float(DType t) { return t == DType::F32 || dtype_is_half(t) || t == DType::F64; }
bool dtype_is_half(DType t) { return t == DType::F16 || t == DType::BF16; }
int dtype_to_onnx(DType t) { return info(t).onnx; }

DType dtype_from_name(const std::string &name) {
    std::string all;
    for (const auto &i : kInfo) {
        if (name == i.name) return i.type;
        all += std::string(all.empty() ? "" : ", ") + i.name;
    }
    throw UserError("unknown dtype '" + name + "'; valid: " + all);
}

DType dtype_from_onnx(int onnx_type) {
    for (const auto &i : kInfo)
        if (i.onnx == onnx_type) return i.type;
    static const char *onnx_names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32",
                                       "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32",
                                       "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    const char *nm = onnx_type >= 0 && onnx_type <= 16 ? onnx_names[onnx_type] : "unknown";
    throw UserError(str_cat("ONNX element type ", nm, " (", onnx_type, ")",
                            " is not supported; Loom supports f32 f16 bf16 f64 i64 i32 i16 i8 u8 bool"));
}

}  // namespace loom
