// `loom bench` smoke tests on the tiny fixtures: a row per schedule, JSON that parses, a broken
// schedule reported in its row while the others run, eager/inline validate; plus the FLOP and
// byte counts and the machine file the roofline comes from.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <variant>

#include "measure/benchmark.h"
#include "measure/halide_autoschedulers.h"
#include "measure/machine_probe.h"
#include "measure/peer_process.h"
#include "measure/peer_worker.h"
#include "support/cores.h"
#include "support/error.h"
#include "test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// --- a minimal JSON reader: enough to check that the report parses and read its fields --------

struct Json;
using JsonObject = std::map<std::string, Json>;
using JsonArray = std::vector<Json>;
struct Json {
    std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<JsonArray>,
                 std::shared_ptr<JsonObject>>
        v;
    const Json &operator[](const std::string &k) const { return std::get<std::shared_ptr<JsonObject>>(v)->at(k); }
    const JsonArray &array() const { return *std::get<std::shared_ptr<JsonArray>>(v); }
    const std::string &str() const { return std::get<std::string>(v); }
    double num() const { return std::get<double>(v); }
    bool boolean() const { return std::get<bool>(v); }
    bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
};

struct JsonParser {
    const std::string &s;
    size_t p = 0;
    void ws() { while (p < s.size() && isspace((unsigned char)s[p])) p++; }
    void expect(char c) {
        ws();
        if (p >= s.size() || s[p] != c) throw std::runtime_error(str_cat("JSON: expected '", c, "' at ", p));
        p++;
    }
    std::string string() {
        expect('"');
        std::string o;
        while (p < s.size() && s[p] != '"') {
            if (s[p] == '\\') {
                p++;
                char e = s[p];
                if (e == 'u') { o += '?'; p += 4; }
                else o += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                p++;
            } else {
                o += s[p++];
            }
        }
        expect('"');
        return o;
    }
    Json value() {
        ws();
        if (p >= s.size()) throw std::runtime_error("JSON: unexpected end");
        char c = s[p];
        if (c == '{') {
            p++;
            auto o = std::make_shared<JsonObject>();
            ws();
            if (s[p] == '}') { p++; return Json{o}; }
            for (;;) {
                std::string k = string();
                expect(':');
                (*o)[k] = value();
                ws();
                if (s[p] == ',') { p++; continue; }
                expect('}');
                return Json{o};
            }
        }
        if (c == '[') {
            p++;
            auto a = std::make_shared<JsonArray>();
            ws();
            if (s[p] == ']') { p++; return Json{a}; }
            for (;;) {
                a->push_back(value());
                ws();
                if (s[p] == ',') { p++; continue; }
                expect(']');
                return Json{a};
            }
        }
        if (c == '"') return Json{string()};
        if (s.compare(p, 4, "true") == 0) { p += 4; return Json{true}; }
        if (s.compare(p, 5, "false") == 0) { p += 5; return Json{false}; }
        if (s.compare(p, 4, "null") == 0) { p += 4; return Json{nullptr}; }
        size_t end;
        double d = std::stod(s.substr(p, 40), &end);
        p += end;
        return Json{d};
    }
};

Json parse_json(const std::string &text) {
    JsonParser jp{text};
    Json j = jp.value();
    jp.ws();
    if (jp.p != text.size()) throw std::runtime_error("JSON: trailing characters");
    return j;
}

