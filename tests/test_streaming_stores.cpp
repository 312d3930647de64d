// Streaming (non-temporal) stores, codegen/streaming_stores.h: the object code has them exactly
// where asked and the alignment allows, with an sfence; the cost model streams large outputs only;
// streamed models match the reference through the JIT (whole and cut into pipelines) and through a
// host artifact (a misaligned output pointer included), outputs poisoned before each run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <cstring>
#include <regex>

#include "autoschedule/autoschedule.h"
#include "autoschedule/candidates.h"
#include "codegen/aot.h"
#include "codegen/jit.h"
#include "codegen/streaming_stores.h"
#include "graph/passes.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_printer.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using loom::testing::close;
using loom::testing::GraphBuilder;
using loom::testing::count_of;

fs::path scratch(const std::string &name) {
    fs::path p = fs::temp_directory_path() / ("loom_test_stream_" + std::to_string(getpid())) / name;
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

/// How often \p re matches the disassembly of object \p obj.
int count_in_disassembly(const fs::path &obj, const std::string &re) {
    std::string text;
    EXPECT_EQ(loom::testing::run_command("objdump -d --no-show-raw-insn " + obj.string(), text), 0) << text;
    std::regex r(re);
    return (int)std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator());
}

// y(x, i) = in(x, i) * 2 + 1 over 4096 x 8, vectorized by a whole native vector. (Halide makes Func
// names unique: the second "y" is "y$1", and its buffer is named so.)
struct Pointwise {
    Halide::ImageParam in{Halide::Float(32), 2, "in"};
    Halide::Func y{"y"};
    Pointwise(bool aligned) {
        Halide::Var x("x"), i("i");
        y(x, i) = in(x, i) * 2.0f + 1.0f;
        const int lanes = host_target().natural_vector_size(Halide::Float(32));
        y.vectorize(x, lanes).parallel(i);
        y.output_buffer().dim(0).set_bounds(0, 4096);
        y.output_buffer().dim(1).set_stride(4096);
        if (aligned) y.output_buffer().set_host_alignment(lanes * 4);
    }
};

TEST(StreamingStores, ObjectHasThemExactlyWhereAlignedWithAFence) {
    fs::path dir = scratch("object");
    const Halide::Target t = host_target().with_feature(Halide::Target::NoRuntime);
    {
        Pointwise p(true);
        StreamingStoreMarks m = compile_streaming_object(Halide::Pipeline(p.y), {p.in}, "streamed", t,
                                                         (dir / "a.o").string(), (dir / "a.h").string(), {p.y.name()});
        EXPECT_GT(m.marked, 0);
        EXPECT_EQ(m.unaligned, 0);
        EXPECT_GE(m.fenced, 1);  // the parallel loop's task
        EXPECT_GT(count_in_disassembly(dir / "a.o", "\\bv?movntps\\b"), 0);
        EXPECT_GT(count_in_disassembly(dir / "a.o", "\\bsfence\\b"), 0);
        EXPECT_TRUE(fs::exists(dir / "a.h"));
    }
    {
        // The same Func without a declared alignment: Halide cannot prove a vector aligned, so the
        // stores stay normal (as eight scalar movnti each they would be slower).
        Pointwise p(false);
        StreamingStoreMarks m = compile_streaming_object(Halide::Pipeline(p.y), {p.in}, "unaligned", t,
                                                         (dir / "b.o").string(), "", {p.y.name()});
        EXPECT_EQ(m.marked, 0);
        EXPECT_GT(m.unaligned, 0);
        EXPECT_EQ(count_in_disassembly(dir / "b.o", "\\bv?movnt(ps|i)\\b"), 0);
    }
    {
        // Another buffer's name marks nothing.
        Pointwise p(true);
        StreamingStoreMarks m = compile_streaming_object(Halide::Pipeline(p.y), {p.in}, "other", t,
                                                         (dir / "c.o").string(), "", {"z"});
        EXPECT_EQ(m.marked + m.unaligned + m.fenced, 0);
        EXPECT_EQ(count_in_disassembly(dir / "c.o", "\\bv?movntps\\b|\\bsfence\\b"), 0);
    }
    fs::remove_all(dir.parent_path());
}


