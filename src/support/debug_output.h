/// \file
/// Whether Loom's diagnostic output to stderr is on: the environment variable LOOM_DEBUG set to
/// anything but "0" (the graph after each pass, the cuts of a segmented pipeline, the scheduling
/// steps, the in-place verdicts of a training step).
#pragma once

#include <cstdlib>
#include <string>

namespace loom {

/// True when LOOM_DEBUG is set and is not "0".
inline bool debug_output() {
    const char *e = std::getenv("LOOM_DEBUG");
    return e && std::string(e) != "0";
}

}  // namespace loom
