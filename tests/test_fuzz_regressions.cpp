// Replays every input under fuzz/regressions/<target>/ (crashes the libFuzzer targets of fuzz/ once
// found, kept after the fix) through the same code as its fuzz target, outside the fuzzer: each must
// end normally or in a UserError, never another exception, a sanitizer report or a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontends/onnx/onnx_import.h"
#include "graph/error.h"
#include "graph/npy.h"
#include "graph/passes.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

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

TEST(FuzzRegressions, EveryTargetHasItsFolder) {
    for (const char *t : {"onnx_import", "schedule_parser", "input_binding", "npy"})
        EXPECT_TRUE(fs::is_directory(fs::path(LOOM_SOURCE_DIR) / "fuzz" / "regressions" / t)) << t;
}

}  // namespace
}  // namespace loom
