#include "codegen/aot.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc 2.28)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <set>
#include <sstream>

#include "codegen/aot_segments.h"
#include "codegen/cublas_gemm.h"
#include "codegen/cudnn_attention.h"
#include "codegen/cudnn_conv.h"
#include "codegen/in_place_outputs.h"
#include "codegen/jit.h"
#include "codegen/ptx_register_caps.h"
#include "codegen/runtime_glue.h"
#include "codegen/streaming_stores.h"
#include "support/atomic_file.h"
#include "support/error.h"
#include "support/debug_output.h"

namespace loom {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path &p, const std::string &text) { write_file_atomically(p.string(), text); }

// Puts the finished build \p tmp at \p out. An existing artifact is swapped with it in one
// rename (RENAME_EXCHANGE), so that at no moment, even if the process is killed, \p out is missing
// or half-written; the old one is then removed.
void replace_directory(const fs::path &tmp, const fs::path &out) {
    if (!fs::exists(out)) {
        fs::rename(tmp, out);
        return;
    }
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
        fs::remove_all(tmp);  // now the old artifact
        return;
    }
    // A file system without RENAME_EXCHANGE: two renames, the old artifact kept until the new is in place.
    fs::path old = out.parent_path() / (out.filename().string() + ".old-" + std::to_string(getpid()));
    fs::rename(out, old);
    fs::rename(tmp, out);
    fs::remove_all(old);
}

