#include "measure/tuning.h"

#include <algorithm>
#include <cstdio>

#include "schedule/schedule_apply.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

namespace loom {

namespace {

std::string first_line(const std::string &s, size_t max = 140) {
    std::string l = s.substr(0, s.find('\n'));
    return l.size() > max ? l.substr(0, max - 3) + "..." : l;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

TuneResult tune_schedule(const Graph &g, const std::vector<ScheduleCandidate> &candidates,
                         const TuneOptions &o, const MachineModel &machine) {
    internal_check(o.count >= 1 && o.rounds >= 1, "tune_schedule: count and rounds must be >= 1");
    TuneResult r;
    r.of = candidates.size();
    size_t n = std::min(candidates.size(), (size_t)o.count);
    for (size_t k = 0; k < n; k++) {
        TunedCandidate t;
        t.index = k;
        t.label = candidates[k].label;
        t.est_ms = candidates[k].est_ms;
        t.ok = true;
        r.measured.push_back(t);
    }
    // Rounds interleave the candidates (c1 c2 … cN, again), so that a slow spell of a shared
    // machine hits them alike; a candidate that failed is not compiled again.
    for (int round = 0; round < o.rounds; round++) {
        std::vector<BenchVariant> variants;
        std::vector<size_t> owner;
        for (size_t k = 0; k < n; k++) {
            if (!r.measured[k].ok) continue;
            const Schedule *s = &candidates[k].schedule;
            variants.push_back({str_cat("candidate ", k + 1, " (", candidates[k].label, ")"), "auto",
                                [s](LoweredPipeline &p, const Halide::Target &target) {
                                    apply_schedule(*s, p, target);
                                    return print_schedule(*s);
                                }});
            owner.push_back(k);
        }
        if (variants.empty()) break;
        BenchOptions bo = o.bench;
        if (bo.progress) {
            auto up = bo.progress;
            bo.progress = [up, round, &o](const std::string &line) {
                up(str_cat("round ", round + 1, "/", o.rounds, ": ", line));
            };
        }
        BenchReport rep = run_benchmark(g, variants, bo, machine);
        for (size_t v = 0; v < rep.rows.size(); v++) {
            const BenchRow &row = rep.rows[v];
            TunedCandidate &t = r.measured[owner[v]];
            if (!row.ok) {
                t.ok = false;
                t.error = "failed to " + row.stage + ": " + first_line(row.error);
                continue;
            }
            t.round_ms.push_back(row.median_ms);
            t.rel_error = std::max(t.rel_error, row.rel_error);
        }
    }
    for (auto &t : r.measured) {
        if (!t.ok) continue;
        t.median_ms = median(t.round_ms);
        if (r.best < 0 || t.median_ms < r.measured[r.best].median_ms) r.best = (int)(&t - r.measured.data());
    }
    internal_check(r.best >= 0, "tune: none of the ", n, " candidates compiled and validated; the first failed with: ",
                   r.measured.empty() ? std::string("(none)") : r.measured[0].error);
    r.schedule = candidates[r.measured[r.best].index].schedule;
    for (const auto &line : tuning_table(r, o)) r.schedule.header_comments.push_back(line);
    return r;
}

std::vector<std::string> tuning_table(const TuneResult &r, const TuneOptions &o) {
    std::vector<std::string> out;
    size_t valid = 0;
    for (const auto &t : r.measured) valid += t.ok;
    out.push_back(str_cat("tuned (loom autoschedule --tune ", o.count, "): ", r.measured.size(), " of ", r.of,
                          " candidates compiled, validated (", valid, " ok) and timed; JIT, median of warm runs in ",
                          o.rounds, " interleaved rounds, random inputs seed ", o.bench.seed,
                          "; the fastest is kept"));
    out.push_back("   #   est ms  measured ms  candidate");
    char buf[256];
    for (size_t q = 0; q < r.measured.size(); q++) {
        const TunedCandidate &t = r.measured[q];
        std::string tail = t.label;
        if (!t.ok) tail += ": skipped, " + t.error;
        else if ((int)q == r.best) tail += "  <- kept";
        if (t.ok) std::snprintf(buf, sizeof buf, "%4zu %8.3f %12.3f  ", t.index + 1, t.est_ms, t.median_ms);
        else std::snprintf(buf, sizeof buf, "%4zu %8.3f %12s  ", t.index + 1, t.est_ms, "-");
        out.push_back(buf + tail);
    }
    return out;
}

}  // namespace loom
