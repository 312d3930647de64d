// Schedule language syntax: parsing, printing, parse(print(s)) == s on hand-written and random
// schedules, and syntax errors that name file:line:col and what was expected.
#include <gtest/gtest.h>

#include <random>

#include "schedule/schedule.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

using namespace loom;

static const char *kDesignExample = R"(# schedules/mlp.cpu.sched — loom schedule for mlp.onnx (sha256 1f3a9c) on x86-64-linux-avx2
# measured on a 16-core Xeon: 1.2 ms

fc1_gemm.compute_root()
    .split(j, jo, ji, 8).vectorize(ji)
    .parallel(i);
fc1_relu.compute_inline();
ln_mean.compute_at(ln_out, i);
ln_out.split(i, io, ii, 4).parallel(io).vectorize(j, 8);
)";

TEST(ScheduleParse, DesignExample) {
    Schedule s = parse_schedule(kDesignExample, "mlp.cpu.sched");
    EXPECT_EQ(s.model, "mlp.onnx");
    EXPECT_EQ(s.sha256, "1f3a9c");
    EXPECT_EQ(s.target, "x86-64-linux-avx2");
    ASSERT_EQ(s.header_comments.size(), 1u);
    EXPECT_EQ(s.header_comments[0], "measured on a 16-core Xeon: 1.2 ms");
    ASSERT_EQ(s.statements.size(), 4u);
    const auto &g = s.statements[0];
    EXPECT_EQ(g.func, "fc1_gemm");
    EXPECT_EQ(g.stage, -1);
    ASSERT_EQ(g.calls.size(), 4u);
    EXPECT_EQ(g.calls[1].str(), "split(j, jo, ji, 8)");
    EXPECT_EQ(g.calls[1].loc.line, 5);
    EXPECT_EQ(g.calls[1].loc.col, 6);
    EXPECT_EQ(g.calls[3].name, "parallel");
    EXPECT_EQ(s.statements[2].calls[0].args[0].name, "ln_out");
    EXPECT_EQ(s.statements[3].calls[2].args[1].value, 8);
}

TEST(ScheduleParse, UpdatesRfactorEnumsAndComments) {
    const char *text = R"(// a C++-style comment attaches to the next statement
loss_sum.update(0).rfactor(r.x, u) as loss_part;  # trailing: why rfactor
loss_part.compute_root().update(0).parallel(u);
)";
    // .update after a call is an error; use the correct form:
    EXPECT_THROW(parse_schedule(text, "t.sched"), UserError);
    const char *ok = R"(// a C++-style comment attaches to the next statement
loss_sum.update(0).rfactor(r.x, u) as loss_part;  # trailing: why rfactor
loss_part.compute_root();
loss_part.update(0).parallel(u)
    .vectorize(u, 8, TailStrategy::RoundUp);
buf.store_in(MemoryType::Stack).bound(i, -4, 16).split(i, io, ii, 4, GuardWithIf);
)";
    Schedule s = parse_schedule(ok, "t.sched");
    ASSERT_EQ(s.statements.size(), 4u);
    EXPECT_FALSE(s.has_header());
    const auto &r = s.statements[0];
    EXPECT_EQ(r.stage, 0);
    EXPECT_EQ(r.calls[0].as_name, "loss_part");
    EXPECT_EQ(r.calls[0].args[0].name, "r.x");
    EXPECT_EQ(r.comments, (std::vector<std::string>{"a C++-style comment attaches to the next statement",
                                                   "trailing: why rfactor"}));
    EXPECT_EQ(s.statements[2].calls[1].args[2].kind, ScheduleArg::Kind::Tail);
    EXPECT_EQ(s.statements[2].calls[1].args[2].name, "RoundUp");
    EXPECT_EQ(s.statements[3].calls[0].args[0].kind, ScheduleArg::Kind::Memory);
    EXPECT_EQ(s.statements[3].calls[1].args[1].value, -4);
    EXPECT_EQ(s.statements[3].calls[2].args[4].kind, ScheduleArg::Kind::Ident);
    EXPECT_EQ(parse_schedule(print_schedule(s)), s);
}

TEST(ScheduleParse, RoundTripHandWritten) {
    Schedule s = parse_schedule(kDesignExample, "mlp.cpu.sched");
    std::string printed = print_schedule(s);
    EXPECT_EQ(parse_schedule(printed), s);
    EXPECT_EQ(print_schedule(parse_schedule(printed)), printed);
    EXPECT_NE(printed.find("# loom schedule for mlp.onnx (sha256 1f3a9c) on x86-64-linux-avx2\n"),
              std::string::npos);
    EXPECT_NE(printed.find("fc1_gemm.compute_root().split(j, jo, ji, 8).vectorize(ji).parallel(i);\n"),
              std::string::npos);
}

