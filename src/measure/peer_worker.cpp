#include "measure/peer_worker.h"

#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "graph/npy.h"
#include "measure/halide_autoschedulers.h"
#include "reference/reference.h"
#include "support/error.h"

namespace loom {

namespace {

std::string num(double v) {
    std::ostringstream os;
    os << std::setprecision(17) << v;
    return os.str();
}

std::vector<std::string> split_fields(const std::string &line) {
    std::vector<std::string> f;
    std::istringstream is(line);
    std::string w;
    while (is >> w) f.push_back(w);
    return f;
}

// The worker's channel: whole lines out, lines in; a parent that is gone ends the worker.
struct Channel {
    int fd;
    std::string buffer;
    bool send(const std::string &line) {
        std::string data = line + "\n";
        size_t sent = 0;
        while (sent < data.size()) {
            ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            sent += (size_t)n;
        }
        return true;
    }
    bool receive(std::string &line) {
        for (;;) {
            size_t nl = buffer.find('\n');
            if (nl != std::string::npos) {
                line = buffer.substr(0, nl);
                buffer.erase(0, nl + 1);
                return true;
            }
            char buf[4096];
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            buffer.append(buf, (size_t)n);
        }
    }
};

double to_double(const std::string &s) {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size()) throw std::invalid_argument(s);
    return v;
}

}  // namespace

std::vector<std::string> peer_job_args(const PeerJob &job) {
    return {"--peer", job.peer, "--reference-dir", job.reference_dir, "--sets", std::to_string(job.input_sets),
            "--seed", std::to_string(job.seed), "--warmup", std::to_string(job.warmup), "--tolerance",
            num(job.rel_tol), "--target", job.target, "--cores", std::to_string(job.cores), "--l2-bytes",
            std::to_string(job.l2_bytes)};
}

std::string escape_field(const std::string &s) {
    if (s.empty()) return "%";  // an empty field still takes a place in the line
    std::string o;
    for (unsigned char c : s) {
        if (c == '%' || c <= ' ' || c == 0x7f) {
            char buf[4];
            snprintf(buf, sizeof buf, "%%%02X", c);
            o += buf;
        } else {
            o += (char)c;
        }
    }
    return o;
}

std::string unescape_field(const std::string &s) {
    if (s == "%") return "";
    std::string o;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '%' && i + 2 < s.size()) {
            o += (char)std::stoi(s.substr(i + 1, 2), nullptr, 16);
            i += 2;
        } else {
            o += s[i];
        }
    }
    return o;
}

void write_tensor_folder(const std::string &dir, const std::map<std::string, Tensor> &tensors) {
    std::filesystem::create_directories(dir);
    std::ofstream names(dir + "/names.txt");
    int k = 0;
    for (const auto &[name, t] : tensors) {
        write_npy(dir + "/" + std::to_string(k++) + ".npy", t);
        names << escape_field(name) << "\n";
    }
    names.close();
    user_check((bool)names, "cannot write the tensors' names in ", dir);
}

std::map<std::string, Tensor> read_tensor_folder(const std::string &dir) {
    std::ifstream names(dir + "/names.txt");
    user_check((bool)names, "cannot read ", dir, "/names.txt (a folder of tensors)");
    std::map<std::string, Tensor> ref;
    std::string line;
    for (int k = 0; std::getline(names, line); k++)
        ref[unescape_field(line)] = read_npy(dir + "/" + std::to_string(k) + ".npy");
    user_check(!ref.empty(), "no tensors in ", dir);
    return ref;
}

std::string serialize_profile(const ModelProfile &p) {
    std::ostringstream os;
    os << p.runs << " " << p.samples << " " << num(p.ms_per_run) << " " << p.kernels.size();
    for (const auto &k : p.kernels) {
        os << " " << escape_field(k.root) << " " << num(k.ms) << " " << k.nodes.size();
        for (const auto &n : k.nodes) os << " " << escape_field(n);
        os << " " << k.funcs.size();
        for (const auto &f : k.funcs) os << " " << escape_field(f.func) << " " << num(f.ms);
    }
    return os.str();
}

