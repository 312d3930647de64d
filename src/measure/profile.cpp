#include "measure/profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>

#include "codegen/jit.h"
#include "codegen/jit_segments.h"
#include "support/error.h"

namespace loom {

namespace {

std::string fixed(double v, int prec) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return b;
}

/// The LoweredFunc a profiled Func computes values of: itself, the output it wraps, the Func a
/// schedule's `in()` wrapper reads (Halide names those `<f>_global_wrapper$N` / `<f>_in_<g>…`), or
/// the Func an rfactor intermediate (`<f>_intm$N`) reduces for.
const LoweredFunc *func_of(const LoweredPipeline &p, std::string name) {
    if (const LoweredFunc *lf = p.find_realized(name)) return lf;
    if (auto d = name.find('$'); d != std::string::npos) name.erase(d);
    if (const LoweredFunc *lf = p.find(name)) return lf;  // a graph name that holds "_in_" stays itself
    for (const char *suffix : {"_global_wrapper", "_in_", "_intm"})
        if (auto at = name.find(suffix); at != std::string::npos) return p.find(name.substr(0, at));
    return nullptr;
}

}  // namespace

void ProfilerTotals::add_reports(const std::string &text) {
    static const std::regex total(R"(^ total time: ([0-9.]+) ms\s+samples: ([0-9]+))");
    static const std::regex func(R"(^  (\S+):\s*([0-9.]+)ms)");
    std::istringstream lines(text);
    std::smatch m;
    for (std::string line; std::getline(lines, line);) {
        if (std::regex_search(line, m, total)) {
            total_ms += std::stod(m[1]);
            samples += std::stoi(m[2]);
        } else if (std::regex_search(line, m, func)) {
            func_ms[m[1]] += std::stod(m[2]);
        }
    }
}

ModelProfile attribute_to_kernels(const LoweredPipeline &p, const ProfilerTotals &totals, int runs,
                                  double run_ms) {
    ModelProfile prof;
    prof.runs = runs;
    prof.samples = totals.samples;
    double billed = 0;  // what the Funcs were billed (the reports' totals include the same)
    for (const auto &[func, ms] : totals.func_ms) billed += std::max(0.0, ms);
    const double per_run = run_ms > 0 && billed > 0 ? run_ms / billed : 1.0 / std::max(1, runs);
    prof.ms_per_run = run_ms > 0 ? run_ms : totals.total_ms * per_run;
    std::map<std::string, std::string> roots = kernel_roots(p);
    std::map<std::string, KernelTime> kernels;
    for (const auto &[func, ms] : totals.func_ms) {
        if (ms <= 0) continue;
        // The runtime's own entries (halide_malloc, halide_free) and anything not in the Func
        // graph count as the runtime's.
        auto r = roots.find(func);
        std::string root = r == roots.end() ? "" : r->second.empty() ? func : r->second;
        KernelTime &k = kernels[root];
        k.root = root;
        k.ms += ms * per_run;
        k.funcs.push_back({func, ms * per_run});
    }
    for (auto &[root, k] : kernels) {
        std::sort(k.funcs.begin(), k.funcs.end(), [](const FuncTime &a, const FuncTime &b) {
            return a.ms != b.ms ? a.ms > b.ms : a.func < b.func;
        });
        std::set<std::string> seen;
        for (const auto &f : k.funcs)
            if (const LoweredFunc *lf = func_of(p, f.func); lf && seen.insert(lf->node).second) k.nodes.push_back(lf->node);
        // The root's own node first: it names the kernel's output.
        if (const LoweredFunc *lf = func_of(p, root); lf) {
            auto at = std::find(k.nodes.begin(), k.nodes.end(), lf->node);
            if (at == k.nodes.end()) k.nodes.insert(k.nodes.begin(), lf->node);
            else std::rotate(k.nodes.begin(), at, at + 1);
        }
        prof.kernels.push_back(std::move(k));
    }
    std::sort(prof.kernels.begin(), prof.kernels.end(), [](const KernelTime &a, const KernelTime &b) {
        return a.ms != b.ms ? a.ms > b.ms : a.root < b.root;
    });
    return prof;
}

std::map<std::string, double> ms_by_lowered_func(const LoweredPipeline &p, const ModelProfile &prof) {
    std::map<std::string, double> out;
    for (const auto &k : prof.kernels)
        for (const auto &f : k.funcs)
            if (const LoweredFunc *lf = func_of(p, f.func)) out[lf->name] += f.ms;
    return out;
}

// Halide's profiler samples the running Func once per this interval (its default).
constexpr uint64_t kSamplingIntervalMicros = 1000;

