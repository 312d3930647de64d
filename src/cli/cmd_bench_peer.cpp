// `loom bench-peer`: the worker process of one Halide autoscheduler's `loom bench` row
// (measure/peer_worker.h). Hidden from --help: `loom bench` starts it with its own model and input
// bindings, the job's settings and the channel on file descriptor 3.
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "codegen/openmp_threading.h"
#include "measure/peer_worker.h"
#include "support/error.h"

#include <fcntl.h>

#include <cstdlib>
#include <iostream>

namespace loom::cli {

namespace {

// The channel's descriptor in the worker (peer_process.h: PeerProcess's default).
constexpr int kChannelFd = 3;

struct BenchPeerOptions {
    std::string model;
    std::vector<std::string> inputs;
    std::string threading = "halide";
    PeerJob job;
};

void bench_peer(const BenchPeerOptions &o) {
    user_check(::fcntl(kChannelFd, F_GETFD) >= 0,
               "loom bench-peer is the worker process of `loom bench --halide`, started by it with a channel on "
               "file descriptor ", kChannelFd, "; run `loom bench MODEL --halide NAME` instead");
    int rc = 0;
    {
        set_jit_threading(parse_threading(o.threading));
        rc = serve_peer_worker([&] { return load_model(o.model, o.inputs); }, o.job, kChannelFd);
    }
    // The parent only reads the channel; skipping static destructors (Halide's and LLVM's) keeps a
    // finished worker from doing anything more.
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(rc);
}

}  // namespace

void add_bench_peer_command(CLI::App &app) {
    auto o = std::make_shared<BenchPeerOptions>();
    CLI::App *c = app.add_subcommand("bench-peer", "Worker process of `loom bench --halide` (internal)");
    c->group("");  // hidden from `loom --help`
    c->add_option("model", o->model)->required();
    c->add_option("--input", o->inputs);
    c->add_option("--threading", o->threading);
    c->add_option("--peer", o->job.peer)->required();
    c->add_option("--reference-dir", o->job.reference_dir)->required();
    c->add_option("--sets", o->job.input_sets);
    c->add_option("--seed", o->job.seed);
    c->add_option("--warmup", o->job.warmup);
    c->add_option("--tolerance", o->job.rel_tol);
    c->add_option("--target", o->job.target)->required();
    c->add_option("--cores", o->job.cores);
    c->add_option("--l2-bytes", o->job.l2_bytes);
    c->callback([o] { bench_peer(*o); });
}

}  // namespace loom::cli
