// Kernel profiles (measure/profile.h): Halide's profiler reports are read exactly, Func times add
// up into the kernel that computes them, a real profile (Halide's JIT and Loom's streaming-store
// JIT) finds time in the model's kernels, and the command line explains its misuse.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "autoschedule/autoschedule.h"
#include "codegen/jit.h"
#include "graph/passes.h"
#include "measure/profile.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::GraphBuilder;

// x [rows, cols] -> Softmax (Funcs sm_max, sm_exp, sm_sum, sm) -> Tanh (th), the graph output.
Graph softmax_tanh(int64_t rows, int64_t cols) {
    GraphBuilder b;
    std::string x = b.input("x", {rows, cols});
    std::string s = b.node("Softmax", {x}, {rows, cols}, {{"axis", int64_t(1)}}, DType::F32, "sm");
    b.out("Tanh", {s}, {rows, cols}, {}, DType::F32, "th");
    prepare_graph(b.g);
    return b.g;
}

// Two pipelines' reports as Halide 14 prints them, with a line of the pipeline's own output between.
const char *kReports =
    "sm\n"
    " total time: 2.500000 ms  samples: 3  runs: 1  time/run: 2.500000 ms\n"
    " heap allocations: 1  peak heap usage: 1024 bytes\n"
    "  halide_malloc:         0.100ms   (4%)    \n"
    "  halide_free:           0.000ms   (0%)    \n"
    "  sm_max:                0.400ms  (16%)    threads: 1.000\n"
    "  sm: 2.000ms(80%)threads: 2.000  peak: 1024 num: 1 avg: 1024\n"
    "a print from the pipeline: 12.5ms\n"
    "th\n"
    " total time: 1.250000 ms  samples: 1  runs: 1  time/run: 1.250000 ms\n"
    "  th_out$2:              1.250ms (100%)    threads: 2.000\n";

TEST(Profile, ReadsHalideReports) {
    ProfilerTotals t;
    t.add_reports(kReports);
    t.add_reports(kReports);  // reports add up
    EXPECT_DOUBLE_EQ(t.total_ms, 7.5);
    EXPECT_EQ(t.samples, 8);
    EXPECT_DOUBLE_EQ(t.func_ms.at("sm"), 4.0);
    EXPECT_DOUBLE_EQ(t.func_ms.at("sm_max"), 0.8);
    EXPECT_DOUBLE_EQ(t.func_ms.at("halide_malloc"), 0.2);
    EXPECT_DOUBLE_EQ(t.func_ms.at("th_out$2"), 2.5);
    EXPECT_EQ(t.func_ms.count("a print from the pipeline"), 0u);
    EXPECT_EQ(t.func_ms.size(), 5u);  // halide_free too, at 0
}

// A Func computed at another's rows counts in that one's kernel; the runtime's entries and names
// outside the Func graph count as the runtime's (root ""); kernels and their Funcs slowest first.
TEST(Profile, AddsFuncsUpIntoTheirKernels) {
    Graph g = softmax_tanh(64, 256);
    LoweredPipeline lp = lower_graph(g);
    Schedule s = parse_schedule("sm.compute_root();\n"
                                "sm_max.compute_at(sm, i);\n"
                                "sm_sum.compute_at(sm, i);\n"
                                "th.compute_root();\n");
    apply_schedule(s, lp, host_target());
    ProfilerTotals t;
    t.func_ms = {{"sm", 2.0}, {"sm_max", 1.0}, {"sm_sum", 1.5}, {"th", 3.0}, {"halide_malloc", 0.5},
                 {"halide_free", 0.0}};
    t.total_ms = 8;
    t.samples = 8;
    ModelProfile p = attribute_to_kernels(lp, t, 2);
    EXPECT_EQ(p.runs, 2);
    EXPECT_DOUBLE_EQ(p.ms_per_run, 4.0);
    ASSERT_EQ(p.kernels.size(), 3u);
    EXPECT_EQ(p.kernels[0].root, "sm");
    EXPECT_DOUBLE_EQ(p.kernels[0].ms, 2.25);
    ASSERT_EQ(p.kernels[0].funcs.size(), 3u);
    EXPECT_EQ(p.kernels[0].funcs[0].func, "sm");
    EXPECT_EQ(p.kernels[0].funcs[1].func, "sm_sum");
    EXPECT_EQ(p.kernels[0].funcs[2].func, "sm_max");
    EXPECT_EQ(p.kernels[0].nodes, std::vector<std::string>{"sm"});
    EXPECT_EQ(p.kernels[1].root, "th");
    EXPECT_DOUBLE_EQ(p.kernels[1].ms, 1.5);
    EXPECT_EQ(p.kernels[1].nodes, std::vector<std::string>{"th"});
    EXPECT_EQ(p.kernels[2].root, "");
    EXPECT_DOUBLE_EQ(p.kernels[2].ms, 0.25);

    std::string text = format_profile(p, "hand");
    EXPECT_NE(text.find("profile of hand: 3 kernels, 2 runs, 8 samples"), std::string::npos) << text;
    EXPECT_NE(text.find("  2.250   56.2%  56.2%  sm\n"), std::string::npos) << text;
    EXPECT_NE(text.find("(Halide runtime: malloc/free)"), std::string::npos) << text;
    EXPECT_NE(text.find("the Funcs' split inside a kernel is approximate"), std::string::npos) << text;
}