ModelProfile profile_model(LoweredPipeline p, const Halide::Target &target,
                           const std::vector<std::map<std::string, Tensor>> &inputs, double budget_ms) {
    return profile_model_sizes(std::move(p), target, {inputs}, budget_ms)[0];
}

std::vector<ModelProfile> profile_model_sizes(LoweredPipeline p, const Halide::Target &target,
                                              const std::vector<std::vector<std::map<std::string, Tensor>>> &sizes,
                                              double budget_ms) {
    user_check(!target.has_gpu_feature(), "--profile: Halide's sampling profiler times host code only, and ",
               target.to_string(), " runs the model on the GPU; profile a CPU target, or time GPU kernels with "
               "Nsight Systems (nsys) on the artifact");
    internal_check(!sizes.empty(), "profile_model: no sizes");
    for (const auto &inputs : sizes) internal_check(!inputs.empty(), "profile_model: no inputs");
    LoweredPipeline keep = p;  // shares the Funcs: the names and loop levels the attribution reads
    JitModel model(std::move(p), target.with_feature(Halide::Target::Profile));
    std::string reports;
    model.capture_runtime_prints(&reports);
    std::vector<ModelProfile> out;
    using Clock = std::chrono::steady_clock;
    uint64_t lcg = 0x9E3779B97F4A7C15ull;  // a fixed seed: the same pauses every time
    for (const auto &inputs : sizes) {
        ProfilerTotals totals;
        model.time_run(inputs[0]);  // warm-up: page faults, the thread pool, the profiler thread, this size's scratch
        reports.clear();
        auto t0 = Clock::now();
        int runs = 0;
        std::vector<double> times;
        while (runs < 3 || (totals.samples < kMinProfileSamples &&
                            std::chrono::duration<double, std::milli>(Clock::now() - t0).count() < budget_ms)) {
            // A pause of up to one sampling interval, so that the samples fall anywhere in a run.
            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            auto until = Clock::now() + std::chrono::microseconds((lcg >> 33) % kSamplingIntervalMicros);
            while (Clock::now() < until) {
            }
            times.push_back(model.time_run(inputs[runs % inputs.size()]));
            totals.add_reports(reports);
            reports.clear();
            runs++;
        }
        std::sort(times.begin(), times.end());
        out.push_back(attribute_to_kernels(keep, totals, runs, times[times.size() / 2]));
    }
    return out;
}

std::string format_profile(const ModelProfile &prof, const std::string &label, double min_share) {
    std::ostringstream o;
    double total = 0;
    for (const auto &k : prof.kernels) total += k.ms;
    o << "profile of " << label << ": " << prof.kernels.size() << (prof.kernels.size() == 1 ? " kernel, " : " kernels, ")
      << prof.runs << " runs, " << prof.samples << " samples (Halide's sampling profiler; a run took " << fixed(prof.ms_per_run, 3)
      << " ms while profiled, median)\n";
    if (total <= 0) return o.str() + "  no samples: the runs were shorter than the profiler's interval\n";
    o << "  " << "     ms   share    cum  kernel (graph nodes)\n";
    double cum = 0, rest_ms = 0;
    int rest = 0;
    for (const auto &k : prof.kernels) {
        double share = 100 * k.ms / total;
        if (share < min_share) {
            rest_ms += k.ms;
            rest++;
            continue;
        }
        cum += share;
        std::string nodes;
        for (size_t i = 0; i < k.nodes.size(); i++) nodes += (i ? ", " : "") + k.nodes[i];
        std::string name = k.root.empty() ? "(Halide runtime: malloc/free)" : k.root;
        char line[96];
        std::snprintf(line, sizeof line, "  %7.3f %6.1f%% %5.1f%%  ", k.ms, share, cum);
        o << line << name << (nodes.empty() || nodes == k.root ? "" : " (" + nodes + ")") << "\n";
        if (k.funcs.size() > 1)
            for (const auto &f : k.funcs) {
                if (100 * f.ms / total < min_share / 2) continue;
                std::snprintf(line, sizeof line, "  %7.3f %6.1f%%           ", f.ms, 100 * f.ms / total);
                o << line << "  " << f.func << "\n";
            }
    }
    if (rest > 0) {
        char line[96];
        std::snprintf(line, sizeof line, "  %7.3f %6.1f%% %5.1f%%  ", rest_ms, 100 * rest_ms / total, 100.0);
        o << line << rest << " kernels under " << fixed(min_share, 1) << "% each\n";
    }
    bool split = false;
    for (const auto &k : prof.kernels) split |= k.funcs.size() > 1 && 100 * k.ms / total >= min_share;
    if (split)
        o << "  (the Funcs' split inside a kernel is approximate where its loop runs in parallel: Halide 14's "
             "profiler keeps one current Func for all threads)\n";
    return o.str();
}

}  // namespace loom
