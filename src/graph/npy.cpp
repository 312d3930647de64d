#include "graph/npy.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "support/atomic_file.h"
#include "support/error.h"

namespace loom {

namespace {

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct DescrInfo {
    const char *code;  // kind + size, without the byte-order character
    DType type;
};
constexpr DescrInfo kDescrs[] = {
    {"f4", DType::F32}, {"f2", DType::F16}, {"f8", DType::F64}, {"i8", DType::I64},
    {"i4", DType::I32}, {"i2", DType::I16}, {"i1", DType::I8},  {"u1", DType::U8},
    {"b1", DType::Bool},
};

std::string supported_descrs() {
    std::string s;
    for (const auto &d : kDescrs) s += std::string(s.empty() ? "" : " ") + d.code;
    return s;
}

// A cursor over the header, a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct HeaderParser {
    const std::string &text;
    const std::string &origin;
    size_t pos = 0;

    [[noreturn]] void fail(const std::string &what) const {
        throw UserError(str_cat(origin, ": malformed .npy header (", what, " at offset ", pos,
                                "): '", text, "'; the file is not a valid NumPy .npy file"));
    }
    void skip_ws() {
        while (pos < text.size() && std::isspace((unsigned char)text[pos])) pos++;
    }
    bool accept(char c) {
        skip_ws();
        if (pos < text.size() && text[pos] == c) {
            pos++;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!accept(c)) fail(str_cat("expected '", c, "'"));
    }
    std::string string_literal() {
        skip_ws();
        if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) fail("expected a string");
        char q = text[pos++];
        size_t end = text.find(q, pos);
        if (end == std::string::npos) fail("unterminated string");
        std::string s = text.substr(pos, end - pos);
        pos = end + 1;
        return s;
    }
    bool boolean() {
        skip_ws();
        if (text.compare(pos, 4, "True") == 0) return pos += 4, true;
        if (text.compare(pos, 5, "False") == 0) return pos += 5, false;
        fail("expected True or False");
    }
    Shape shape_tuple() {
        Shape s;
        expect('(');
        while (!accept(')')) {
            skip_ws();
            size_t start = pos;
            while (pos < text.size() && std::isdigit((unsigned char)text[pos])) pos++;
            if (start == pos) fail("expected a dimension");
            errno = 0;
            long long d = std::strtoll(text.substr(start, pos - start).c_str(), nullptr, 10);
            if (errno == ERANGE) fail("dimension " + text.substr(start, pos - start) + " is out of range");
            s.push_back(d);
            if (!accept(',')) {
                expect(')');
                break;
            }
        }
        return s;
    }
};

DType dtype_from_descr(const std::string &descr, const std::string &origin) {
    user_check(descr.size() == 3, origin, ": unsupported .npy dtype '", descr,
               "'; Loom reads ", supported_descrs(), " (convert with arr.astype(np.float32))");
    char order = descr[0];
    std::string code = descr.substr(1);
    for (const auto &d : kDescrs) {
        if (code != d.code) continue;
        bool one_byte = dtype_size(d.type) == 1;
        user_check(order == '<' || order == '|' || order == '=' || (one_byte && order == '>'),
                   origin, ": .npy dtype '", descr,
                   "' is big-endian; Loom reads little-endian data only (save "
                   "arr.astype(arr.dtype.newbyteorder('<')))");
        return d.type;
    }
    throw UserError(str_cat(origin, ": unsupported .npy dtype '", descr, "'; Loom reads ",
                            supported_descrs(), " (convert with arr.astype(np.float32))"));
}

const char *descr_of(DType t) {
    switch (t) {
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::F64: return "<f8";
    case DType::I64: return "<i8";
    case DType::I32: return "<i4";
    case DType::I16: return "<i2";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::Bool: return "|b1";
    case DType::BF16: break;  // serialize_npy widens it first
    }
    throw InternalError("descr_of: unknown dtype");
}

uint32_t read_le(const std::string &b, size_t at, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | (uint8_t)b[at + i];
    return v;
}

}  // namespace