TEST(ScheduleParse, OnlyACommentEndingInTheHeaderPhraseIsTheHeaderLine) {
    EXPECT_TRUE(is_schedule_header_line("loom schedule for m.onnx (sha256 ab) on x86-64-linux"));
    EXPECT_TRUE(is_schedule_header_line("schedules/m.sched — loom schedule for m.onnx"));
    EXPECT_FALSE(is_schedule_header_line("loom schedule for m.onnx, tuned by hand"));
    // A sentence that mentions the phrase stays a comment of the statement it precedes.
    Schedule s = parse_schedule("# the loom schedule for this model is hand-written\nb.compute_root();\n");
    EXPECT_FALSE(s.has_header());
    ASSERT_EQ(s.statements.size(), 1u);
    EXPECT_EQ(s.statements[0].comments, std::vector<std::string>{"the loom schedule for this model is hand-written"});
}

TEST(ScheduleParse, CommentsThatReadAsAHeaderLineRoundTrip) {
    // A header comment that reads as a header line, with no model in the header.
    Schedule a;
    a.header_comments = {"notes", "copied from: loom schedule for other.onnx"};
    a.statements.push_back(ScheduleStatement("b", -1));
    a.statements[0].add("compute_root", {});
    EXPECT_EQ(parse_schedule(print_schedule(a)), a) << print_schedule(a);
    // No header, and the first statement's comment reads as a header line.
    Schedule b;
    b.statements.push_back(ScheduleStatement("b", -1));
    b.statements[0].comments = {"loom schedule for other.onnx"};
    b.statements[0].add("compute_root", {});
    std::string printed = print_schedule(b);
    Schedule back = parse_schedule(printed);
    EXPECT_EQ(back, b) << printed;
    EXPECT_FALSE(back.has_header());
    ASSERT_EQ(back.statements.size(), 1u);
    EXPECT_EQ(back.statements[0].comments, b.statements[0].comments);
}

TEST(ScheduleParse, LongChainsUseContinuationLines) {
    ScheduleStatement st("a_rather_long_function_name_for_a_conv", 0);
    st.add("split", {"w", "wo", "wi", 16}).add("split", {"h", "ho", "hi", 4}).add("reorder", {"wi", "hi", "wo", "ho"});
    st.add("vectorize", {"wi"}).add("parallel", {"ho"});
    std::string p = print_statement(st);
    EXPECT_NE(p.find("a_rather_long_function_name_for_a_conv.update(0).split(w, wo, wi, 16)\n    .split(h, ho, hi, 4)\n"),
              std::string::npos)
        << p;
    Schedule s;
    s.statements.push_back(st);
    EXPECT_EQ(parse_schedule(print_schedule(s)), s);
}

TEST(ScheduleParse, GpuLanesRoundTrip) {
    std::string text = "s_part.update(0).split(r, ro, ri, 32).gpu_lanes(u).gpu_threads(w);\n";
    Schedule s = parse_schedule(text);
    ASSERT_EQ(s.statements.size(), 1u);
    ASSERT_EQ(s.statements[0].calls.size(), 3u);
    EXPECT_EQ(s.statements[0].calls[1].name, "gpu_lanes");
    ASSERT_EQ(s.statements[0].calls[1].args.size(), 1u);
    EXPECT_EQ(s.statements[0].calls[1].args[0].name, "u");
    EXPECT_EQ(parse_schedule(print_schedule(s)), s);
    EXPECT_NE(print_schedule(s).find(".gpu_lanes(u)"), std::string::npos) << print_schedule(s);
}

TEST(ScheduleParse, EqualityIgnoresPositions) {
    Schedule a = parse_schedule("f.compute_root();\n");
    Schedule b = parse_schedule("\n\n   f .compute_root( ) ;");
    EXPECT_EQ(a, b);
    EXPECT_NE(a.statements[0].loc.line, b.statements[0].loc.line);
    Schedule c = parse_schedule("f.compute_inline();\n");
    EXPECT_NE(a, c);
}

// A random legal-syntax schedule: every primitive with its arity, all argument kinds, comments.
static Schedule random_schedule(std::mt19937 &rng) {
    auto pick = [&](int n) { return (int)(rng() % n); };
    static const char *names[] = {"x", "y", "xo", "xi", "r.x", "k", "fc1_gemm", "ln_out", "u", "tile_7"};
    auto name = [&] { return ScheduleArg(names[pick(10)]); };
    auto comment = [&] {
        static const char *c[] = {"fuses a, b: saves 12 MB", "", "why: L2 is 1 MB", "# nested #", "x // y"};
        return std::string(c[pick(5)]);
    };
    Schedule s;
    if (pick(2)) s.model = "model" + std::to_string(pick(100)) + ".onnx";
    if (pick(2)) s.sha256 = "ab12cd" + std::to_string(pick(1000));
    if (pick(2)) s.target = pick(2) ? "x86-64-linux-avx2" : "host-cuda-cuda_capability_80";
    for (int i = pick(3); i > 0; i--) s.header_comments.push_back(comment());
    int nst = 1 + pick(8);
    auto prims = primitive_names();
    for (int i = 0; i < nst; i++) {
        ScheduleStatement st(std::string("func_") + std::to_string(pick(5)), pick(3) - 1);
        for (int j = pick(3); j > 0; j--) st.comments.push_back(comment());
        int ncalls = 1 + pick(6);
        for (int j = 0; j < ncalls; j++) {
            const PrimitiveInfo *p = find_primitive(prims[pick((int)prims.size())]);
            if (p->pure_only && st.stage >= 0) continue;
            if (std::string(p->name) == "rfactor" && st.stage < 0) continue;
            int hi = p->max_args < 0 ? p->min_args + 4 : p->max_args;
            int n = p->min_args + pick(hi - p->min_args + 1);
            if (std::string(p->name) == "rfactor") n += n % 2;
            PrimitiveCall c(p->name);
            for (int a = 0; a < n; a++) {
                switch (pick(5)) {
                case 0: c.args.emplace_back((int64_t)pick(2000) - 100); break;
                case 1: c.args.push_back(ScheduleArg::tail(tail_strategy_names()[pick(7)])); break;
                case 2: c.args.push_back(ScheduleArg::memory(memory_type_names()[pick(9)])); break;
                default: c.args.push_back(name());
                }
            }
            if (p->makes_func) c.as_name = "made_" + std::to_string(pick(9));
            st.calls.push_back(c);
        }
        if (st.calls.empty()) st.add("unroll", {"x"});
        s.statements.push_back(st);
    }
    if (pick(3) == 0) s.trailing_comments.push_back("end: " + comment() + ".");
    return s;
}

