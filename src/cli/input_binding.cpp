#include "cli/input_binding.h"

#include <cerrno>
#include <cstdlib>

#include "support/error.h"

namespace loom {

void parse_input_binding(const std::string &text, InputBindings &b) {
    auto eq = text.find('=');
    user_check(eq != std::string::npos && eq > 0 && eq + 1 < text.size(), "bad --input '", text,
               "'; expected NAME=DIMS, e.g. --input x=1x3x224x224 or --input batch=8");
    std::string name = text.substr(0, eq), dims = text.substr(eq + 1);
    Shape s;
    size_t pos = 0;
    while (pos <= dims.size()) {
        size_t x = dims.find('x', pos);
        std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
        char *end = nullptr;
        errno = 0;
        long long v = std::strtoll(d.c_str(), &end, 10);
        user_check(!d.empty() && *end == '\0' && v > 0 && errno == 0, "bad --input '", text, "': '", d,
                   "' is not a positive dim; expected NAME=DIMS, e.g. x=1x3x224x224");
        s.push_back(v);
        if (x == std::string::npos) break;
        pos = x + 1;
    }
    b[name] = s;
}

}  // namespace loom
