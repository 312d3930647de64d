/// \file
/// Helpers shared by the tests: compare outputs with the reference, paths of fixtures.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "graph/tensor.h"

namespace loom::testing {

/// Path of a file under tests/data.
std::string data_path(const std::string &rel);
/// Path of the built `loom` binary.
std::string loom_binary();

/// Result of comparing an output with a reference.
struct Comparison {
    double rel_error = 0;   ///< ‖out − ref‖ / ‖ref‖ (‖out‖ when ref is all zero)
    double max_abs = 0;     ///< max |out − ref|
    int64_t worst = -1;     ///< flat index of the largest error
    bool any_nan = false;   ///< out has NaN/Inf where ref has none
    bool shape_ok = true;
};
/// Compares \p out with \p ref element by element in double.
Comparison compare(const Tensor &out, const Tensor &ref);
/// gtest assertion: shapes equal, no NaN, rel error < \p rel_tol, max abs < \p abs_tol.
::testing::AssertionResult close(const Tensor &out, const Tensor &ref, double rel_tol = 1e-5,
                                 double abs_tol = 1e-3);

/// A float value no correct kernel writes (a signalling pattern): used to poison outputs.
constexpr float kPoison = -7.77e33f;
/// Fills a tensor with kPoison (floats) or a large sentinel (ints).
void poison(Tensor &t);

/// Runs a shell command, returning its exit code and capturing stdout+stderr into \p output.
int run_command(const std::string &cmd, std::string &output);

/// How many times \p what occurs in \p text (a PTX instruction, a schedule call).
size_t count_of(const std::string &text, const std::string &what);

}  // namespace loom::testing
