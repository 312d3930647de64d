// `loom autoschedule --tune N`: the cost model's candidates are distinct, ranked by estimate (the
// model's choice first) and deterministic; tuning skips a candidate that fails and keeps the
// fastest; the file it writes is an ordinary schedule that parses and matches the reference; bad
// --tune values are user errors naming the flag and the fix.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "autoschedule/candidates.h"
#include "codegen/jit.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/passes.h"
#include "measure/tuning.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;
using loom::testing::data_path;
using loom::testing::loom_binary;
using loom::testing::run_command;

/// The model the host's own candidates are planned for (what the JIT runs here); the ranking is
/// asserted on the fixed machines of both x86 levels.
MachineModel host_machine() { return reference_machine(host_target(), 2); }

Graph fixture(const std::string &name) {
    Graph g = import_onnx(data_path(name + ".onnx"));
    prepare_graph(g);
    return g;
}

std::string without_comments(const Schedule &s) {
    Schedule bare;
    for (ScheduleStatement st : s.statements) {
        st.comments.clear();
        bare.statements.push_back(st);
    }
    return print_schedule(bare);
}

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Tune, CandidatesAreDistinctRankedAndDeterministic) {
    const std::vector<FixedMachine> levels = {machines::avx2_2core(), machines::avx512_2core()};
    for (const char *name : {"mlp", "transformer", "layernorm_rows"}) {
        for (const FixedMachine &fm : levels) {
            SCOPED_TRACE(str_cat(name, " on ", fm.name));
            Graph g = fixture(name);
            LoweredPipeline p = lower_graph(g);
            auto a = schedule_candidates(p, fm.target, fm.model);
            ASSERT_GE(a.size(), 2u);
            // The first is the model's choice: byte for byte what `loom autoschedule` writes.
            EXPECT_EQ(a[0].knobs, ScheduleKnobs{});
            EXPECT_EQ(print_schedule(a[0].schedule), print_schedule(auto_schedule(p, fm.target, fm.model)));
            std::set<std::string> seen;
            for (size_t k = 0; k < a.size(); k++) {
                EXPECT_TRUE(seen.insert(without_comments(a[k].schedule)).second) << "duplicate: " << a[k].label;
                EXPECT_GT(a[k].est_ms, 0) << a[k].label;
                EXPECT_FALSE(a[k].label.empty());
                if (k >= 2) {
                    EXPECT_LE(a[k - 1].est_ms, a[k].est_ms) << a[k - 1].label << " vs " << a[k].label;
                }
            }
            LoweredPipeline p2 = lower_graph(g);
            auto b = schedule_candidates(p2, fm.target, fm.model);
            ASSERT_EQ(a.size(), b.size());
            for (size_t k = 0; k < a.size(); k++) {
                EXPECT_EQ(a[k].label, b[k].label);
                EXPECT_EQ(a[k].est_ms, b[k].est_ms);
                EXPECT_EQ(print_schedule(a[k].schedule), print_schedule(b[k].schedule));
            }
            auto c = schedule_candidates(p2, fm.target, fm.model, 2);
            ASSERT_EQ(c.size(), 2u);
            EXPECT_EQ(c[1].label, a[1].label);
        }
    }
}

TEST(Tune, TopCandidatesMatchReference) {
    Graph g = fixture("transformer");
    LoweredPipeline p = lower_graph(g);
    auto cands = schedule_candidates(p, host_target(), host_machine(), 4);
    auto in = random_inputs(g, 3);
    auto ref = run_reference(g, in);
    for (const auto &c : cands) {
        LoweredPipeline lp = lower_graph(g);
        std::map<std::string, Tensor> outs;
        try {
            apply_schedule(c.schedule, lp, host_target());
            JitModel m(std::move(lp));
            outs = m.run(in);
        } catch (const std::exception &e) {
            ADD_FAILURE() << c.label << ": " << e.what();
            continue;
        }
        for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t, 1e-5)) << c.label << " " << name;
    }
}

