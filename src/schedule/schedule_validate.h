/// \file
/// Checks a Schedule against a LoweredPipeline and a target before anything touches Halide
/// (house style: checks before actions). Every mistake is one UserError
/// "file:line:col: <func>.<prim>(…): what is wrong; what would be valid", with "did you mean":
/// unknown func / stage / primitive / var, wrong arity, a non-positive factor, a new var name that
/// already exists, reorder of missing or repeated vars, parallel/vectorize of a reduction var that
/// would race (unless atomic() on an associative update), compute_at/store_at at a Func that does
/// not consume it (listing the legal `consumer.{vars}` and `root`), compute_at cycles, GPU
/// primitives on a CPU target and CPU parallelism on a root Func without GPU mapping on a GPU
/// target, rfactor on a pure var or a non-associative update, bad TailStrategy / MemoryType names.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom {

/// Throws UserError at the first mistake of \p s for \p p on \p target; returns if it is legal.
/// With \p warnings, appends what is legal but likely wrong, in the same "file:line:col: call: …"
/// form: a split, tile, vectorize, unroll or parallel factor larger than its loop's extent with a
/// ShiftInwards or RoundUp tail (written or the default), which runs the loop past the data.
void validate_schedule(const Schedule &s, const LoweredPipeline &p, const Halide::Target &target,
                       std::vector<std::string> *warnings = nullptr);

/// Whether `producer.compute_at(consumer, var)` is legal, using the same checks as compute_at in
/// validate_schedule. Other Funcs are placed as \p context says (nullptr: every Func at root, the
/// default); \p var may be a var a context statement creates. On false, \p why (if given) gets the
/// reason and the legal locations.
bool can_compute_at(const LoweredPipeline &p, const std::string &producer,
                    const std::string &consumer, const std::string &var,
                    const Schedule *context = nullptr, std::string *why = nullptr);

/// The legal compute_at locations of \p producer under \p context (as in can_compute_at):
/// "consumer.{v1, v2}" entries, then "root".
std::vector<std::string> legal_compute_at_locations(const LoweredPipeline &p,
                                                    const std::string &producer,
                                                    const Schedule *context = nullptr);



}  // namespace loom
