/// \file
/// `loom autoschedule --tune N`: the first N candidates of the cost model (autoschedule/
/// candidates.h: the model's choice, then by estimate) are JIT-compiled, validated against the
/// reference interpreter and timed by the benchmark engine (benchmark.h: warm-up, then the median
/// of repeated runs on random inputs from a fixed seed); the fastest valid one is kept. A candidate
/// that fails to compile or validate is skipped and its row says why.
///
/// On a shared, noisy machine one timing can be off by 2x, so each candidate is timed in several
/// rounds, interleaved (c1 c2 … cN c1 c2 …), and ranked by the median of its round medians.
/// The kept schedule is an ordinary schedule: its header comments record that it was tuned, how
/// many candidates were timed and the table of their estimates and measured times.
#pragma once

#include <string>
#include <vector>

#include "autoschedule/candidates.h"
#include "measure/benchmark.h"

namespace loom {

/// How to tune.
struct TuneOptions {
    int count = 2;       ///< candidates to time: the first \p count of the list (all when fewer)
    int rounds = 3;      ///< interleaved timing rounds per candidate
    BenchOptions bench;  ///< per candidate and round: budget_ms, warm-up, seed, tolerance, target
};

/// The measurement of one candidate.
struct TunedCandidate {
    size_t index = 0;        ///< position in the candidate list (0 = the model's choice)
    std::string label;       ///< ScheduleCandidate::label
    double est_ms = 0;       ///< the model's estimate
    bool ok = false;         ///< compiled and validated in every round
    std::string error;       ///< why not ok (stage and message, one line)
    double median_ms = 0;    ///< median over rounds of each round's median run time
    std::vector<double> round_ms;  ///< each round's median
    double rel_error = 0;    ///< worst validation error against the reference
};

/// The outcome of tuning.
struct TuneResult {
    std::vector<TunedCandidate> measured;  ///< in candidate order
    int best = -1;                         ///< index into measured of the fastest valid one
    size_t of = 0;                         ///< how many candidates the model offered
    Schedule schedule;                     ///< the fastest, its header noting the tuning table
};

/// Times the first \p o.count of \p candidates (made for a lowering of \p g, a prepared graph) on
/// \p machine and returns the fastest. InternalError when none validates (the model's choice
/// always should).
TuneResult tune_schedule(const Graph &g, const std::vector<ScheduleCandidate> &candidates,
                         const TuneOptions &o, const MachineModel &machine);

/// The header comment lines tune_schedule adds: a summary line, then one table row per candidate.
std::vector<std::string> tuning_table(const TuneResult &r, const TuneOptions &o);

}  // namespace loom