std::optional<ModelProfile> parse_profile(const std::string &text) {
    std::vector<std::string> f = split_fields(text);
    size_t i = 0;
    auto next = [&]() -> const std::string & {
        if (i >= f.size()) throw std::out_of_range("profile: too few fields");
        return f[i++];
    };
    try {
        ModelProfile p;
        p.runs = std::stoi(next());
        p.samples = std::stoi(next());
        p.ms_per_run = to_double(next());
        size_t nk = std::stoul(next());
        for (size_t k = 0; k < nk; k++) {
            KernelTime kt;
            kt.root = unescape_field(next());
            kt.ms = to_double(next());
            size_t nn = std::stoul(next());
            for (size_t n = 0; n < nn; n++) kt.nodes.push_back(unescape_field(next()));
            size_t nf = std::stoul(next());
            for (size_t n = 0; n < nf; n++) {
                FuncTime ft;
                ft.func = unescape_field(next());
                ft.ms = to_double(next());
                kt.funcs.push_back(ft);
            }
            p.kernels.push_back(std::move(kt));
        }
        if (i != f.size()) return std::nullopt;
        return p;
    } catch (const std::exception &) {
        return std::nullopt;
    }
}

int serve_peer_worker(const std::function<Graph()> &load_graph, const PeerJob &job, int channel_fd) {
    Channel ch{channel_fd, {}};
    BenchRow row;
    row.label = job.peer;
    row.kind = "halide";
    std::unique_ptr<JitModel> model;
    std::vector<std::map<std::string, Tensor>> inputs;
    BenchOptions opts;
    Graph g;
    try {
        row.stage = "schedule";
        g = load_graph();
        opts.warmup = job.warmup;
        opts.rel_tol = job.rel_tol;
        opts.seed = job.seed;
        opts.target = Halide::Target(job.target);
        MachineModel machine;
        machine.cores = job.cores;
        machine.l2_bytes = job.l2_bytes;
        std::map<std::string, Tensor> ref = read_tensor_folder(job.reference_dir);
        for (int k = 0; k < job.input_sets; k++) inputs.push_back(random_inputs(g, job.seed + k));
        std::string peer = job.peer;
        BenchVariant v{job.peer, "halide",
                       [peer, machine](LoweredPipeline &p, const Halide::Target &t) {
                           return apply_halide_autoscheduler(p, peer, t, machine);
                       },
                       peer};
        model = build_and_validate(g, v, inputs, ref, opts, row, [&](const std::string &line) {
            ch.send("stage " + escape_field(row.stage));
            ch.send("progress " + escape_field(line));
        });
    } catch (...) {
        record_failure(row);
    }
    if (!model) {
        ch.send(str_cat("fail ", escape_field(row.stage), " ", escape_field(row.fail_reason), " ",
                        escape_field(row.error)));
        return 0;
    }
    // What the search freed goes back to the system: the worker waits, holding its build, while
    // the other rows are prepared and timed.
    ::malloc_trim(0);
    if (!ch.send(str_cat("ready ", num(row.schedule_s), " ", num(row.compile_s), " ", row.pipelines, " ",
                         num(row.rel_error), " ", num(row.max_abs), " ", escape_field(row.schedule_text))))
        return 0;

    std::string line;
    while (ch.receive(line)) {
        std::vector<std::string> f = split_fields(line);
        if (f.empty()) continue;
        if (f[0] == "quit") return 0;
        try {
            if (f[0] == "time" && f.size() == 6) {
                std::vector<double> t;
                timed_runs(*model, inputs, std::stoul(f[1]), to_double(f[2]), std::stoi(f[3]), std::stoi(f[4]), t,
                           std::stoi(f[5]));
                std::string reply = str_cat("times ", t.size());
                for (double x : t) reply += " " + num(x);
                if (!ch.send(reply)) return 0;
            } else if (f[0] == "profile" && f.size() == 2) {
                // The timed build's Funcs, already scheduled; its code goes before the profiled one compiles.
                LoweredPipeline lp = model->lowered();
                model.reset();
                std::string reply;
                try {
                    reply = "profile " + serialize_profile(profile_model(std::move(lp), opts.target, inputs,
                                                                         to_double(f[1])));
                } catch (const std::exception &e) {
                    reply = "profile_error " + escape_field(e.what());
                }
                ch.send(reply);
                return 0;
            } else {
                ch.send("error " + escape_field("unknown request: " + line));
                return 3;
            }
        } catch (const std::bad_alloc &) {
            ch.send("error " + escape_field("out of memory (an allocation failed)"));
            return 3;
        } catch (const std::exception &e) {
            ch.send("error " + escape_field(e.what()));
            return 3;
        }
    }
    return 0;
}