/// The model the host's own schedules are planned for (its vector width, fixed cores and caches)
/// with a last-level cache of \p llc bytes: what the JIT runs here.
MachineModel machine_with_llc(int64_t llc) {
    MachineModel m = reference_machine(host_target(), 2);
    m.llc_bytes = llc;
    return m;
}

/// The fixed machine \p fm with a last-level cache of \p llc bytes: decisions asserted on it hold
/// on every host.
FixedMachine fixed_with_llc(FixedMachine fm, int64_t llc) {
    fm.model.llc_bytes = llc;
    return fm;
}

/// The schedule the cost model writes for \p g on \p fm, for its own target (nothing compiled).
std::string planned(const Graph &g, const FixedMachine &fm, const ScheduleKnobs &knobs = {}) {
    LoweredPipeline lp = lower_graph(g);
    return print_schedule(auto_schedule_with_plan(lp, fm.target, fm.model, knobs).schedule);
}

/// Auto-schedules \p g for \p m, runs it with the JIT (in at most \p pipelines Pipelines, 0: the
/// default) on random inputs and compares every output with the reference; returns the schedule.
std::string check_streamed(const Graph &g, const MachineModel &m, int pipelines = 0, int *segments = nullptr) {
    LoweredPipeline lp = lower_graph(g);
    Schedule s = auto_schedule(lp, host_target(), m);
    std::string text = print_schedule(s);
    apply_schedule(s, lp, host_target());
    JitModel jit(lp, host_target(), pipelines);
    if (segments) *segments = jit.segments();
    EXPECT_EQ(jit.streamed_stores() > 0, text.find(".stream_stores()") != std::string::npos) << text;
    auto in = random_inputs(g, 11);
    auto ref = run_reference(g, in);
    for (int run = 0; run < 2; run++) {  // outputs are poisoned before every run
        auto out = jit.run(in);
        for (const auto &[name, t] : ref) EXPECT_TRUE(close(out.at(name), t)) << name << "\n" << text;
    }
    return text;
}

