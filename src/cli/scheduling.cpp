#include "cli/scheduling.h"

#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "autoschedule/autoschedule.h"
#include "autoschedule/gpu_schedule.h"
#include "ops/lower_graph.h"
#include "schedule/gpu_loop_lint.h"
#include "schedule/schedule_validate.h"
#include "support/error.h"

namespace loom::cli {

std::string file_sha256(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    user_check(f.good(), "cannot read '", path, "'");
    std::ostringstream ss;
    ss << f.rdbuf();
    std::string bytes = ss.str();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
    static const char *hex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; i++) out += hex[md[i] >> 4], out += hex[md[i] & 15];
    return out;
}

AutoscheduleFn autoscheduler_for(const Halide::Target &target) {
    if (target.has_gpu_feature())
        return [](const LoweredPipeline &p, const Halide::Target &t) { return gpu_auto_schedule(p, t); };
    return [](const LoweredPipeline &p, const Halide::Target &t) { return auto_schedule(p, t); };
}

LowerOptions library_lowering(const Halide::Target &target, const LibraryFlags &flags, const std::string &command) {
    LowerOptions lo;
    bool cuda = target.has_feature(Halide::Target::CUDA);
    user_check(cuda || !flags.tf32, command, ": --tf32 applies to cuBLAS/cuDNN on --target cuda only; drop it for ",
               target.to_string());
    lo.gemm_extern = cuda && !flags.no_cublas;
    lo.conv_extern = cuda && !flags.no_cudnn;
    lo.gemm_tf32 = (lo.gemm_extern || lo.conv_extern) && flags.tf32;
    lo.fuse_activation_epilogue = !flags.unfused_epilogues;
    lo.buffer_alignment = cuda ? 16 : 0;
    lo.pad_constant_rows = !cuda;
    lo.block_conv_weights = !cuda;
    lo.block_matmul_weights = !cuda;
    return lo;
}

void add_library_flags(CLI::App *cmd, LibraryFlags &flags) {
    cmd->add_flag("--no-cublas", flags.no_cublas, "cuda: lower GEMMs in Halide instead of calling cuBLAS");
    cmd->add_flag("--no-cudnn", flags.no_cudnn, "cuda: lower 2-D convolutions in Halide instead of calling cuDNN");
    cmd->add_flag("--unfused-epilogues", flags.unfused_epilogues,
                  "cuda: keep a GEMM's or conv's bias and activation in a Halide kernel instead of the library's fused epilogue");
    cmd->add_flag("--tf32", flags.tf32, "cuda: let cuBLAS and cuDNN use TF32 tensor cores (faster, ~1e-3 relative error)");
}

ScheduledModel schedule_model(const Graph &g, const std::string &spec, const Halide::Target &target,
                              const std::string &model_path, const LowerOptions &lower_options) {
    ScheduledModel m;
    m.pipeline = lower_graph(g, lowering_for_schedule(lower_options, spec));
    std::string sha = model_path.empty() ? "" : file_sha256(model_path);
    m.schedule = resolve_schedule(m.pipeline, target, spec, autoscheduler_for(target), &m.warnings, sha);
    if (m.schedule.model.empty()) m.schedule.model = std::filesystem::path(model_path).filename().string();
    if (m.schedule.sha256.empty()) m.schedule.sha256 = sha;
    if (m.schedule.target.empty()) m.schedule.target = target.to_string();
    validate_schedule(m.schedule, m.pipeline, target, &m.warnings);  // apply_schedule validates again, silently
    m.applied = apply_schedule(m.schedule, m.pipeline, target);
    for (auto &w : lint_gpu_loops(m.applied, m.pipeline)) m.warnings.push_back(w);
    return m;
}

}  // namespace loom::cli