std::string slurp(const std::string &path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// A scratch folder with a machine file, so no test probes (or writes) the real cache.
struct Scratch {
    fs::path dir;
    Scratch() {
        dir = fs::temp_directory_path() / ("loom_test_bench_" + std::to_string(::getpid()));
        fs::create_directories(dir);
        MachineModel m;
        m.copy_gbps = 20;
        m.gflops = 100;
        m.cores = 2;
        m.l2_bytes = 2 << 20;
        m.llc_bytes = 32 << 20;
        m.cpu = "test cpu";
        m.simd = "avx2";
        write_machine_cache((dir / "machine.txt").string(), m);
    }
    ~Scratch() { fs::remove_all(dir); }
    std::string path(const std::string &name) const { return (dir / name).string(); }
    std::string env() const { return "LOOM_CACHE_DIR=" + dir.string() + " "; }
};

const Json *row_named(const Json &rep, const std::string &name) {
    for (const auto &r : rep["rows"].array())
        if (r["schedule"].str() == name) return &r;
    return nullptr;
}

TEST(BenchCli, RowPerScheduleBrokenOneReportedOthersRun) {
    Scratch s;
    {
        std::ofstream f(s.path("broken.sched"));
        f << "# deliberately wrong: no such Func\nno_such_func.compute_root();\n";
    }
    std::string out;
    std::string cmd = s.env() + testing::loom_binary() + " bench " + testing::data_path("sigmoid_affine.onnx") +
                      " --eager --inline --schedule " + s.path("broken.sched") + " --json " + s.path("r.json") +
                      " --csv " + s.path("r.csv") + " --budget-ms 30 --warmup 1";
    int rc = testing::run_command(cmd, out);
    // One of Loom's own schedules failed: the command fails, after measuring and writing the rest.
    ASSERT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("error: Loom's own schedule(s) failed: broken.sched (schedule)"), std::string::npos) << out;
    // The table on stdout has one line per schedule; progress lines went to stderr.
    EXPECT_NE(out.find("eager"), std::string::npos) << out;
    EXPECT_NE(out.find("broken.sched"), std::string::npos) << out;
    EXPECT_NE(out.find("FAILED"), std::string::npos) << out;
    EXPECT_NE(out.find("loom bench sigmoid_affine: ["), std::string::npos) << "no progress lines:\n" << out;
    // Every schedule is validated before any is timed, then they are timed in turns.
    size_t turns = out.find("timing 2 schedule(s) in turns: 8 rounds");
    ASSERT_NE(turns, std::string::npos) << out;
    EXPECT_LT(out.rfind("validating"), turns) << out;
    EXPECT_GT(out.find("eager: median"), turns) << out;

    Json rep = parse_json(slurp(s.path("r.json")));
    EXPECT_EQ(rep["workload"].str(), "sigmoid_affine");
    ASSERT_EQ(rep["rows"].array().size(), 3u);
    for (const char *name : {"eager", "inline"}) {
        const Json *r = row_named(rep, name);
        ASSERT_NE(r, nullptr) << name;
        EXPECT_TRUE((*r)["ok"].boolean()) << name << ": " << (*r)["error"].str();
        EXPECT_GT((*r)["median_ms"].num(), 0);
        EXPECT_LE((*r)["min_ms"].num(), (*r)["median_ms"].num());
        EXPECT_GE((*r)["max_ms"].num(), (*r)["median_ms"].num());
        EXPECT_GE((*r)["runs"].num(), 3);
        EXPECT_LT((*r)["rel_error"].num(), 1e-5);
        EXPECT_GT((*r)["gbps"].num(), 0);
        EXPECT_GT((*r)["pct_roofline"].num(), 0);
        EXPECT_FALSE((*r)["schedule_text"].str().empty());
        EXPECT_EQ((*r)["pipelines"].num(), 1) << name << ": a 3-Func model is not cut";
    }
    EXPECT_NEAR((*row_named(rep, "eager"))["speedup_vs_eager"].num(), 1.0, 1e-9);
    EXPECT_EQ((*row_named(rep, "broken.sched"))["pipelines"].num(), 0) << "it never compiled";
    const Json *b = row_named(rep, "broken.sched");
    ASSERT_NE(b, nullptr);
    EXPECT_FALSE((*b)["ok"].boolean());
    EXPECT_TRUE((*b)["median_ms"].is_null());
    EXPECT_NE((*b)["error"].str().find("no_such_func"), std::string::npos) << (*b)["error"].str();
    EXPECT_EQ((*b)["fail_reason"].str(), "error");
    // Compulsory bytes: x (64×256) and y out, plus w and b (256 each), all f32.
    EXPECT_DOUBLE_EQ(rep["cost"]["bytes"].num(), 4.0 * (64 * 256 * 2 + 256 * 2));

    std::string csv = slurp(s.path("r.csv"));
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;
}

TEST(BenchCli, HalideAutoschedulerRowValidates) {
    Scratch s;
    std::string out;
    int rc = testing::run_command(s.env() + testing::loom_binary() + " bench " +
                                      testing::data_path("softmax_rows.onnx") +
                                      " --eager --halide li2018,mullapudi2016 --json " + s.path("r.json") +
                                      " --budget-ms 20 --warmup 1",
                                  out);
    ASSERT_EQ(rc, 0) << out;
    Json rep = parse_json(slurp(s.path("r.json")));
    ASSERT_EQ(rep["rows"].array().size(), 3u);
    for (const char *name : {"eager", "li2018", "mullapudi2016"}) {
        const Json *r = row_named(rep, name);
        ASSERT_NE(r, nullptr) << name;
        EXPECT_TRUE((*r)["ok"].boolean()) << name << ": " << (*r)["error"].str();
    }
    EXPECT_NE((*row_named(rep, "li2018"))["schedule_text"].str().find("compute"), std::string::npos);
    // Each ran in its worker process: validated there and timed in turns with eager.
    for (const char *name : {"li2018", "mullapudi2016"}) {
        const Json &r = *row_named(rep, name);
        EXPECT_GT(r["median_ms"].num(), 0) << name;
        EXPECT_GE(r["runs"].num(), 3) << name;
        EXPECT_LT(r["rel_error"].num(), 1e-5) << name;
        EXPECT_GT(r["compile_s"].num(), 0) << name;
        EXPECT_EQ(r["fail_reason"].str(), "") << name;
    }
    EXPECT_NE(out.find("li2018: in a worker process (memory cap 4 GiB, 300 s)"), std::string::npos) << out;
}