std::unique_ptr<PeerModel> PeerModel::start(const std::vector<std::string> &argv, const PeerLimits &limits,
                                            BenchRow &row, const std::function<void(const std::string &)> &say,
                                            const OutputCheck &check) {
    row.stage = "schedule";
    std::unique_ptr<PeerProcess> proc;
    try {
        proc = std::make_unique<PeerProcess>(argv, limits);
    } catch (const std::exception &e) {
        row.error = e.what();
        row.fail_reason = "error";
        say("FAILED: " + row.error);
        return nullptr;
    }
    // Scheduling, compiling and validating share one deadline.
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(limits.timeout_s));
    auto failed = [&](const std::string &reason, const std::string &message) -> std::unique_ptr<PeerModel> {
        row.error = message;
        row.fail_reason = reason;
        say("FAILED at " + row.stage + ": " + message);
        return nullptr;
    };
    bool checked_by_parent = false;
    for (;;) {
        std::optional<std::string> line = proc->read_line(deadline);
        if (!line) return failed(proc->failure().reason, proc->failure().message);
        std::vector<std::string> f = split_fields(*line);
        if (f.empty()) continue;
        try {
            if (f[0] == "stage" && f.size() == 2) {
                row.stage = unescape_field(f[1]);
            } else if (f[0] == "progress" && f.size() == 2) {
                say(unescape_field(f[1]));
            } else if (f[0] == "fail" && f.size() == 4) {
                row.stage = unescape_field(f[1]);
                std::string reason = unescape_field(f[2]);
                std::string message = unescape_field(f[3]);
                if (reason == "out_of_memory")
                    message += str_cat(" (cap ", format_bytes(limits.memory_bytes), ")",
                                       limits.memory_flag.empty() ? "" : " (" + limits.memory_flag + ")");
                proc->stop();
                return failed(reason, message);
            } else if (f[0] == "overhead" && f.size() == 2) {
                row.call_overhead_ms = to_double(f[1]);
            } else if (f[0] == "outputs" && f.size() == 2 && check) {
                row.stage = "validate";
                try {
                    check(unescape_field(f[1]), row);
                } catch (...) {
                    record_failure(row);
                    proc->stop();
                    return failed(row.fail_reason, row.error);
                }
                checked_by_parent = true;
            } else if (f[0] == "ready" && f.size() == 7) {
                row.schedule_s = to_double(f[1]);
                row.compile_s = to_double(f[2]);
                row.pipelines = std::stoi(f[3]);
                if (!checked_by_parent) {
                    row.rel_error = to_double(f[4]);
                    row.max_abs = to_double(f[5]);
                }
                row.schedule_text = unescape_field(f[6]);
                row.stage = "run";
                return std::unique_ptr<PeerModel>(new PeerModel(std::move(proc)));
            } else {
                throw std::invalid_argument(*line);
            }
        } catch (const std::exception &) {
            return failed("protocol", "the worker said something unreadable: " + line->substr(0, 200));
        }
    }
}

bool PeerModel::time(size_t first_set, double budget_ms, int at_least, int at_most, std::vector<double> &times,
                     int untimed) {
    if (!process_->send_line(
            str_cat("time ", first_set, " ", num(budget_ms), " ", at_least, " ", at_most, " ", untimed)))
        return false;
    std::optional<std::string> line = process_->read_line();
    if (!line) return false;
    std::vector<std::string> f = split_fields(*line);
    try {
        if (f.size() >= 2 && f[0] == "times") {
            size_t n = std::stoul(f[1]);
            if (f.size() == n + 2 && n > 0) {
                for (size_t k = 0; k < n; k++) times.push_back(to_double(f[k + 2]));
                return true;
            }
        }
        if (f.size() == 2 && f[0] == "error") {
            protocol_failure_ = PeerFailure{"error", unescape_field(f[1])};
            return false;
        }
    } catch (const std::exception &) {
    }
    protocol_failure_ = PeerFailure{"protocol", "the worker said something unreadable: " + line->substr(0, 200)};
    return false;
}

bool PeerModel::profile(double budget_ms, ModelProfile &out, std::string &error) {
    std::optional<std::string> line;
    if (process_->send_line("profile " + num(budget_ms))) line = process_->read_line();
    if (!line) {
        error = "its worker process failed while profiling: " + process_->failure().message;
        return false;
    }
    if (line->rfind("profile ", 0) == 0) {
        if (auto p = parse_profile(line->substr(8))) {
            out = *p;
            return true;
        }
    } else if (line->rfind("profile_error ", 0) == 0) {
        error = unescape_field(line->substr(14));
        return false;
    }
    error = "the worker said something unreadable: " + line->substr(0, 200);
    return false;
}

PeerFailure PeerModel::failure() const {
    if (protocol_failure_) return *protocol_failure_;
    if (process_->failed()) return process_->failure();
    return PeerFailure{"exited", "the worker stopped"};
}

void PeerModel::stop() {
    process_->send_line("quit");
    process_->stop();
}

}  // namespace loom
