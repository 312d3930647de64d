// The hand-written CUDA schedules (schedules/*.cuda.sched) are written for the GPU suite's sizes:
// each is checked on tests/data/gpu_suite/<workload>.onnx (bench/gpu/export_workloads.py's export,
// committed: a few KB each). No GPU in CI: it parses and round-trips, validates, applies for the
// CUDA target without a GPU-loop lint warning, and lowers to CUDA kernels.
//
// The hand-written schedules in schedules/*.cpu.sched: each parses, prints back to itself
// (parse(print(s)) == s), validates against the model it was written for, and the model compiled
// under it with the JIT matches the reference interpreter (outputs poisoned by JitModel::run).
//
// Which model a file is checked on comes from its header:
//   `# loom schedule for <path> (sha256 …) on <target>`   <path> relative to the repository;
//       bench/workloads/<w>.onnx is checked on bench/workloads/<w>.small.onnx (the same graph at
//       the CI size; those files are exported, not committed: absent → that model is skipped);
//   `# also for: <path>`                                   further models with the same Funcs;
//   `# run with: --input batch=64`                         input bindings (dynamic dims), `--input`
//       tokens as `loom run` takes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/input_binding.h"
#include "codegen/aot.h"
#include "codegen/jit.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/passes.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/gpu_loop_lint.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "schedule/schedule_validate.h"
#include "test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using loom::testing::close;

fs::path source_dir() { return fs::path(LOOM_SOURCE_DIR); }

std::vector<std::string> schedule_files() {
    std::vector<std::string> out;
    fs::path dir = source_dir() / "schedules";
    if (!fs::exists(dir)) return out;
    for (const auto &e : fs::directory_iterator(dir)) {
        std::string n = e.path().filename().string();
        if (n.size() > 10 && n.substr(n.size() - 10) == ".cpu.sched") out.push_back(n);
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// Text after \p prefix in a header comment line (trimmed), for every line that has it.
std::vector<std::string> header_values(const Schedule &s, const std::string &prefix) {
    std::vector<std::string> out;
    for (const auto &l : s.header_comments) {
        size_t p = l.find(prefix);
        if (p == std::string::npos) continue;
        std::string v = l.substr(p + prefix.size());
        v.erase(0, v.find_first_not_of(" \t"));
        v.erase(v.find_last_not_of(" \t") + 1);
        out.push_back(v);
    }
    return out;
}

/// The model files a schedule is checked on (repository-relative), CI-sized.
std::vector<std::string> models_for(const Schedule &s) {
    std::vector<std::string> out;
    auto add = [&](std::string m) {
        const std::string bench = "bench/workloads/";
        if (m.rfind(bench, 0) == 0 && m.find(".small.onnx") == std::string::npos)
            m = m.substr(0, m.size() - 5) + ".small.onnx";
        out.push_back(m);
    };
    if (!s.model.empty()) add(s.model);
    for (const auto &m : header_values(s, "also for:")) add(m);
    return out;
}

InputBindings bindings_for(const Schedule &s) {
    InputBindings b;
    for (const auto &v : header_values(s, "run with:")) {
        std::istringstream is(v);
        std::string tok;
        while (is >> tok)
            if (tok == "--input" && is >> tok) parse_input_binding(tok, b);
    }
    return b;
}

class SchedulesDir : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulesDir, ParsesRoundTripsValidatesAndMatchesReference) {
    const std::string file = (source_dir() / "schedules" / GetParam()).string();
    Schedule s;
    ASSERT_NO_THROW(s = read_schedule_file(file)) << file;

    // Round trip: the printer writes what the parser reads back to the same Schedule.
    std::string printed = print_schedule(s);
    Schedule again = parse_schedule(printed, file + " (printed)");
    EXPECT_EQ(again, s) << "printed:\n" << printed;
    EXPECT_EQ(print_schedule(again), printed);

    ASSERT_FALSE(s.model.empty()) << file << ": the header names no model";
    std::vector<std::string> models = models_for(s);
    int checked = 0;
    std::vector<std::string> missing;
    for (const auto &rel : models) {
        SCOPED_TRACE(GetParam() + " on " + rel);
        fs::path model = source_dir() / rel;
        if (!fs::exists(model)) {
            missing.push_back(rel);
            continue;
        }
        PrepareOptions opts;
        opts.bindings = bindings_for(s);
        Graph g = import_onnx(model.string());
        prepare_graph(g, opts);
        auto in = random_inputs(g, 11);
        std::map<std::string, Tensor> outs;
        try {
            LoweredPipeline lp = lower_graph(g);
            validate_schedule(s, lp, host_target());
            Schedule full = s;  // unmentioned Funcs get the default, as `loom run` does
            fill_defaults(full, lp, host_target());
            AppliedSchedule applied = apply_schedule(full, lp, host_target());
            outs = with_schedule_errors(applied, [&] {
                JitModel m(std::move(lp));
                return m.run(in);
            });
        } catch (const std::exception &e) {
            ADD_FAILURE() << e.what();
            continue;
        }
        auto ref = run_reference(g, in);
        ASSERT_EQ(outs.size(), ref.size());
        for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t, 1e-5)) << "output " << name;
        ++checked;
    }
    RecordProperty("models_checked", checked);
    if (checked == 0) {
        std::string m;
        for (const auto &x : missing) m += " " + x;
        GTEST_SKIP() << "no model file for " << GetParam() << ":" << m
                     << " (export with frontends/torch/export_workloads.py --small)";
    }
}

