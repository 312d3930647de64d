#include "cli/input_binding.h"

#include <cerrno>
#include <cstdlib>
#include <set>

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

void parse_dim_range(const std::string &text, std::map<std::string, DimRange> &ranges) {
    auto eq = text.find('='), dots = text.find("..");
    auto bad = [&] {
        return UserError(str_cat("bad --dim '", text, "'; expected NAME=LO..HI with 1 <= LO <= HI, e.g. --dim H=32..2048"));
    };
    if (eq == std::string::npos || eq == 0 || dots == std::string::npos || dots < eq) throw bad();
    auto number = [&](const std::string &d) {
        char *end = nullptr;
        errno = 0;
        long long v = std::strtoll(d.c_str(), &end, 10);
        if (d.empty() || *end != '\0' || v < 1 || errno != 0 || v > (1LL << 30)) throw bad();
        return (int64_t)v;
    };
    DimRange r{number(text.substr(eq + 1, dots - eq - 1)), number(text.substr(dots + 2))};
    if (r.lo > r.hi) throw bad();
    ranges[text.substr(0, eq)] = r;
}

std::vector<std::vector<std::string>> input_sets(const std::vector<std::string> &flags) {
    std::vector<std::vector<std::string>> sets;
    std::set<std::string> named;
    for (const auto &f : flags) {
        std::string name = f.substr(0, f.find('='));
        if (sets.empty() || named.count(name)) {
            sets.emplace_back();
            named.clear();
        }
        named.insert(name);
        sets.back().push_back(f);
    }
    return sets;
}

}  // namespace loom