// The cost model streams a graph output written by a pure vectorized loop when the kernel moves
// more than the LLC; not below it, not a reduction's output, not rows that are not whole vectors
// (1000-wide rows: 62.5 vectors of 16 lanes, 125 of 8). The host's own schedules match the
// reference, streamed where they say so.
TEST(StreamingStores, CostModelStreamsLargeOutputsAndTheyMatchTheReference) {
    GraphBuilder b;
    std::string x = b.input("x", {64, 1024});
    std::string g = b.random_constant("g", {1024}, 3), c = b.random_constant("c", {1024}, 4);
    b.out("LayerNormalization", {x, g, c}, {64, 1024}, {{"axis", int64_t(-1)}});
    std::string s = b.input("s", {64, 1024});
    b.out("Softmax", {s}, {64, 1024}, {{"axis", int64_t(1)}});
    std::string r = b.input("r", {64, 1024});
    b.out("ReduceSum", {r}, {64, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
    std::string o = b.input("o", {64, 1000});
    b.out("Sigmoid", {o}, {64, 1000});
    prepare_graph(b.g);
    // Each kernel moves about 0.5 MB: above a 256 KiB LLC, below a 32 MiB one.
    for (const FixedMachine &fm : {machines::avx512_2core(), machines::avx2_2core()}) {
        std::string small = planned(b.g, fixed_with_llc(fm, 256 << 10));
        // LayerNorm and Softmax, not the sum; the 1000-wide rows only where they are whole vectors.
        EXPECT_EQ(count_of(small, ".stream_stores()"), fm.model.vector_bytes == 64 ? 2u : 3u) << fm.name << "\n" << small;
        EXPECT_NE(small.find("streaming stores: the kernel moves"), std::string::npos) << fm.name << "\n" << small;
        std::string big = planned(b.g, fixed_with_llc(fm, 32 << 20));
        EXPECT_EQ(big.find("stream_stores"), std::string::npos) << fm.name << "\n" << big;
    }
    std::string small = check_streamed(b.g, machine_with_llc(256 << 10));
    EXPECT_NE(small.find(".stream_stores()"), std::string::npos) << small;
    std::string big = check_streamed(b.g, machine_with_llc(32 << 20));
    EXPECT_EQ(big.find("stream_stores"), std::string::npos) << big;
}

// A row kernel with per-row statistics (LayerNorm with scale and shift) on a machine with 32
// vector registers (AVX-512) whose bytes come from past the L2s prefetches its next tile of x
// while it normalizes this one from cache, streamed or not: tiles of 4 rows, the offset 4 rows of
// vector steps, NonFaulting past the last tile. With the data inside the L2s, tiles of 8 and no
// prefetch. With AVX2's 16 registers there are no row tiles: it prefetches the next row. The
// AVX-512 plans, run on this host, match the reference.
TEST(StreamingStores, RowStatisticsKernelsPrefetchTheNextTile) {
    GraphBuilder b;
    std::string x = b.input("x", {256, 2048});  // 4 MB moved; tasks of 16 rows: room for tiles of 8
    std::string g = b.random_constant("g", {2048}, 5), c = b.random_constant("c", {2048}, 6);
    b.out("LayerNormalization", {x, g, c}, {256, 2048}, {{"axis", int64_t(-1)}});
    prepare_graph(b.g);
    const FixedMachine small_llc = fixed_with_llc(machines::avx512_2core(), 256 << 10);
    const FixedMachine big_llc = fixed_with_llc(machines::avx512_2core(), 32 << 20);
    FixedMachine big_l2 = big_llc;
    big_l2.model.l2_bytes = 64 << 20;
    const std::string prefetch = str_cat(".prefetch(x, j, j, ", 4 * 2048 / 16, ", NonFaulting)");
    for (const FixedMachine *fm : {&small_llc, &big_llc}) {
        std::string text = planned(b.g, *fm);
        EXPECT_EQ(text.find("stream_stores") != std::string::npos, fm == &small_llc) << text;
        EXPECT_NE(text.find(".split(ii, ii_tile, ii_r, 4)"), std::string::npos) << text;
        EXPECT_NE(text.find(prefetch), std::string::npos) << text;
        EXPECT_NE(text.find("the next tile of 4 rows"), std::string::npos) << text;
        check_streamed(b.g, fm->model);  // the AVX-512 plan, run on this host
    }
    std::string in_l2 = planned(b.g, big_l2);
    EXPECT_NE(in_l2.find(".split(ii, ii_tile, ii_r, 8)"), std::string::npos) << in_l2;
    EXPECT_EQ(in_l2.find("prefetch"), std::string::npos) << in_l2;
    // AVX2: a row at a time, streamed, prefetching the next row (2048 / 8 vector steps ahead).
    std::string avx2 = planned(b.g, fixed_with_llc(machines::avx2_2core(), 256 << 10));
    EXPECT_EQ(avx2.find("ii_tile"), std::string::npos) << avx2;
    EXPECT_NE(avx2.find(".stream_stores()"), std::string::npos) << avx2;
    EXPECT_NE(avx2.find(".prefetch(x, j, j, 256, NonFaulting)"), std::string::npos) << avx2;
}

// ScheduleKnobs::streaming_stores off (`loom autoschedule --normal-stores`) keeps normal stores,
// and --tune's candidates include that schedule, its estimate charged the outputs' read for
// ownership (bytes written at the copy bandwidth).
TEST(StreamingStores, KnobTurnsThemOffAndTuningTriesIt) {
    GraphBuilder b;
    std::string x = b.input("x", {64, 1024});
    std::string g = b.random_constant("g", {1024}, 7), c = b.random_constant("c", {1024}, 8);
    b.out("LayerNormalization", {x, g, c}, {64, 1024}, {{"axis", int64_t(-1)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    ScheduleKnobs off;
    off.streaming_stores = false;
    EXPECT_EQ(off.describe(), "no streaming stores");
    for (const FixedMachine &fm : {machines::avx512_2core(), machines::avx2_2core()}) {
        SCOPED_TRACE(fm.name);
        const MachineModel m = fixed_with_llc(fm, 256 << 10).model;
        std::string text = print_schedule(auto_schedule_with_plan(lp, fm.target, m, off).schedule);
        EXPECT_EQ(text.find("stream_stores"), std::string::npos) << text;
        auto cands = schedule_candidates(lp, fm.target, m);
        ASSERT_GE(cands.size(), 2u);
        EXPECT_NE(print_schedule(cands[0].schedule).find(".stream_stores()"), std::string::npos);
        const ScheduleCandidate *normal = nullptr;
        for (const auto &cand : cands)
            if (!cand.knobs.streaming_stores) normal = &cand;
        ASSERT_NE(normal, nullptr);
        EXPECT_EQ(print_schedule(normal->schedule).find("stream_stores"), std::string::npos);
        const double written_ms = 64.0 * 1024 * 4 / m.bytes_per_s() * 1e3;
        EXPECT_NEAR(normal->est_ms - cands[0].est_ms, written_ms, 0.05 * written_ms);
    }
}

// A model cut into two pipelines, each streaming its output: the second reads the first's output
// (a graph output, from the caller's buffer) through its ImageParam.
TEST(StreamingStores, CutModelStreamsInEveryPipeline) {
    GraphBuilder b;
    std::string x = b.input("x", {64, 1024});
    std::string t = b.out("Tanh", {x}, {64, 1024});
    b.out("Sigmoid", {t}, {64, 1024});
    prepare_graph(b.g);
    int segments = 0;
    std::string text = check_streamed(b.g, machine_with_llc(256 << 10), 2, &segments);
    EXPECT_EQ(segments, 2);
    EXPECT_EQ(count_of(text, ".stream_stores()"), 2u) << text;
}

// A host artifact of a streamed model runs through its C API and matches the reference, also
// when the caller's output pointer is not vector aligned (the glue stages it).
TEST(StreamingStores, HostArtifactMatchesTheReference) {
    GraphBuilder b;
    std::string x = b.input("x", {64, 1024});
    std::string g = b.random_constant("g", {1024}, 5), c = b.random_constant("c", {1024}, 6);
    b.out("LayerNormalization", {x, g, c}, {64, 1024}, {{"axis", int64_t(-1)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    Schedule s = auto_schedule(lp, host_target(), machine_with_llc(256 << 10));
    ASSERT_NE(print_schedule(s).find(".stream_stores()"), std::string::npos) << print_schedule(s);
    apply_schedule(s, lp, host_target());
    fs::path out = scratch("artifact") / "ln";
    AotOptions o;
    o.name = "ln";
    AotArtifact a = compile_aot(lp, aot_target("host"), out.string(), o);
    loom::testing::ArtifactApi api(a.shared_lib, "ln");
    ASSERT_TRUE(api.ok()) << api.error;
    auto in = random_inputs(b.g, 12);
    auto ref = run_reference(b.g, in);
    void *m = api.create();
    for (size_t offset : {0, 1}) {  // floats past a 64-byte boundary
        std::vector<float> storage(64 * 1024 + 16);
        float *y = storage.data() + offset;
        for (size_t k = 0; k < 64 * 1024; k++) y[k] = loom::testing::kPoison;
        const void *ins[] = {in.at("x").data()};
        void *outs[] = {y};
        ASSERT_EQ(api.run(m, ins, outs), 0) << api.last_error();
        Tensor got(DType::F32, {64, 1024});
        std::memcpy(got.data(), y, got.bytes().size());
        EXPECT_TRUE(close(got, ref.at(b.g.outputs[0]))) << "offset " << offset;
    }
    api.destroy(m);
    fs::remove_all(out.parent_path().parent_path());
}

}  // namespace
}  // namespace loom