// Adams2019 (its search and its own cost model's weights) runs through the worker as well; the
// worker sees the parent's environment (HL_BEAM_SIZE=1 keeps the search short).
TEST(BenchCli, Adams2019RunsInItsWorker) {
    Scratch s;
    std::string out;
    int rc = testing::run_command(s.env() + "HL_BEAM_SIZE=1 " + testing::loom_binary() + " bench " +
                                      testing::data_path("sigmoid_affine.onnx") +
                                      " --eager --halide adams2019 --json " + s.path("r.json") +
                                      " --budget-ms 20 --warmup 1",
                                  out);
    ASSERT_EQ(rc, 0) << out;
    Json rep = parse_json(slurp(s.path("r.json")));
    const Json &r = *row_named(rep, "adams2019");
    ASSERT_TRUE(r["ok"].boolean()) << r["error"].str();
    EXPECT_GT(r["median_ms"].num(), 0);
    EXPECT_LT(r["rel_error"].num(), 1e-5);
    EXPECT_FALSE(r["schedule_text"].str().empty());
}

// A peer over its memory cap is killed and fails its row, naming the cause and the cap; Loom's own
// rows are measured, printed and written, and the command succeeds. (4 MiB: less than any worker
// holds once Halide is loaded, whatever the machine.)
TEST(BenchCli, PeerOverItsMemoryCapFailsItsRowOnly) {
    Scratch s;
    std::string out;
    int rc = testing::run_command(s.env() + testing::loom_binary() + " bench " +
                                      testing::data_path("softmax_rows.onnx") +
                                      " --eager --auto --halide mullapudi2016 --peer-memory 4M --json " +
                                      s.path("r.json") + " --csv " + s.path("r.csv") + " --budget-ms 20 --warmup 1",
                                  out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("failed mullapudi2016: out of memory (cap 4 MiB"), std::string::npos) << out;
    EXPECT_NE(out.find("(--peer-memory)"), std::string::npos) << out;
    Json rep = parse_json(slurp(s.path("r.json")));
    ASSERT_EQ(rep["rows"].array().size(), 3u);
    for (const char *name : {"eager", "auto"}) {
        const Json &r = *row_named(rep, name);
        EXPECT_TRUE(r["ok"].boolean()) << name << ": " << r["error"].str();
        EXPECT_GT(r["median_ms"].num(), 0) << name;
    }
    const Json &m = *row_named(rep, "mullapudi2016");
    EXPECT_FALSE(m["ok"].boolean());
    EXPECT_EQ(m["fail_reason"].str(), "out_of_memory");
    EXPECT_NE(m["error"].str().find("cap 4 MiB"), std::string::npos) << m["error"].str();
    EXPECT_FALSE(m["failed_at"].str().empty());
    EXPECT_TRUE(m["median_ms"].is_null());
    EXPECT_NE(slurp(s.path("r.csv")).find(",out_of_memory,"), std::string::npos);
}

// A peer over its time budget is killed and its row says so.
TEST(BenchCli, PeerOverItsTimeBudgetFailsItsRowOnly) {
    Scratch s;
    std::string out;
    int rc = testing::run_command(s.env() + testing::loom_binary() + " bench " +
                                      testing::data_path("softmax_rows.onnx") +
                                      " --eager --halide li2018 --peer-timeout 0.01 --json " + s.path("r.json") +
                                      " --budget-ms 20 --warmup 1",
                                  out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("failed li2018: timed out after"), std::string::npos) << out;
    EXPECT_NE(out.find("(limit 0.01 s, --peer-timeout)"), std::string::npos) << out;
    Json rep = parse_json(slurp(s.path("r.json")));
    EXPECT_TRUE((*row_named(rep, "eager"))["ok"].boolean());
    const Json &l = *row_named(rep, "li2018");
    EXPECT_FALSE(l["ok"].boolean());
    EXPECT_EQ(l["fail_reason"].str(), "timed_out");
}

