/// \file
/// The `--input` flag's value: `x=1x3x224x224` binds a whole input's shape, `batch=8` a symbolic dim
/// by name (graph/passes.h's InputBindings, which prepare_graph applies).
#pragma once

#include <string>

#include "graph/passes.h"

namespace loom {

/// Parses "x=1x3x224x224" (or "batch=8") into \p b; UserError showing the expected form.
void parse_input_binding(const std::string &text, InputBindings &b);

}  // namespace loom