// Times per LoweredFunc: wrappers and rfactor intermediates count for the Func they stand for,
// the runtime's entries for none.
TEST(Profile, TimesMapBackToLoweredFuncs) {
    Graph g = softmax_tanh(64, 256);
    LoweredPipeline lp = lower_graph(g);
    ModelProfile p;
    p.kernels = {KernelTime{"th", {"th"}, {{"th_global_wrapper$0", 1.0}, {"th", 0.5}, {"sm_max_intm$1", 0.25},
                                            {"sm_sum_intm", 0.125}, {"sm_in_th$2", 2.0}}, 3.875},
                 KernelTime{"", {}, {{"halide_malloc", 0.5}}, 0.5}};
    std::map<std::string, double> ms = ms_by_lowered_func(lp, p);
    EXPECT_EQ(ms.size(), 4u);
    EXPECT_DOUBLE_EQ(ms["th"], 1.5);
    EXPECT_DOUBLE_EQ(ms["sm_max"], 0.25);
    EXPECT_DOUBLE_EQ(ms["sm_sum"], 0.125);
    EXPECT_DOUBLE_EQ(ms["sm"], 2.0);
}

// `loom autoschedule --profile` prints the report with each kernel's measured time beside its
// estimate, and how far the estimates were off.
TEST(Profile, AutoscheduleReportSetsMeasuredBesideEstimated) {
    std::string out;
    int rc = loom::testing::run_command(loom::testing::loom_binary() + " autoschedule " +
                                            loom::testing::data_path("softmax_rows.onnx") + " --profile",
                                        out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("  measured: "), std::string::npos) << out;
    EXPECT_NE(out.find("(estimate / measured "), std::string::npos) << out;
    EXPECT_NE(out.find("sampled kernels estimated within 2x"), std::string::npos) << out;
}

/// Kernel roots of a scheduled pipeline, as compute levels say (every non-inlined Func at root).
std::set<std::string> roots_of(const LoweredPipeline &lp) {
    std::set<std::string> roots{""};
    for (const auto &[func, root] : kernel_roots(lp))
        if (!root.empty()) roots.insert(root);
    return roots;
}

// Eager: one kernel per Func. A real profile finds samples, runs at least 3 times, and every
// kernel it names is one of the schedule's roots; its kernels add up to the profiler's total.
TEST(Profile, ProfilesEveryKernelOfARealRun) {
    Graph g = softmax_tanh(2048, 1024);
    LoweredPipeline lp = lower_graph(g);
    apply_schedule(eager_schedule(lp, host_target()), lp, host_target());
    std::set<std::string> roots = roots_of(lp);
    ModelProfile p = profile_model(lp, host_target(), {random_inputs(g, 1), random_inputs(g, 2)}, 400);
    EXPECT_GE(p.runs, 3);
    ASSERT_GT(p.samples, 0) << "runs " << p.runs << ", " << p.ms_per_run << " ms each";
    ASSERT_FALSE(p.kernels.empty());
    double sum = 0;
    for (const auto &k : p.kernels) {
        EXPECT_TRUE(roots.count(k.root)) << k.root;
        EXPECT_GT(k.ms, 0) << k.root;
        sum += k.ms;
    }
    EXPECT_NEAR(sum, p.ms_per_run, 0.02 * p.ms_per_run);
    for (size_t k = 1; k < p.kernels.size(); k++) EXPECT_GE(p.kernels[k - 1].ms, p.kernels[k].ms);
}

// A pipeline with streaming stores runs on Loom's own JIT (StreamingJit), which must report to
// the profiler as Halide's JIT does: its kernel has time.
TEST(Profile, ProfilesAStreamingStorePipeline) {
    Graph g = softmax_tanh(2048, 1024);
    LoweredPipeline lp = lower_graph(g);
    MachineModel m = reference_machine(host_target(), 2);
    m.llc_bytes = 256 << 10;  // the 8 MiB output then outgrows the cache: its stores stream
    Schedule s = auto_schedule(lp, host_target(), m);
    ASSERT_NE(print_schedule(s).find(".stream_stores()"), std::string::npos) << print_schedule(s);
    apply_schedule(s, lp, host_target());
    ModelProfile p = profile_model(lp, host_target(), {random_inputs(g, 1), random_inputs(g, 2)}, 400);
    ASSERT_GT(p.samples, 0);
    ASSERT_FALSE(p.kernels.empty());
    EXPECT_EQ(p.kernels[0].root, "th") << format_profile(p, "auto");
    EXPECT_GT(p.kernels[0].ms, 0.5 * p.ms_per_run) << format_profile(p, "auto");
}