// Several --threading values: each of Loom's rows once per threading (ROW@THREADING), timed in the
// same rounds and each validated; a bad value names the flag and the valid ones.
TEST(BenchCli, RowPerThreadingInTheSameRounds) {
    Scratch s;
    std::string out;
    int rc = testing::run_command(s.env() + "HL_NUM_THREADS=2 " + testing::loom_binary() + " bench " +
                                      testing::data_path("sigmoid_affine.onnx") + " --auto --threading spin halide " +
                                      "--json " + s.path("r.json") + " --budget-ms 40 --warmup 1",
                                  out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("timing 2 schedule(s) in turns"), std::string::npos) << out;
    Json rep = parse_json(slurp(s.path("r.json")));
    ASSERT_EQ(rep["rows"].array().size(), 2u);
    for (const char *name : {"auto@spin", "auto@halide"}) {
        const Json *r = row_named(rep, name);
        ASSERT_NE(r, nullptr) << name << "\n" << out;
        EXPECT_TRUE((*r)["ok"].boolean()) << name << ": " << (*r)["error"].str();
        EXPECT_LT((*r)["rel_error"].num(), 1e-5) << name;
        EXPECT_GE((*r)["runs"].num(), 3) << name;
    }
    rc = testing::run_command(s.env() + testing::loom_binary() + " bench " + testing::data_path("sigmoid_affine.onnx") +
                                  " --auto --threading spin spinning",
                              out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--threading 'spinning' is not a threading"), std::string::npos) << out;
    EXPECT_NE(out.find("spin (Loom's pool"), std::string::npos) << out;
}

TEST(BenchCli, BadPeerLimitsAreUserErrors) {
    Scratch s;
    struct Case {
        const char *flag, *culprit, *fix;
    };
    for (const Case &c : {Case{"--peer-memory abc", "--peer-memory 'abc'", "e.g. --peer-memory 4G"},
                          Case{"--peer-memory 0", "--peer-memory '0'", "positive size"},
                          Case{"--peer-memory 4Q", "--peer-memory '4Q'", "K, M, G or T"},
                          Case{"--peer-timeout=-5", "--peer-timeout '-5'", "e.g. --peer-timeout 300"},
                          Case{"--peer-timeout soon", "--peer-timeout 'soon'", "positive number of seconds"}}) {
        std::string out;
        int rc = testing::run_command(s.env() + testing::loom_binary() + " bench " +
                                          testing::data_path("sigmoid_affine.onnx") + " --halide li2018 " + c.flag,
                                      out);
        EXPECT_EQ(rc, 1) << c.flag << ": " << out;
        EXPECT_NE(out.find(std::string("error: ") + c.culprit), std::string::npos) << c.flag << ": " << out;
        EXPECT_NE(out.find(c.fix), std::string::npos) << c.flag << ": " << out;
    }
}

// ONNX Runtime's row: the model file run by onnxruntime-node in a worker process, on the same
// input sets and with the thread count every row uses; its outputs are checked against the
// reference here, and its per-call overhead is reported.
TEST(BenchCli, OrtRowValidatesAtTheSameThreadCount) {
    Scratch s;
    for (int threads : {1, 2}) {
        std::string out;
        int rc = testing::run_command(s.env() + "HL_NUM_THREADS=" + std::to_string(threads) + " " +
                                          testing::loom_binary() + " bench " + testing::data_path("cnn.onnx") +
                                          " --auto --ort --json " + s.path("r.json") + " --budget-ms 40 --warmup 1",
                                      out);
        ASSERT_EQ(rc, 0) << out;
        Json rep = parse_json(slurp(s.path("r.json")));
        EXPECT_EQ(rep["threads"].num(), threads);
        const Json *ort = row_named(rep, "ort");
        ASSERT_NE(ort, nullptr) << out;
        ASSERT_TRUE((*ort)["ok"].boolean()) << (*ort)["error"].str();
        EXPECT_EQ((*ort)["kind"].str(), "ort");
        EXPECT_GT((*ort)["median_ms"].num(), 0);
        EXPECT_GE((*ort)["runs"].num(), 3);
        EXPECT_GT((*ort)["rel_error"].num(), 0) << "ORT's float32 outputs differ from the f64 reference a little";
        EXPECT_LT((*ort)["rel_error"].num(), 1e-5);
        EXPECT_GT((*ort)["call_overhead_ms"].num(), 0);
        EXPECT_NE((*ort)["schedule_text"].str().find("intraOpNumThreads " + std::to_string(threads) + ","),
                  std::string::npos)
            << (*ort)["schedule_text"].str();
        EXPECT_NE(out.find("note: ort's per-call overhead, measured on a trivial model, is"), std::string::npos)
            << out;
        EXPECT_TRUE((*row_named(rep, "auto"))["ok"].boolean());
    }
}

// Without Node.js or onnxruntime-node the ORT row fails, saying what is missing and how to install
// it; Loom's rows are measured and the command succeeds.
TEST(BenchCli, OrtMissingFailsItsRowOnlyAndSaysHowToInstall) {
    Scratch s;
    struct Case {
        std::string env, culprit;
    };
    for (const Case &c : {Case{"LOOM_ORT_DIR=" + s.path("no_ort"), "onnxruntime-node, not found in " + s.path("no_ort")},
                          Case{"LOOM_NODE=" + s.path("no_node"), "no executable `node` at LOOM_NODE=" + s.path("no_node")}}) {
        std::string out;
        int rc = testing::run_command(s.env() + c.env + " " + testing::loom_binary() + " bench " +
                                          testing::data_path("sigmoid_affine.onnx") + " --eager --ort --json " +
                                          s.path("r.json") + " --budget-ms 20 --warmup 1",
                                      out);
        ASSERT_EQ(rc, 0) << c.env << ": " << out;
        EXPECT_NE(out.find("failed ort: ONNX Runtime's row needs"), std::string::npos) << out;
        EXPECT_NE(out.find(c.culprit), std::string::npos) << out;
        EXPECT_NE(out.find("run scripts/install_deps.sh"), std::string::npos) << out;
        Json rep = parse_json(slurp(s.path("r.json")));
        EXPECT_TRUE((*row_named(rep, "eager"))["ok"].boolean());
        EXPECT_FALSE((*row_named(rep, "ort"))["ok"].boolean());
    }
}

// A worker whose outputs are wrong fails validation in the parent, like a wrong schedule: a
// stand-in for node that answers with the input x as the output y.
TEST(BenchCli, OrtOutputsAreCheckedAgainstTheReference) {
    Scratch s;
    std::string fake = s.path("fake_node");
    {
        std::ofstream f(fake);
        f << "#!/bin/bash\n"
             "while [ $# -gt 0 ]; do case \"$1\" in --inputs-dir) D=$2;; --outputs-dir) O=$2;; esac; shift; done\n"
             "mkdir -p \"$O\"; n=$(grep -n '^x$' \"$D/0/names.txt\" | cut -d: -f1)\n"
             "cp \"$D/0/$((n - 1)).npy\" \"$O/0.npy\"; echo y > \"$O/names.txt\"\n"
             "echo \"outputs $O\" >&3; exec sleep 30\n";
    }
    fs::permissions(fake, fs::perms::owner_all);
    std::string out;
    int rc = testing::run_command(s.env() + "LOOM_NODE=" + fake + " " + testing::loom_binary() + " bench " +
                                      testing::data_path("sigmoid_affine.onnx") + " --eager --ort --json " +
                                      s.path("r.json") + " --budget-ms 20 --warmup 1",
                                  out);
    ASSERT_EQ(rc, 0) << out;
    Json rep = parse_json(slurp(s.path("r.json")));
    const Json &ort = *row_named(rep, "ort");
    EXPECT_FALSE(ort["ok"].boolean());
    EXPECT_EQ(ort["failed_at"].str(), "validate");
    EXPECT_NE(ort["error"].str().find("wrong result: rel error"), std::string::npos) << ort["error"].str();
    EXPECT_TRUE((*row_named(rep, "eager"))["ok"].boolean());
}

// The hidden worker subcommand, run by hand, says what it is for instead of doing nothing.
TEST(BenchCli, WorkerSubcommandByHandSaysWhatToRun) {
    std::string out;
    int rc = testing::run_command(testing::loom_binary() + " bench-peer " + testing::data_path("sigmoid_affine.onnx") +
                                      " --peer li2018 --reference-dir /nonexistent --target host 3<&-",
                                  out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("run `loom bench MODEL --halide NAME` instead"), std::string::npos) << out;
    std::string help;
    testing::run_command(testing::loom_binary() + " --help", help);
    EXPECT_EQ(help.find("bench-peer"), std::string::npos) << "the worker is hidden from --help:\n" << help;
}

// The supervision itself, on small shell programs: a crash, a hog, a hang, a clean line exchange.
TEST(PeerProcess, CrashHogHangAndAnswer) {
    PeerLimits lim;
    lim.memory_bytes = 32ull << 20;
    lim.timeout_s = 20;
    try {
        PeerProcess p({"/nonexistent/worker"}, lim);
        ADD_FAILURE() << "no error";
    } catch (const InternalError &e) {
        EXPECT_NE(std::string(e.what()).find("cannot run /nonexistent/worker as a worker process: No such file"),
                  std::string::npos)
            << e.what();
    }
    {
        PeerProcess p({"/bin/sh", "-c", "kill -SEGV $$"}, lim);
        EXPECT_FALSE(p.read_line().has_value());
        ASSERT_TRUE(p.failed());
        EXPECT_EQ(p.failure().reason, "crashed");
        EXPECT_NE(p.failure().message.find("crashed (signal 11, SIGSEGV)"), std::string::npos) << p.failure().message;
    }
    {
        // 256 MiB of touched memory against a 32 MiB cap.
        PeerProcess p({"/usr/bin/python3", "-c", "import time; x = b'x' * (256 << 20); time.sleep(30)"}, lim);
        EXPECT_FALSE(p.read_line().has_value());
        ASSERT_TRUE(p.failed());
        EXPECT_EQ(p.failure().reason, "out_of_memory");
        EXPECT_NE(p.failure().message.find("out of memory (cap 32 MiB"), std::string::npos) << p.failure().message;
        EXPECT_LT(p.seconds(), 15);
    }
    {
        lim.timeout_s = 0.2;
        PeerProcess p({"/bin/sleep", "30"}, lim);
        EXPECT_FALSE(p.read_line().has_value());
        ASSERT_TRUE(p.failed());
        EXPECT_EQ(p.failure().reason, "timed_out");
        EXPECT_NE(p.failure().message.find("timed out after 0."), std::string::npos) << p.failure().message;
    }
    {
        lim.timeout_s = 20;
        // Echoes one line from the channel (fd 3) back, then exits; the parent then sees it gone.
        PeerProcess p({"/bin/sh", "-c", "read l <&3; echo \"got $l\" >&3"}, lim);
        EXPECT_TRUE(p.send_line("hello"));
        auto line = p.read_line();
        ASSERT_TRUE(line.has_value()) << p.failure().message;
        EXPECT_EQ(*line, "got hello");
        EXPECT_FALSE(p.read_line().has_value());
        EXPECT_EQ(p.failure().reason, "exited");
        EXPECT_FALSE(p.send_line("anyone?")) << "a write to a gone child fails, without SIGPIPE";
    }
}

TEST(PeerProcess, MemorySizesAndFields) {
    EXPECT_EQ(parse_memory_size("4G", "--m"), 4ull << 30);
    EXPECT_EQ(parse_memory_size("512m", "--m"), 512ull << 20);
    EXPECT_EQ(parse_memory_size("1.5GiB", "--m"), 3ull << 29);
    EXPECT_EQ(parse_memory_size("1048576", "--m"), 1ull << 20);
    EXPECT_THROW(parse_memory_size("-1G", "--m"), UserError);
    EXPECT_THROW(parse_memory_size("G", "--m"), UserError);
    EXPECT_EQ(format_bytes(4ull << 30), "4 GiB");
    EXPECT_EQ(format_bytes(32ull << 20), "32 MiB");
    EXPECT_EQ(format_bytes(3ull << 29), "1.5 GiB");
    EXPECT_EQ(format_bytes((1ull << 30) + (20ull << 20)), "1.02 GiB");
    EXPECT_EQ(format_bytes(1000ull << 20), "1000 MiB");
    for (std::string t : {std::string(""), std::string("a b\nc%d\t"), std::string("plain")})
        EXPECT_EQ(unescape_field(escape_field(t)), t);
    EXPECT_EQ(escape_field("a b").find(' '), std::string::npos);
    ModelProfile p;
    p.runs = 3;
    p.samples = 40;
    p.ms_per_run = 1.25;
    KernelTime k;
    k.root = "conv 1";
    k.ms = 1.0;
    k.nodes = {"Conv_0", "Relu_1"};
    k.funcs = {{"f0", 0.75}, {"f1", 0.25}};
    p.kernels = {k, KernelTime{}};
    auto back = parse_profile(serialize_profile(p));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->runs, 3);
    EXPECT_EQ(back->kernels.size(), 2u);
    EXPECT_EQ(back->kernels[0].root, "conv 1");
    EXPECT_EQ(back->kernels[0].nodes[1], "Relu_1");
    EXPECT_DOUBLE_EQ(back->kernels[0].funcs[0].ms, 0.75);
    EXPECT_FALSE(parse_profile("3 40").has_value());
}