TEST(Tune, SkipsFailingCandidateAndKeepsFastestValid) {
    Graph g = fixture("mlp");
    LoweredPipeline p = lower_graph(g);
    auto cands = schedule_candidates(p, host_target(), host_machine(), 2);
    ASSERT_EQ(cands.size(), 2u);
    ScheduleCandidate broken = cands[1];
    broken.label = "broken";
    broken.schedule = parse_schedule("no_such_func.compute_root();\n", "broken.sched");
    cands.insert(cands.begin() + 1, broken);
    TuneOptions o;
    o.count = 3;
    o.rounds = 2;
    o.bench.budget_ms = 10;
    o.bench.target = host_target();
    MachineModel machine;
    machine.cores = 2;
    machine.copy_gbps = 20;
    machine.gflops = 100;
    TuneResult r = tune_schedule(g, cands, o, machine);
    ASSERT_EQ(r.measured.size(), 3u);
    EXPECT_TRUE(r.measured[0].ok) << r.measured[0].error;
    EXPECT_FALSE(r.measured[1].ok);
    EXPECT_NE(r.measured[1].error.find("no_such_func"), std::string::npos) << r.measured[1].error;
    EXPECT_TRUE(r.measured[2].ok) << r.measured[2].error;
    ASSERT_GE(r.best, 0);
    EXPECT_NE(r.best, 1);
    for (const auto &t : r.measured)
        if (t.ok) {
            EXPECT_EQ(t.round_ms.size(), 2u);
            EXPECT_LE(r.measured[r.best].median_ms, t.median_ms);
        }
    std::string text = print_schedule(r.schedule);
    EXPECT_NE(text.find("skipped, failed to schedule"), std::string::npos) << text;
    EXPECT_NE(text.find("<- kept"), std::string::npos) << text;
    EXPECT_EQ(parse_schedule(text, "tuned.sched"), r.schedule);
}

TEST(Tune, CommandWritesAParsableScheduleThatMatchesReference) {
    namespace fs = std::filesystem;
    std::string dir = loom::testing::temp_path("tune_cli");
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string out = dir + "/mlp.sched", log;
    std::string base = loom_binary() + " autoschedule " + data_path("mlp.onnx");
    ASSERT_EQ(run_command(base + " --tune 2 --tune-budget-ms 20 -o " + out, log), 0) << log;
    std::string text = read_file(out);
    EXPECT_NE(text.find("# tuned (loom autoschedule --tune 2): 2 of "), std::string::npos) << text;
    EXPECT_NE(text.find("<- kept"), std::string::npos) << text;
    EXPECT_NE(text.find("measured ms"), std::string::npos) << text;
    Schedule s;
    ASSERT_NO_THROW(s = parse_schedule(text, out));
    Graph g = fixture("mlp");
    LoweredPipeline lp = lower_graph(g);
    apply_schedule(s, lp, host_target());
    JitModel m(std::move(lp));
    auto in = random_inputs(g, 11);
    auto outs = m.run(in);
    auto ref = run_reference(g, in);
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t, 1e-5)) << name;
    // Never overwrites without --force, and says so before timing anything.
    EXPECT_NE(run_command(base + " --tune 2 -o " + out, log), 0);
    EXPECT_NE(log.find("--force"), std::string::npos) << log;
    EXPECT_EQ(log.find("candidate"), std::string::npos) << log;
    EXPECT_EQ(read_file(out), text);
}

TEST(Tune, BadValuesAreUserErrorsNamingTheFlag) {
    std::string base = loom_binary() + " autoschedule " + data_path("mlp.onnx");
    std::string log;
    for (const char *bad : {" --tune 0", " --tune -3", " --tune=-3"}) {
        EXPECT_EQ(run_command(base + bad, log), 1) << bad << "\n" << log;
        EXPECT_NE(log.find("--tune"), std::string::npos) << log;
        EXPECT_NE(log.find("at least 1"), std::string::npos) << log;
        EXPECT_NE(log.find("try --tune 4"), std::string::npos) << log;
    }
    EXPECT_EQ(run_command(base + " --tune 2 --target cuda", log), 1) << log;
    EXPECT_NE(log.find("--tune"), std::string::npos) << log;
    EXPECT_NE(log.find("--target cuda"), std::string::npos) << log;
    EXPECT_NE(log.find("drop --tune"), std::string::npos) << log;
    EXPECT_EQ(run_command(base + " --tune 2 --tune-budget-ms 0", log), 1) << log;
    EXPECT_NE(log.find("--tune-budget-ms"), std::string::npos) << log;
    // --loop-conv-taps, --normal-stores (streaming stores off) and --nchw-conv-inputs (no
    // channels-innermost copies) are CPU cost-model choices that --tune already times.
    for (const std::string flag : {"--loop-conv-taps", "--normal-stores", "--nchw-conv-inputs"}) {
        EXPECT_EQ(run_command(base + " " + flag + " --tune 2", log), 1) << log;
        EXPECT_NE(log.find(flag + " with --tune"), std::string::npos) << log;
        EXPECT_NE(log.find("drop one of the two"), std::string::npos) << log;
        EXPECT_EQ(run_command(base + " " + flag + " --target cuda", log), 1) << log;
        EXPECT_NE(log.find(flag + " with --target cuda"), std::string::npos) << log;
        EXPECT_NE(log.find("drop it for a GPU target"), std::string::npos) << log;
    }
}

}  // namespace
}  // namespace loom
