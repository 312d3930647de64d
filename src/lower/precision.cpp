#include "lower/precision.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "support/error.h"

namespace loom {

const char *precision_name(Precision p) {
    switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
    }
    return "?";
}

Precision parse_precision(const std::string &text) {
    std::string t = text;
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return (char)std::tolower(c); });
    for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16})
        if (t == precision_name(p)) return p;
    throw UserError("unknown precision '" + text + "': use fp32, tf32, bf16 or fp16");
}

double unit_roundoff(Precision p) {
    switch (p) {
    case Precision::FP32: return std::ldexp(1.0, -24);
    case Precision::TF32:
    case Precision::FP16: return std::ldexp(1.0, -11);
    case Precision::BF16: return std::ldexp(1.0, -8);
    }
    return 1;
}

}  // namespace loom