TEST(BenchCli, UnknownHalideAutoschedulerIsAUserError) {
    Scratch s;
    std::string out;
    int rc = testing::run_command(s.env() + testing::loom_binary() + " bench " +
                                      testing::data_path("sigmoid_affine.onnx") + " --halide adams2109",
                                  out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("adams2019"), std::string::npos) << "no did-you-mean: " << out;
}

TEST(BenchCost, FlopsAndBytesFromTheGraph) {
    Graph g;
    g.values["x"] = ValueInfo{"x", DType::F32, {8, 16}, {}, true};
    g.inputs = {"x"};
    g.set_constant("w", Tensor(DType::F32, {16, 32}));
    g.values["w"].has_shape = true;
    g.values["m"] = ValueInfo{"m", DType::F32, {8, 32}, {}, true};
    g.values["y"] = ValueInfo{"y", DType::F32, {8, 32}, {}, true};
    Node mm;
    mm.name = "mm", mm.op = "MatMul", mm.inputs = {"x", "w"}, mm.outputs = {"m"};
    Node relu;
    relu.name = "relu", relu.op = "Relu", relu.inputs = {"m"}, relu.outputs = {"y"};
    g.nodes = {mm, relu};
    g.outputs = {"y"};
    EXPECT_DOUBLE_EQ(node_flops(g, g.nodes[0]), 2.0 * 8 * 32 * 16);
    EXPECT_DOUBLE_EQ(node_flops(g, g.nodes[1]), 8.0 * 32);
    WorkloadCost c = workload_cost(g);
    EXPECT_DOUBLE_EQ(c.input_bytes, 8 * 16 * 4);
    EXPECT_DOUBLE_EQ(c.output_bytes, 8 * 32 * 4);
    EXPECT_DOUBLE_EQ(c.weight_bytes, 16 * 32 * 4);
    EXPECT_DOUBLE_EQ(c.flops, 2.0 * 8 * 32 * 16 + 8 * 32);
}

