// Replays every input under fuzz/regressions/<target>/ (crashes the libFuzzer targets of fuzz/ once
// found, kept after the fix) through the same code as its fuzz target, outside the fuzzer: each must
// end normally or in a UserError, never another exception, a sanitizer report or a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/input_binding.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/npy.h"
#include "graph/passes.h"
#include "reference/folding.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"
#include "test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using loom::testing::user_error_of;

std::vector<fs::path> regressions(const std::string &target) {
    std::vector<fs::path> r;
    fs::path dir = fs::path(LOOM_SOURCE_DIR) / "fuzz" / "regressions" / target;
    if (fs::is_directory(dir))
        for (const auto &e : fs::directory_iterator(dir))
            if (e.is_regular_file() && e.path().filename().string()[0] != '.') r.push_back(e.path());
    std::sort(r.begin(), r.end());
    return r;
}

std::string read_bytes(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs \p f; a UserError is a pass (its message must say something), anything else a failure.
template <typename F>
void expect_clean(const fs::path &input, F f) {
    SCOPED_TRACE(input.string());
    try {
        f();
    } catch (const UserError &e) {
        EXPECT_GT(std::string(e.what()).size(), 10u);
    } catch (const std::exception &e) {
        ADD_FAILURE() << input << ": " << e.what();
    }
}

class FuzzRegressions : public ::testing::Test {
protected:
    // As in fuzz/fuzz_common.h: a small per-tensor cap keeps a hostile input's allocations small.
    void SetUp() override { setenv("LOOM_MAX_TENSOR_BYTES", "64M", 1); }
    void TearDown() override { unsetenv("LOOM_MAX_TENSOR_BYTES"); }
};

TEST_F(FuzzRegressions, OnnxImport) {
    fs::path dir = fs::temp_directory_path() / ("loom_fuzz_regress_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const auto &input : regressions("onnx_import")) {
        fs::path model = dir / "model.onnx";
        fs::copy_file(input, model, fs::copy_options::overwrite_existing);
        expect_clean(input, [&] {
            Graph g = import_onnx(model.string());
            prepare_graph(g);
        });
    }
    fs::remove_all(dir);
}

TEST_F(FuzzRegressions, ScheduleParser) {
    for (const auto &input : regressions("schedule_parser"))
        expect_clean(input, [&] {
            Schedule s = parse_schedule(read_bytes(input), input.filename().string());
            std::string printed = print_schedule(s);
            EXPECT_TRUE(parse_schedule(printed, "printed.sched") == s) << printed;
        });
}

TEST_F(FuzzRegressions, InputBinding) {
    Graph dynamic_mlp = import_onnx(testing::data_path("dynamic_mlp.onnx"));
    Graph sincos = import_onnx(testing::data_path("sincos.onnx"));
    for (const auto &input : regressions("input_binding"))
        for (const Graph *model : {&dynamic_mlp, &sincos})
            expect_clean(input, [&] {
                PrepareOptions opts;
                std::istringstream lines(read_bytes(input));
                for (std::string line; std::getline(lines, line);) parse_input_binding(line, opts.bindings);
                Graph g = *model;
                prepare_graph(g, opts);
            });
}

TEST_F(FuzzRegressions, Npy) {
    for (const auto &input : regressions("npy"))
        expect_clean(input, [&] { parse_npy(read_bytes(input), input.filename().string()); });
}

// The messages of the hand-made regressions whose checks live outside the ONNX importer.
TEST(FuzzRegressionMessages, NpyAndBindingNameTheCulprit) {
    fs::path dir = fs::path(LOOM_SOURCE_DIR) / "fuzz" / "regressions";
    std::string msg = user_error_of([&] { parse_npy(read_bytes(dir / "npy/claims_4GiB_in_16_bytes.npy"), "a.npy"); });
    EXPECT_NE(msg.find("a.npy: truncated .npy file: shape 1073741824 of f32 needs 4294967296 data bytes, found 16"),
              std::string::npos) << msg;
    msg = user_error_of([&] { parse_npy(read_bytes(dir / "npy/dim_beyond_int64.npy"), "b.npy"); });
    EXPECT_NE(msg.find("b.npy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dimension 99999999999999999999999 is out of range"), std::string::npos) << msg;
    msg = user_error_of([&] { parse_npy(read_bytes(dir / "npy/dims_overflow_int64.npy"), "c.npy"); });
    EXPECT_NE(msg.find("c.npy: the array (f64 4294967296x4294967296x16) would take"), std::string::npos) << msg;

    InputBindings b;
    msg = user_error_of([&] { parse_input_binding("x=99999999999999999999x3", b); });
    EXPECT_NE(msg.find("'99999999999999999999' is not a positive dim"), std::string::npos) << msg;
    parse_input_binding("batch=1099511627776", b);
    Graph g = import_onnx(testing::data_path("dynamic_mlp.onnx"));
    msg = user_error_of([&] {
        PrepareOptions o;
        o.bindings = b;
        prepare_graph(g, o);
    });
    EXPECT_NE(msg.find("input 'x' (f32 1099511627776x64) would take 256 TiB, over Loom's limit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("LOOM_MAX_TENSOR_BYTES="), std::string::npos) << msg;
}

TEST(FuzzRegressionMessages, EveryTargetHasItsFolder) {
    for (const char *t : {"onnx_import", "schedule_parser", "input_binding", "npy"})
        EXPECT_TRUE(fs::is_directory(fs::path(LOOM_SOURCE_DIR) / "fuzz" / "regressions" / t)) << t;
}

}  // namespace
}  // namespace loom