Tensor parse_npy(const std::string &bytes, const std::string &origin) {
    user_check(bytes.size() >= kMagicLen + 2 && bytes.compare(0, kMagicLen, kMagic, kMagicLen) == 0,
               origin, ": not a NumPy .npy file (missing the \\x93NUMPY magic); save arrays with "
               "numpy.save");
    int major = (uint8_t)bytes[kMagicLen];
    user_check(major >= 1 && major <= 3, origin, ": unsupported .npy format version ", major, ".",
               (int)(uint8_t)bytes[kMagicLen + 1], "; Loom reads versions 1.0, 2.0 and 3.0");
    int len_bytes = major == 1 ? 2 : 4;
    size_t header_start = kMagicLen + 2 + len_bytes;
    user_check(bytes.size() >= header_start, origin, ": truncated .npy file (", bytes.size(),
               " bytes, the header length is cut off)");
    size_t header_len = read_le(bytes, kMagicLen + 2, len_bytes);
    user_check(bytes.size() >= header_start + header_len, origin, ": truncated .npy file (",
               bytes.size(), " bytes; the header alone needs ", header_start + header_len, ")");
    std::string header = bytes.substr(header_start, header_len);

    HeaderParser p{header, origin};
    std::string descr;
    bool fortran = false, have_descr = false, have_order = false, have_shape = false;
    Shape shape;
    p.expect('{');
    while (!p.accept('}')) {
        std::string key = p.string_literal();
        p.expect(':');
        if (key == "descr") {
            p.skip_ws();
            if (p.pos < header.size() && header[p.pos] == '[')
                throw UserError(str_cat(origin, ": .npy file holds a structured (record) array; "
                                                "Loom reads plain arrays of ",
                                        supported_descrs()));
            descr = p.string_literal();
            have_descr = true;
        } else if (key == "fortran_order") {
            fortran = p.boolean();
            have_order = true;
        } else if (key == "shape") {
            shape = p.shape_tuple();
            have_shape = true;
        } else {
            p.fail("unknown key '" + key + "'");
        }
        if (!p.accept(',')) {
            p.expect('}');
            break;
        }
    }
    user_check(have_descr && have_order && have_shape, origin,
               ": .npy header lacks one of 'descr', 'fortran_order', 'shape': '", header, "'");
    user_check(!fortran, origin, ": .npy array is in Fortran order; Loom reads C order only "
               "(save numpy.ascontiguousarray(arr))");
    DType type = dtype_from_descr(descr, origin);

    // The data the file holds is checked against the shape before anything is allocated.
    size_t need = (size_t)checked_tensor_bytes(type, shape, origin + ": the array");
    size_t data_start = header_start + header_len;
    user_check(bytes.size() - data_start >= need, origin, ": truncated .npy file: shape ",
               shape_str(shape), " of ", dtype_name(type), " needs ", need, " data bytes, found ",
               bytes.size() - data_start);
    user_check(bytes.size() - data_start == need, origin, ": .npy file has ",
               bytes.size() - data_start - need, " trailing bytes after the data of shape ",
               shape_str(shape), "; the file is corrupt");
    Tensor t(type, shape);
    if (need) std::memcpy(t.data(), bytes.data() + data_start, need);
    if (type == DType::Bool)
        for (auto &b : t.bytes()) user_check(b <= 1, origin, ": bool array holds a byte other than 0 or 1");
    return t;
}

Tensor read_npy(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    user_check(bool(in), path, ": cannot open .npy file (", std::strerror(errno), ")");
    std::ostringstream ss;
    ss << in.rdbuf();
    user_check(!in.bad(), path, ": error reading .npy file");
    return parse_npy(ss.str(), path);
}

std::string serialize_npy(const Tensor &tensor) {
    // NumPy has no bfloat16: a bf16 tensor is written as the float32 it widens to exactly.
    Tensor widened;
    if (tensor.dtype() == DType::BF16) widened = tensor.cast(DType::F32);
    const Tensor &t = tensor.dtype() == DType::BF16 ? widened : tensor;
    std::string shape = "(";
    for (size_t i = 0; i < t.shape().size(); i++)
        shape += std::to_string(t.shape()[i]) + (t.shape().size() == 1 ? "," : i + 1 < t.shape().size() ? ", " : "");
    shape += ")";
    std::string header =
        str_cat("{'descr': '", descr_of(t.dtype()), "', 'fortran_order': False, 'shape': ", shape, ", }");
    // NumPy pads the header with spaces and a final newline so the data starts 64-byte aligned.
    size_t total = kMagicLen + 2 + 2 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    internal_check(header.size() < 65536, "npy header too long for format 1.0");
    std::string out(kMagic, kMagicLen);
    out += '\x01';
    out += '\x00';
    out += (char)(header.size() & 0xff);
    out += (char)(header.size() >> 8);
    out += header;
    out.append((const char *)t.data(), t.bytes().size());
    return out;
}

void write_npy(const std::string &path, const Tensor &t) { write_file_atomically(path, serialize_npy(t)); }

}  // namespace loom