TEST(MachineProbe, FileRoundTripsAndRooflineIsTheSlowerBound) {
    Scratch s;
    MachineModel m;
    ASSERT_TRUE(read_machine_cache(s.path("machine.txt"), m));
    EXPECT_DOUBLE_EQ(m.copy_gbps, 20);
    EXPECT_DOUBLE_EQ(m.gflops, 100);
    EXPECT_EQ(m.cores, 2);
    EXPECT_EQ(m.l2_bytes, 2 << 20);
    EXPECT_EQ(m.cpu, "test cpu");
    // 2 GB at 20 GB/s = 100 ms; 1 GFLOP at 100 GFLOP/s = 10 ms.
    EXPECT_DOUBLE_EQ(m.roofline_ms(2e9, 1e9), 100);
    EXPECT_DOUBLE_EQ(m.roofline_ms(1e6, 1e11), 1000);
    // A probe with the cache present reads it instead of measuring.
    MachineModel p = probe_machine(false, s.path("machine.txt"));
    EXPECT_DOUBLE_EQ(p.copy_gbps, 20);
    EXPECT_EQ(p.simd, "avx2");
    // The cost model reads the same file with the same reader, keeping this host's thread count.
    MachineModel d = detect_machine(Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41"), s.path("machine.txt"));
    EXPECT_TRUE(d.measured);
    EXPECT_DOUBLE_EQ(d.copy_gbps, 20);
    EXPECT_DOUBLE_EQ(d.gflops, 100);
    EXPECT_EQ(d.l2_bytes, 2 << 20);
    // Numbers that are not positive and finite are ignored, not read as a machine.
    {
        std::ofstream bad(s.path("bad.txt"));
        bad << "copy_gbps=-3\ngflops=nan\ncores=0\n";
    }
    MachineModel b;
    EXPECT_FALSE(read_machine_cache(s.path("bad.txt"), b));
    EXPECT_EQ(b.cores, 1);
    EXPECT_FALSE(read_machine_cache(s.path("absent.txt"), m));
}

// The copy probe (memcpy and vector loops with ordinary and streaming stores, the best of them)
// gives a finite positive bandwidth whatever the thread count: one odd count splits 256 MiB into
// chunks of whole 4 KiB pages.
TEST(MachineProbe, CopyProbeIsFinitePositiveForAnyThreadCount) {
    for (int threads : {1, 3}) {
        double gbps = probe_copy_gbps(threads);
        EXPECT_TRUE(std::isfinite(gbps)) << threads;
        EXPECT_GT(gbps, 0.1) << threads;
        EXPECT_LT(gbps, 1e5) << threads;
    }
}

// The share of the cores a probe had: CPU seconds over wall seconds times threads, within [0, 1].
TEST(MachineProbe, CpuShareIsCpuTimeOverWallTimeTimesThreads) {
    EXPECT_DOUBLE_EQ(probe_cpu_share(2.0, 1.0, 2), 1.0);
    EXPECT_DOUBLE_EQ(probe_cpu_share(1.0, 1.0, 2), 0.5);
    EXPECT_DOUBLE_EQ(probe_cpu_share(0.9, 1.0, 1), 0.9);
    EXPECT_DOUBLE_EQ(probe_cpu_share(3.0, 1.0, 2), 1.0);  // clock skew never reads above 1
    EXPECT_DOUBLE_EQ(probe_cpu_share(1.0, 0.0, 2), 0.0);
    EXPECT_DOUBLE_EQ(probe_cpu_share(1.0, 1.0, 0), 0.0);
    EXPECT_LT(probe_cpu_share(0.5, 1.0, 1), kMinProbeCpuShare);
}

// Probed while two spinning processes per core compete for every core, the rates are used for
// that run (positive, finite) and cached as provisional, with the share of the cores the probe
// had: a cache written under load as if idle made every later plan on that host assume a machine
// half as fast. A provisional cache is read as it is while young (no probe on every run), and
// measured again once it is older than kReprobeBusyAfterS.
TEST(MachineProbe, RatesProbedOnBusyCoresAreCachedAsProvisional) {
    Scratch s;
    const std::string path = s.path("busy.txt");  // Scratch writes machine.txt itself
    std::vector<pid_t> spinners;
    for (int i = 0; i < 2 * usable_cores(); i++) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            volatile double x = 1;
            for (;;) x = x * 1.0000001 + 1e-9;
        }
        spinners.push_back(pid);
    }
    MachineModel m = probe_machine(true, path, 2);
    for (pid_t pid : spinners) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
    EXPECT_TRUE(m.measured);
    EXPECT_TRUE(std::isfinite(m.copy_gbps) && m.copy_gbps > 0);
    EXPECT_TRUE(std::isfinite(m.gflops) && m.gflops > 0);
    EXPECT_LT(m.probe_cpu_share, kMinProbeCpuShare);
    MachineModel cached;
    ASSERT_TRUE(read_machine_cache(path, cached));
    EXPECT_LT(cached.probe_cpu_share, kMinProbeCpuShare);
    // Young: read as it is. Marked as 1 GFLOP/s so that a new probe would show.
    {
        std::ofstream f(path, std::ios::app);
        f << "gflops=1\n";
    }
    EXPECT_DOUBLE_EQ(probe_machine(false, path, 1).gflops, 1.0);
    // Old: measured again.
    std::filesystem::last_write_time(
        path, std::filesystem::file_time_type::clock::now() - std::chrono::seconds((int)kReprobeBusyAfterS + 60));
    EXPECT_GT(probe_machine(false, path, 1).gflops, 1.0);
}