TEST(Profile, GpuTargetIsAUserError) {
    Graph g = softmax_tanh(64, 256);
    LoweredPipeline lp = lower_graph(g);
    try {
        profile_model(lp, Halide::Target("host-cuda"), {random_inputs(g, 1)}, 10);
        FAIL() << "no error";
    } catch (const UserError &e) {
        std::string m = e.what();
        EXPECT_NE(m.find("host code only"), std::string::npos) << m;
        EXPECT_NE(m.find("nsys"), std::string::npos) << m;
    }
}

TEST(Profile, RunProfileNeedsASchedule) {
    std::string out;
    int rc = loom::testing::run_command(
        loom::testing::loom_binary() + " run " + loom::testing::data_path("mlp.onnx") + " --profile", out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--profile"), std::string::npos) << out;
    EXPECT_NE(out.find("--auto"), std::string::npos) << out;
}

// `loom run --profile` on a model compiled for every size: one compile with the profiler, a
// profile per --input size (the plan made at the first size, profiled where it runs); with a
// second plan (--small-size-plan) it is refused by name.
TEST(Profile, RunProfilesACompileForEverySizeAtEachSize) {
    std::string out;
    const std::string run = loom::testing::loom_binary() + " run " + loom::testing::data_path("dynamic_mlp.onnx") +
                            " --auto --input x=16x64 --input x=1x64 --check --profile";
    int rc = loom::testing::run_command(run, out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("compiled once with schedule 'auto'"), std::string::npos) << out;
    EXPECT_EQ(loom::testing::count_of(out, "profile of auto compiled for every size, at "), 2u) << out;
    EXPECT_NE(out.find("profile of auto compiled for every size, at x=16x64:"), std::string::npos) << out;
    EXPECT_NE(out.find("profile of auto compiled for every size, at x=1x64:"), std::string::npos) << out;
    EXPECT_LT(out.find("at x=16x64:"), out.find("at x=1x64:")) << out;
    rc = loom::testing::run_command(run + " --small-size-plan", out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--small-size-plan"), std::string::npos) << out;
    EXPECT_NE(out.find("drop one of them"), std::string::npos) << out;
}

// `loom bench --profile` prints a profile per schedule after the table, and into the JSON.
TEST(Profile, BenchPrintsAProfilePerSchedule) {
    std::string out;
    std::string json = (std::filesystem::temp_directory_path() / ("loom_profile_" + std::to_string(getpid()) + ".json")).string();
    int rc = loom::testing::run_command(loom::testing::loom_binary() + " bench " +
                                            loom::testing::data_path("softmax_rows.onnx") +
                                            " --eager --auto --budget-ms 200 --profile --json " + json,
                                        out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("profile of eager:"), std::string::npos) << out;
    EXPECT_NE(out.find("profile of auto:"), std::string::npos) << out;
    std::ifstream f(json);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(loom::testing::count_of(text, "\"profile\": {\"runs\": "), 2u) << text;
    std::filesystem::remove(json);
}

// An artifact built for a `-profile` target (`loom compile --target host-profile`) carries Halide's
// profiler: `loom_run` checks it as usual, and the runtime prints its report, Func by Func, at exit.
TEST(Profile, ProfiledHostArtifactReportsAtExit) {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("loom_profile_art_" + std::to_string(getpid()));
    fs::remove_all(dir);
    std::string out;
    const std::string loom = loom::testing::loom_binary();
    int rc = loom::testing::run_command(loom + " compile " + loom::testing::data_path("softmax_rows.onnx") +
                                            " --target host-profile --auto -o " + dir.string(),
                                        out);
    ASSERT_EQ(rc, 0) << out;
    fs::path runner = fs::path(loom).parent_path() / "loom_run";
    ASSERT_TRUE(fs::exists(runner)) << runner;
    rc = loom::testing::run_command(runner.string() + " " + dir.string() + " --mode host --reps 20 --warmup 1", out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("ok=1"), std::string::npos) << out;
    EXPECT_NE(out.find(" total time: "), std::string::npos) << out;
    EXPECT_NE(out.find("  softmax"), std::string::npos) << out;
    fs::remove_all(dir);
}

}  // namespace
}  // namespace loom