// Removes the `<out>.tmp-PID` / `<out>.old-PID` folders that a killed `loom compile` left beside
// \p out (PID no longer running); a live compile's folders are left alone.
void remove_stale_builds(const fs::path &out) {
    std::error_code ec;
    const std::string base = out.filename().string();
    for (const auto &e : fs::directory_iterator(out.parent_path(), ec)) {
        std::string n = e.path().filename().string();
        for (const char *tag : {".tmp-", ".old-"}) {
            std::string prefix = base + tag;
            if (n.rfind(prefix, 0) != 0) continue;
            std::string pid = n.substr(prefix.size());
            if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
            if (::kill((pid_t)std::stol(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
        }
    }
}

std::string read_text(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream os;
    os << f.rdbuf();
    return os.str();
}

std::string quote(const std::string &s) {
    std::string r = "'";
    for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
}

// Runs a shell command, its output going to \p log; UserError with the log's tail on failure.
void run_tool(const std::string &cmd, const fs::path &log, const std::string &what) {
    int rc = std::system((cmd + " >" + quote(log.string()) + " 2>&1").c_str());
    if (rc != 0) {
        std::string out = read_text(log);
        if (out.size() > 4000) out = "…" + out.substr(out.size() - 4000);
        throw UserError(str_cat("loom compile: ", what, " failed (", cmd, "):\n", out));
    }
}

// Where HalideRuntime.h lives (the glue is compiled against it).
std::string halide_include_dir() {
    std::vector<std::string> cands;
    if (const char *e = std::getenv("LOOM_HALIDE_INCLUDE")) cands.push_back(e);
#ifdef LOOM_HALIDE_INCLUDE_DIR
    cands.push_back(LOOM_HALIDE_INCLUDE_DIR);
#endif
    cands.insert(cands.end(), {"/usr/include/halide14", "/usr/include/halide", "/usr/include",
                               "/usr/local/include"});
    for (const auto &c : cands)
        if (fs::exists(fs::path(c) / "HalideRuntime.h")) return c;
    throw UserError("loom compile: cannot find HalideRuntime.h (looked in /usr/include/halide14 …); set "
                    "LOOM_HALIDE_INCLUDE to the folder holding it");
}

}  // namespace

Halide::Target aot_target(const std::string &name) {
    if (name == "host") return runnable_here(Halide::get_host_target());
    if (name == "cuda")
        return runnable_here(Halide::get_host_target())
            .with_feature(Halide::Target::CUDA)
            .with_feature(Halide::Target::CUDACapability80);
    user_check(Halide::Target::validate_target_string(name), "unknown target '", name,
               "'; valid: host, cuda, or a Halide target string such as x86-64-linux-avx2");
    Halide::Target t(name);
    // Halide compiles a CUDA target that names no capability (host-cuda) for sm_20, which has no
    // warp shuffles: Loom's GPU schedules reduce rows across a warp with them, and LLVM aborts
    // selecting shfl.idx. Such a target gets the capability `--target cuda` has.
    if (t.has_feature(Halide::Target::CUDA) && t.get_cuda_capability_lower_bound() < 30)
        t = t.with_feature(Halide::Target::CUDACapability80);
    return t;
}

std::string aot_manifest(const LoweredPipeline &p, const Halide::Target &target, const std::string &name) {
    std::ostringstream os;
    os << "loom-artifact 1\nname " << name << "\ntarget " << target.to_string() << "\nlibrary lib" << name
       << ".so\ncuda " << (target.has_feature(Halide::Target::CUDA) ? 1 : 0) << "\n";
    for (size_t k = 0; k < p.input_names.size(); k++) {
        os << "input " << p.input_names[k] << " " << dtype_name(p.input_dtypes[k]);
        for (auto d : p.input_shapes[k]) os << " " << d;
        os << "\n";
    }
    for (size_t k = 0; k < p.output_names.size(); k++) {
        os << "output " << p.output_names[k] << " " << dtype_name(p.output_dtypes[k]);
        for (auto d : p.output_shapes[k]) os << " " << d;
        os << "\n";
    }
    // A model compiled for every size: its dims (range, planned size) and each input's symbolic shape.
    for (const auto &sym : p.dynamic.symbols) {
        const DimRange &r = p.dynamic.ranges.at(sym);
        os << "dim " << sym << " " << r.lo << " " << r.hi << " " << p.dynamic.representative.at(sym) << "\n";
    }
    for (size_t k = 0; k < p.input_syms.size() && p.dynamic.active(); k++)
        if (!p.input_syms[k].empty()) os << "input_dims " << p.input_names[k] << " " << sym_shape_str(p.input_syms[k]) << "\n";
    return os.str();
}

namespace {

/// The C++ an artifact compiles beside Halide's objects (the C API glue, a cut model's chain, the
/// cuBLAS / cuDNN extern stages): their compile commands, which need nothing from Halide's compile
/// and so run while it does, and what the link then takes.
struct ToolBuild {
    struct Job {
        std::string cmd, what;
    };
    std::vector<Job> jobs;
    std::string objs;       ///< the objects they make, quoted, for ar and the link
    std::string libs;       ///< libraries the link needs (CUDA's)
    std::string link_hint;  ///< what to do when those libraries are not where CUDA_HOME says
    std::vector<fs::path> temporaries;  ///< removed once the libraries are built

    void compile(const std::string &cxx_cmd, const fs::path &src, const fs::path &o, const std::string &what) {
        jobs.push_back({cxx_cmd + " -c " + quote(src.string()) + " -o " + quote(o.string()), what});
        objs += " " + quote(o.string());
        temporaries.push_back(o);
    }
    /// Every job at once (each with its own log in \p dir); the first failure, in job order, throws.
    void run(const fs::path &dir) const {
        run_in_parallel(jobs.size(), [&](size_t k) {
            fs::path log = dir / ("build-" + std::to_string(k) + ".log");
            run_tool(jobs[k].cmd, log, jobs[k].what);
            fs::remove(log);
        });
    }
};

/// Writes the glue, the chain (when \p segs is a cut) and the extern stages' sources into \p tmp.
ToolBuild tool_sources(const LoweredPipeline &lowered, const SegmentedPipeline &segs, const Halide::Target &target,
                       const std::string &name, const std::string &fn, const fs::path &tmp, const std::string &cxx) {
    const bool cuda = target.has_feature(Halide::Target::CUDA);
    ToolBuild b;
    GlueSpec g;
    g.name = name;
    g.halide_fn = fn;
    g.target = target.to_string();
    g.cuda = cuda;
    g.input_names = lowered.input_names;
    g.input_shapes = lowered.input_shapes;
    g.input_dtypes = lowered.input_dtypes;
    g.output_names = lowered.output_names;
    g.output_shapes = lowered.output_shapes;
    g.output_dtypes = lowered.output_dtypes;
    g.dynamic = lowered.dynamic;
    g.input_syms = lowered.input_syms;
    g.output_syms = lowered.output_syms;
    write_text(tmp / (name + ".h"), glue_header(g));
    fs::path glue_cpp = tmp / (name + "_glue.cpp");
    write_text(glue_cpp, glue_source(g));
    const std::string halide_inc = " -I" + quote(halide_include_dir());
    // Host glue runs parallel loops on OpenMP when asked (<model>_set_threading).
    b.compile(cxx + " -std=c++17 -O2 -fPIC" + (cuda ? "" : " -fopenmp") + halide_inc, glue_cpp,
              tmp / (name + "_glue.o"), "compiling the C API glue");
    if (segs.segments.size() > 1) {
        fs::path src = tmp / (name + "_halide_chain.cpp");
        write_text(src, segment_chain_source(lowered, segs, fn));
        b.compile(cxx + " -std=c++17 -O2 -fPIC" + halide_inc, src, tmp / (name + "_halide_chain.o"),
                  "compiling the chain of the model's pipelines");
        b.temporaries.push_back(src);
    }
    // Extern stages calling cuBLAS / cuDNN (LowerOptions::gemm_extern, conv_extern): their C
    // functions are compiled in, and the shared object links the libraries from the toolkit
    // (rpath: the same path on the GPU machines; cuDNN is found through LD_LIBRARY_PATH there).
    struct ExternSource {
        std::vector<std::string> fns;  // the C functions the source defines
        const char *file, *what, *libs, *flag;  // flag: the `loom compile` switch that avoids it
        std::string (*source)();
    };
    const ExternSource externs[] = {
        {{kCublasSgemm, kCublasLtBiasAct, kCublasConv1x1, kCublasConv1x1Nhwc, kCublasBatched}, "_cublas", "the cuBLAS extern stage", " -lcublas -lcublasLt -lcudart",
         "--no-cublas", cublas_gemm_source},
        {{kCudnnConv, kCudnnConvPass}, "_cudnn", "the cuDNN extern stage", " -lcudnn -lcudart", "--no-cudnn", cudnn_conv_source},
        {{kCudnnAttention}, "_cudnn_attention", "the cuDNN attention extern stage", " -lcudnn -lcudart", "--no-cudnn",
         cudnn_attention_source},
    };
    for (const auto &e : externs) {
        bool called = false;
        for (const auto &f : e.fns)
            called |= std::find(lowered.extern_calls.begin(), lowered.extern_calls.end(), f) != lowered.extern_calls.end();
        if (!called) continue;
        user_check(cuda, "loom compile: ", e.what, " needs a CUDA target");
        fs::path src = tmp / (name + e.file + ".cpp");
        write_text(src, e.source());
        std::string cuda_dir = cuda_home();
        std::string hint = str_cat(" (its headers and libraries are looked for under CUDA_HOME=", cuda_dir,
                                   "; set CUDA_HOME, or compile with ", e.flag, " to use Halide's own kernels)");
        b.compile(cxx + " -std=c++17 -O2 -fPIC" + halide_inc + " -I" + quote(cuda_dir + "/include"), src,
                  tmp / (name + e.file + ".o"), "compiling " + std::string(e.what) + hint);
        b.link_hint += hint;
        if (b.libs.empty()) b.libs = " -L" + quote(cuda_dir + "/lib64") + " -Wl,-rpath," + quote(cuda_dir + "/lib64");
        b.libs += e.libs;
    }
    return b;
}

}  // namespace

AotArtifact compile_aot(const LoweredPipeline &lowered, const Halide::Target &target, const std::string &out_dir,
                        const AotOptions &options, const std::function<void(const std::string &)> &extra) {
    std::string name = sanitize_name(options.name.empty() ? std::string("model") : options.name);
    fs::path out = fs::absolute(out_dir);
    user_check(!fs::exists(out) || options.force, "loom compile: ", out.string(),
               " exists; pass --force to replace it");
    for (const auto &s : lowered.input_shapes)
        for (auto d : s) user_check(d > 0, "loom compile: input shapes must be static; bind symbolic dims with --input");
    user_check(!lowered.dynamic.active() || !target.has_feature(Halide::Target::CUDA),
               "loom compile: a CUDA artifact takes fixed sizes; bind the dims with --input, or compile for the host "
               "to serve every size");

    remove_stale_builds(out);
    fs::path tmp = out.parent_path() / (out.filename().string() + ".tmp-" + std::to_string(getpid()));
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    try {
        AotArtifact a;
        a.name = name;
        bool cuda = target.has_feature(Halide::Target::CUDA);
        std::string fn = name + "_halide";
        std::vector<Halide::Argument> args;
        for (const auto &ip : lowered.inputs) args.push_back(Halide::Argument(ip));
        // A model compiled for every size takes its sizes after the inputs (the glue's m_run_host_shaped).
        for (const auto &sym : lowered.dynamic.symbols) args.push_back(Halide::Argument(lowered.size_params.at(sym)));
        fs::path obj = tmp / (name + "_halide.o");
        // Register budgets: Halide's runtime goes into its own object, so that its
        // halide_cuda_initialize_kernels can be renamed and wrapped (codegen/ptx_register_caps.h).
        bool caps = cuda && !options.max_registers.empty();
        fs::path runtime_obj = tmp / (name + "_halide_runtime.o");
        // A large model is cut as the JIT cuts a CPU one (jit_segments.h): its pipelines compile in
        // parallel, and a generated chain is the function the glue calls (aot_segments.h). CUDA
        // models too (bench/DECISIONS.md#d51-jit-segments); the chain keeps their buffers on the device.
        // A model compiled for every size is cut too: its crossing buffers take each call's sizes.
        SegmentedPipeline segs = segment_pipeline(lowered, target, options.max_pipelines, SegmentRunner::Artifact);
        const bool cut = segs.segments.size() > 1;
        a.pipelines = (int)std::max<size_t>(1, segs.segments.size());
        std::string cxx = options.cxx;
        if (const char *e = std::getenv("LOOM_CXX")) cxx = e;

        // The C++ beside Halide's objects compiles while Halide does: one after another, those
        // compiles were a third of a CUDA `loom compile` (bench/DECISIONS.md#d51-jit-segments).
        ToolBuild tools = tool_sources(lowered, segs, target, name, fn, tmp, cxx);
        auto tools_done = std::async(std::launch::async, [&] { tools.run(tmp); });

        // Halide's object for one pipeline (and its C header when \p header is not empty); through
        // Loom's marking when it streams stores (codegen/streaming_stores.h).
        auto compile_object = [&](const Halide::Pipeline &pl, const std::vector<Halide::Argument> &pargs,
                                  const std::string &pfn, const Halide::Target &t, const fs::path &o,
                                  const fs::path &header) {
            std::set<std::string> marked = streaming_funcs_in(pl, *lowered.streaming_stores);
            if (!marked.empty() && !cuda) {
                compile_streaming_object(pl, pargs, pfn, t, o.string(), header.string(), marked);
                return;
            }
            std::map<Halide::OutputFileType, std::string> outs = {{Halide::OutputFileType::object, o.string()}};
            if (!header.empty()) outs[Halide::OutputFileType::c_header] = header.string();
            Halide::Pipeline(pl).compile_to(outs, pargs, pfn, t);
        };
        // Outputs the caller would write over inputs: each pipeline's lowered statement decides.
        // A pair of different shapes or types, or an output with update definitions (an element
        // stored more than once), never shares: its input is named "" so that no load matches.
        std::vector<InPlacePair> pairs;
        for (const auto &[in, out] : options.in_place_candidates) {
            Halide::Func o = lowered.realized_output(out);
            bool fits = lowered.input_shapes.at(in) == lowered.output_shapes.at(out) &&
                        lowered.input_dtypes.at(in) == lowered.output_dtypes.at(out) && !o.has_update_definition();
            pairs.push_back({fits ? lowered.inputs.at(in).name() : std::string(), o.name()});
        }
        InPlaceCheck in_place(pairs);
        const bool check_in_place = !pairs.empty() && !cuda;
        Halide::Pipeline whole = cut ? Halide::Pipeline() : lowered.pipeline();
        if (check_in_place) {
            if (cut)
                for (size_t k = 0; k < segs.segments.size(); k++)
                    in_place.watch(segs.segments[k].pipeline, k, segs.segments.size());
            else
                in_place.watch(whole, 0, 1);
        }
        std::vector<fs::path> segment_objs;
        auto t0 = std::chrono::steady_clock::now();
        try {
            if (cut) {
                for (size_t k = 0; k < segs.segments.size(); k++)
                    segment_objs.push_back(tmp / (segment_function(fn, k) + ".o"));
                run_in_parallel(segs.segments.size(), [&](size_t k) {
                    compile_object(segs.segments[k].pipeline, segment_arguments(lowered, segs, k),
                                   segment_function(fn, k), target.with_feature(Halide::Target::NoRuntime),
                                   segment_objs[k], {});
                }, segment_costs(segs));
                Halide::compile_standalone_runtime(runtime_obj.string(), target);
                write_text(tmp / (name + "_halide.h"),
                           str_cat("// ", name, " was compiled as ", segs.segments.size(),
                                   " Halide pipelines (codegen/aot_segments.h); this is the entry that runs them,\n"
                                   "// with Halide's calling convention: every input, then every output, as "
                                   "halide_buffer_t pointers.\n#pragma once\nextern \"C\" int ",
                                   fn, "_argv(void **args);\n"));
            } else {
                compile_object(whole, args, fn,
                               caps ? target.with_feature(Halide::Target::NoRuntime) : target, obj,
                               tmp / (name + "_halide.h"));
                if (caps) Halide::compile_standalone_runtime(runtime_obj.string(), target);
            }
        } catch (const Halide::Error &e) {
            throw UserError(str_cat("loom compile: Halide rejected the pipeline for ", target.to_string(), ": ",
                                    e.what()));
        }
        a.halide_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::map<std::string, int> budgets = options.max_registers;
        if (caps) {
            // Advisory (when the toolkit has ptxas): the driver assembles the PTX itself at load time.
            // One PTX module per pipeline; each holds its own Funcs' kernels.
            for (const fs::path &o : cut ? segment_objs : std::vector<fs::path>{obj}) {
                std::ifstream f(o, std::ios::binary);
                std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
                std::string ptx = embedded_ptx(bytes);
                if (ptx.empty()) continue;  // a pipeline with no kernel (library stages only)
                for (auto &w : settle_register_budgets(ptx, budgets, options.raise_spilling_budgets,
                                                       cuda_home() + "/bin/ptxas"))
                    a.warnings.push_back(std::move(w));
            }
        }
        tools_done.get();  // a failed tool compile throws here, naming what failed

        // Halide's objects: one, or a cut model's pipelines with the runtime they share.
        std::string objs;
        std::vector<fs::path> temporaries = tools.temporaries;
        if (cut) {
            for (const auto &so : segment_objs) objs += " " + quote(so.string());
            objs += " " + quote(runtime_obj.string());
            temporaries.insert(temporaries.end(), segment_objs.begin(), segment_objs.end());
            temporaries.push_back(runtime_obj);
        } else {
            objs = " " + quote(obj.string());
        }
        fs::path log = tmp / "build.log";
        if (caps) {
            run_tool("objcopy --redefine-sym halide_cuda_initialize_kernels=" + std::string(kRenamedInitializeKernels) +
                         " " + quote(runtime_obj.string()),
                     log, "renaming the CUDA runtime's kernel loader (objcopy, from binutils)");
            fs::path src = tmp / (name + "_register_caps.cpp"), o = tmp / (name + "_register_caps.o");
            write_text(src, ptx_register_caps_source(budgets));
            run_tool(cxx + " -std=c++17 -O2 -fPIC -c " + quote(src.string()) + " -o " + quote(o.string()), log,
                     "compiling the register budgets (gpu_max_registers)");
            objs += " " + quote(o.string());
            if (!cut) {  // a cut model's objects already hold the runtime
                objs += " " + quote(runtime_obj.string());
                temporaries.push_back(runtime_obj);
            }
            temporaries.push_back(o);
        }
        objs += tools.objs;
        fs::path lib_a = tmp / ("lib" + name + ".a"), lib_so = tmp / ("lib" + name + ".so");
        run_tool("ar rcs " + quote(lib_a.string()) + objs, log, "archiving the static library");
        run_tool(cxx + " -shared" + (cuda ? "" : " -fopenmp") + " -o " + quote(lib_so.string()) + objs + tools.libs +
                     " -ldl -lpthread",
                 log, "linking the shared object" + tools.link_hint);
        fs::remove(log);
        for (const auto &o : temporaries) fs::remove(o);
        write_text(tmp / "manifest.txt", aot_manifest(lowered, target, name));
        if (!options.schedule_text.empty()) write_text(tmp / "schedule.sched", options.schedule_text);
        if (options.link_libraries) *options.link_libraries = tools.libs;
        if (options.in_place) {
            *options.in_place = check_in_place ? in_place.verdicts() : std::vector<bool>(pairs.size(), false);
            for (size_t k = 0; k < pairs.size(); k++)
                if (pairs[k].input.empty()) (*options.in_place)[k] = false;
            if (check_in_place && debug_output()) {
                std::vector<std::string> why = in_place.reasons();
                for (size_t k = 0; k < pairs.size(); k++)
                    std::cerr << "in place " << pairs[k].output << " over " << pairs[k].input << ": "
                              << (why[k].empty() ? "yes" : "no, " + why[k]) << "\n";
            }
        }
        if (extra) extra(tmp.string());

        replace_directory(tmp, out);
        a.dir = out.string();
        a.static_lib = (out / ("lib" + name + ".a")).string();
        a.shared_lib = (out / ("lib" + name + ".so")).string();
        a.header = (out / (name + ".h")).string();
        a.halide_header = (out / (name + "_halide.h")).string();
        a.manifest = (out / "manifest.txt").string();
        return a;
    } catch (...) {
        std::error_code ec;
        fs::remove_all(tmp, ec);
        throw;
    }
}

}  // namespace loom
