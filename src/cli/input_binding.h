/// \file
/// The `--input` flag's value: `x=1x3x224x224` binds a whole input's shape, `batch=8` a symbolic dim
/// by name (graph/passes.h's InputBindings, which prepare_graph applies).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/passes.h"

namespace loom {

/// Parses "x=1x3x224x224" (or "batch=8") into \p b; UserError showing the expected form.
void parse_input_binding(const std::string &text, InputBindings &b);

/// Parses `--dim H=32..2048` (a symbolic dim kept open for dynamic shapes, with its range) into
/// \p ranges; UserError showing the expected form.
void parse_dim_range(const std::string &text, std::map<std::string, DimRange> &ranges);

/// Groups `--input` flags into sets of sizes, in order: a flag that names an input or dim the
/// current set already binds starts the next set (`--input x=1x3x32x32 --input x=1x3x64x64`: two
/// sets). One set, or none, for the usual single binding.
std::vector<std::vector<std::string>> input_sets(const std::vector<std::string> &flags);

}  // namespace loom