TEST(ScheduleParse, RandomRoundTrip) {
    std::mt19937 rng(20240611);
    for (int i = 0; i < 1000; i++) {
        Schedule s = random_schedule(rng);
        std::string text = print_schedule(s);
        Schedule back;
        ASSERT_NO_THROW(back = parse_schedule(text, "random.sched")) << text;
        ASSERT_EQ(back, s) << "iteration " << i << ":\n" << text << "\n---reprinted---\n" << print_schedule(back);
        ASSERT_EQ(print_schedule(back), text);
    }
}

// The message of the UserError parsing \p text throws ("" if none).
static std::string parse_error(const std::string &text) {
    try {
        parse_schedule(text, "bad.sched");
    } catch (const UserError &e) {
        return e.what();
    }
    return "";
}

TEST(ScheduleParseErrors, MissingSemicolon) {
    std::string m = parse_error("f.compute_root()\ng.compute_inline();\n");
    EXPECT_EQ(m.rfind("bad.sched:2:1: expected ';' to end the statement for 'f'", 0), 0u) << m;
}

TEST(ScheduleParseErrors, UnknownPrimitiveDidYouMean) {
    std::string m = parse_error("f.compute_root()\n    .splitt(x, xo, xi, 8);\n");
    EXPECT_EQ(m.rfind("bad.sched:2:6: unknown primitive 'splitt'; did you mean 'split'?", 0), 0u) << m;
}

TEST(ScheduleParseErrors, Arity) {
    std::string m = parse_error("f.split(x, xo, 8);");
    EXPECT_EQ(m.rfind("bad.sched:1:3: f.split(x, xo, 8): split takes 4 to 5 arguments, not 3; expected "
                      "split(var, outer, inner, factor[, TailStrategy])", 0), 0u) << m;
    m = parse_error("f.compute_root(x);");
    EXPECT_NE(m.find("compute_root takes 0 arguments, not 1"), std::string::npos) << m;
}

TEST(ScheduleParseErrors, MissingAsAndFuncLevelOnUpdate) {
    std::string m = parse_error("f.update(0).rfactor(r.x, u);");
    EXPECT_NE(m.find("bad.sched:1:13: f.update(0).rfactor(r.x, u): rfactor makes a new Func: name it"), std::string::npos) << m;
    m = parse_error("f.update(0).compute_root();");
    EXPECT_NE(m.find("schedules the whole Func, not one update stage"), std::string::npos) << m;
    m = parse_error("f.compute_root().update(0).parallel(x);");
    EXPECT_NE(m.find("bad.sched:1:18: update(k) must come right after the func name"), std::string::npos) << m;
}

TEST(ScheduleParseErrors, Tokens) {
    EXPECT_NE(parse_error("f.split(x, xo, xi, 8;").find("bad.sched:1:21: expected ',' or ')' in split(…), found ';'"),
              std::string::npos)
        << parse_error("f.split(x, xo, xi, 8;");
    EXPECT_NE(parse_error("f.vectorize(x, 8) @").find("bad.sched:1:19: unexpected character '@'"), std::string::npos);
    EXPECT_NE(parse_error("f.split(x, TailStrategy::, 8);").find("bad.sched:1:26: expected a name after TailStrategy::"),
              std::string::npos)
        << parse_error("f.split(x, TailStrategy::, 8);");
    EXPECT_NE(parse_error("f;").find("bad.sched:1:2: expected '.' and a primitive after 'f'"), std::string::npos);
    EXPECT_NE(parse_error("f.update(x).parallel(y);").find("bad.sched:1:10: expected the update stage index"),
              std::string::npos);
    EXPECT_NE(parse_error("f.parallel(x)").find("bad.sched:1:14: expected ';'"), std::string::npos)
        << parse_error("f.parallel(x)");
}