std::string test_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string n = info.param.substr(0, info.param.size() - 10);
    for (char &c : n)
        if (!isalnum((unsigned char)c)) c = '_';
    return n;
}

INSTANTIATE_TEST_SUITE_P(Cpu, SchedulesDir, ::testing::ValuesIn(schedule_files()), test_name);

std::vector<std::string> cuda_schedule_files() {
    std::vector<std::string> out;
    for (const auto &e : fs::directory_iterator(source_dir() / "schedules")) {
        std::string n = e.path().filename().string();
        if (n.size() > 11 && n.substr(n.size() - 11) == ".cuda.sched") out.push_back(n.substr(0, n.size() - 11));
    }
    std::sort(out.begin(), out.end());
    return out;
}

class CudaSchedulesDir : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSchedulesDir, ParsesValidatesLintCleanAndLowersForCuda) {
    const std::string file = (source_dir() / "schedules" / (GetParam() + ".cuda.sched")).string();
    Schedule s;
    ASSERT_NO_THROW(s = read_schedule_file(file)) << file;
    std::string printed = print_schedule(s);
    EXPECT_EQ(parse_schedule(printed, file + " (printed)"), s) << "printed:\n" << printed;

    fs::path model = source_dir() / "tests" / "data" / "gpu_suite" / (GetParam() + ".onnx");
    ASSERT_TRUE(fs::exists(model)) << "no model for " << file << " at " << model;
    Graph g = import_onnx(model.string());
    prepare_graph(g);
    LoweredPipeline lp = lower_graph(g);
    Halide::Target cuda = aot_target("cuda");
    ASSERT_NO_THROW(validate_schedule(s, lp, cuda)) << file;
    Schedule full = s;
    fill_defaults(full, lp, cuda);
    AppliedSchedule applied;
    ASSERT_NO_THROW(applied = apply_schedule(full, lp, cuda)) << file;
    std::vector<std::string> lint = lint_gpu_loops(applied, lp);
    EXPECT_TRUE(lint.empty()) << lint.front();
    std::vector<Halide::Argument> args(lp.inputs.begin(), lp.inputs.end());
    std::string stmt = loom::testing::temp_path(GetParam() + "_cuda.stmt");
    ASSERT_NO_THROW(lp.pipeline().compile_to_lowered_stmt(stmt, args, Halide::Text, cuda)) << file;
    std::ifstream f(stmt);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("cuda_gpu_source_kernels"), std::string::npos) << file;
    fs::remove(stmt);
}

std::string cuda_test_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string n = info.param;
    for (char &c : n)
        if (!isalnum((unsigned char)c)) c = '_';
    return n;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaSchedulesDir, ::testing::ValuesIn(cuda_schedule_files()), cuda_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SchedulesDir);

}  // namespace
}  // namespace loom