// A row above the probed FMA peak can only mean a low probe: the table says so and names the fix
// (--reprobe) and the cache file; rows under the peak, or failed rows, add no note.
TEST(BenchTable, RowAboveTheProbedPeakSuggestsAReprobe) {
    BenchReport r;
    r.workload = "gemm";
    r.machine.cpu = "test cpu";
    r.machine.cores = 2;
    r.machine.copy_gbps = 50;
    r.machine.gflops = 340;
    r.cost.flops = 1e9;
    BenchRow ok_row;
    ok_row.label = "auto";
    ok_row.ok = true;
    ok_row.runs = 10;
    ok_row.median_ms = ok_row.min_ms = ok_row.max_ms = 2.0;
    ok_row.gflops = 500;
    r.rows.push_back(ok_row);
    std::string table = format_table(r);
    EXPECT_NE(table.find("note: auto ran at 500.0 GFLOP/s, above the probed FMA peak (340.0)"), std::string::npos)
        << table;
    EXPECT_NE(table.find("--reprobe"), std::string::npos) << table;
    EXPECT_NE(table.find(machine_cache_path()), std::string::npos) << table;

    r.rows[0].gflops = 300;
    EXPECT_EQ(format_table(r).find("note:"), std::string::npos);
    r.rows[0].gflops = 500;
    r.rows[0].ok = false;
    r.rows[0].stage = "validate";
    EXPECT_EQ(format_table(r).find("note:"), std::string::npos);
}

TEST(HalideAutoschedulers, NamesAndErrors) {
    EXPECT_EQ(halide_autoscheduler_registered_name("adams2019"), "Adams2019");
    EXPECT_EQ(halide_autoscheduler_registered_name("Li2018"), "Li2018");
    try {
        halide_autoscheduler_registered_name("mullapudi");
        FAIL() << "no error";
    } catch (const UserError &e) {
        EXPECT_NE(std::string(e.what()).find("mullapudi2016"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace loom
