#include <ctime>
#include <cstdlib>
#include <iostream>
#include "cli/scheduling.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autoschedule/autoschedule.h"
#include "autoschedule/gpu_schedule.h"
#include "lower/tanh_gelu.h"
#include "ops/lower_graph.h"
#include "schedule/gpu_loop_lint.h"
#include "schedule/schedule_validate.h"
#include "support/error.h"
#include "support/debug_output.h"

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
    Precision precision = library_precision(flags, command);
    user_check(cuda || precision == Precision::FP32, command, ": --precision ", precision_name(precision),
               " applies to cuBLAS/cuDNN on --target cuda only (CPU kernels compute in the model's type); drop it for ",
               target.to_string());
    lo.gemm_extern = cuda && !flags.no_cublas;
    lo.conv_extern = cuda && !flags.no_cudnn;
    user_check(precision == Precision::FP32 || lo.gemm_extern || lo.conv_extern, command, ": --precision ",
               precision_name(precision), " sets the math of the cuBLAS/cuDNN stages, and --no-cublas --no-cudnn "
               "leaves none (Halide's kernels compute in FP32); drop --precision or one of them");
    lo.gemm_precision = (lo.gemm_extern || lo.conv_extern) ? precision : Precision::FP32;
    user_check(!flags.split_tf32 || (lo.gemm_extern && precision == Precision::FP32), command,
               ": --split-tf32 runs FP32 GEMMs as 3xTF32 on cuBLASLt, so it needs --target cuda, cuBLAS (no "
               "--no-cublas) and --precision fp32 (got ", precision_name(precision), cuda ? "" : " on the CPU",
               "); drop --split-tf32 or those flags");
    lo.gemm_split_tf32 = flags.split_tf32;
    // Channels-last cuDNN convs where tensor cores run them (FP32's FMA kernels are slower NHWC,
    // save for 1x1 convs: choose_fp32_conv_layout decides FP32 by the graph's conv mix):
    // bench/DECISIONS.md#d115-cuda-bf16-nhwc-convs, #d117-cuda-tf32-nhwc-convs.
    lo.conv_nhwc = lo.conv_extern && (precision == Precision::TF32 || precision == Precision::BF16);
    // On the CPU a depthwise conv may be vectorized over its channels, one load per tap's weights
    // (bench/DECISIONS.md#d153-depthwise-convs-vectorized-over-channels).
    lo.channels_last_depthwise_filters = !cuda || lo.conv_nhwc;
    user_check(!flags.f16_attention || (cuda && !flags.no_cudnn && precision == Precision::TF32), command,
               ": --f16-attention runs TF32 attention as cuDNN's on FP16 copies, so it needs --target cuda, cuDNN (no "
               "--no-cudnn) and --precision tf32 (got ", precision_name(precision), cuda ? "" : " on the CPU",
               flags.no_cudnn ? ", --no-cudnn" : "", "); drop --f16-attention or those flags");
    lo.attention_f16 = flags.f16_attention;
    lo.attention_extern = cuda && !flags.no_cudnn && (precision == Precision::BF16 || lo.attention_f16);
    lo.fuse_activation_epilogue = !flags.unfused_epilogues;
    lo.buffer_alignment = cuda ? 16 : 0;
    lo.pad_constant_rows = !cuda;
    lo.block_conv_weights = !cuda;
    lo.block_matmul_weights = !cuda;
    return lo;
}

double spatial_conv_share(const Graph &g) {
    double spatial = 0, all = 0;
    for (const auto &n : g.nodes) {
        if (n.op != "Conv" || n.inputs.size() < 2 || n.outputs.empty()) continue;
        const Shape &w = g.value(n.inputs[1]).shape, &y = g.value(n.outputs[0]).shape;
        if (w.size() != 4 || y.size() != 4) continue;
        const int64_t group = n.get_int("group", 1);
        if (group > 1 && w[1] == 1) continue;  // depthwise: a Halide kernel, not cuDNN's
        double macs = (double)w[1] * (double)w[2] * (double)w[3];
        for (auto d : y) macs *= (double)std::max<int64_t>(d, 1);
        all += macs;
        if (group == 1 && w[2] * w[3] > 1) spatial += macs;
    }
    return all > 0 ? spatial / all : 0;
}

void choose_fp32_conv_layout(const Graph &g, LowerOptions &lo) {
    if (!lo.conv_extern || lo.gemm_precision != Precision::FP32) return;
    lo.conv_nhwc = lo.channels_last_depthwise_filters = spatial_conv_share(g) < kFp32NhwcMaxSpatialShare;
}

AttentionFusion attention_fusion(const Halide::Target &target, const LowerOptions &lo) {
    if (!target.has_gpu_feature()) return AttentionFusion::Halide;
    return lo.attention_extern ? AttentionFusion::Cudnn : AttentionFusion::Off;
}

double linear_exact_gelu(const Halide::Target &target, const LowerOptions &lo) {
    const bool fuse = target.has_gpu_feature() && lo.gemm_extern && lo.fuse_activation_epilogue &&
                      tanh_gelu_within_rounding(lo.gemm_precision);
    return fuse ? exact_gelu_region_slack(lo.gemm_precision) : -1;
}

Precision library_precision(const LibraryFlags &flags, const std::string &command) {
    if (flags.precision.empty()) return flags.tf32 ? Precision::TF32 : Precision::FP32;
    Precision p;
    try {
        p = parse_precision(flags.precision);
    } catch (const UserError &e) {
        throw UserError(command + ": --precision: " + e.what());
    }
    user_check(!flags.tf32 || p == Precision::TF32, command, ": --tf32 is --precision tf32, and --precision ",
               flags.precision, " asks for another; give one of them");
    return p;
}

void add_library_flags(CLI::App *cmd, LibraryFlags &flags) {
    cmd->add_flag("--no-cublas", flags.no_cublas, "cuda: lower GEMMs in Halide instead of calling cuBLAS");
    cmd->add_flag("--no-cudnn", flags.no_cudnn, "cuda: lower 2-D convolutions in Halide instead of calling cuDNN");
    cmd->add_flag("--unfused-epilogues", flags.unfused_epilogues,
                  "cuda: keep a GEMM's or conv's bias and activation in a Halide kernel instead of the library's fused epilogue");
    cmd->add_flag("--tf32", flags.tf32, "cuda: let cuBLAS and cuDNN use TF32 tensor cores (same as --precision tf32)");
    cmd->add_flag("--split-tf32", flags.split_tf32,
                  "cuda, fp32: GEMMs with constant weights as 3xTF32 (operands split into TF32 high and low parts, "
                  "three tensor-core products accumulated in FP32): faster than FP32 FMA, its error several times FMA's, "
                  "growing with K (bench/DECISIONS.md#d200-cuda-fp32-gemms-as-3xtf32-opt-in)");
    cmd->add_flag("--f16-attention", flags.f16_attention,
                  "cuda, tf32: scaled-dot-product attention as one cuDNN kernel on FP16 copies of q, k and v (TF32's "
                  "10 mantissa bits, FP16's range: an element past 65504 overflows) instead of two TF32 products and a "
                  "softmax over the S x S scores (bench/DECISIONS.md#d208-cuda-tf32-attention-on-fp16-copies)");
    cmd->add_option("--precision", flags.precision,
                    "cuda: fp32 | tf32 | bf16 | fp16: GEMMs and convs (cuBLAS/cuDNN) on tensor cores with operands in "
                    "that precision and FP32 accumulation, as autocast; everything else and the outputs stay FP32");
}

namespace {

/// schedule_model up to (not including) apply_schedule; \p c2 receives when planning ended.
ScheduledModel plan_model(const Graph &g, const std::string &spec, const Halide::Target &target,
                          const std::string &model_path, const LowerOptions &lower_options, std::clock_t &c2,
                          const AutoscheduleFn &autofn = nullptr) {
    ScheduledModel m;
    std::clock_t c0 = std::clock();
    m.pipeline = lower_graph(g, lowering_for_schedule(lower_options, spec));
    std::clock_t c1 = std::clock();
    std::string sha = model_path.empty() ? "" : file_sha256(model_path);
    m.schedule = resolve_schedule(m.pipeline, target, spec, autofn ? autofn : autoscheduler_for(target), &m.warnings, sha);
    if (m.schedule.model.empty()) m.schedule.model = std::filesystem::path(model_path).filename().string();
    if (m.schedule.sha256.empty()) m.schedule.sha256 = sha;
    if (m.schedule.target.empty()) m.schedule.target = target.to_string();
    validate_schedule(m.schedule, m.pipeline, target, &m.warnings);  // apply_schedule validates again, silently
    c2 = std::clock();
    if (debug_output())
        std::cerr << "loom: CPU s: lowering " << double(c1 - c0) / CLOCKS_PER_SEC << ", schedule "
                  << double(c2 - c1) / CLOCKS_PER_SEC << "\n";
    return m;
}

/// The rest of schedule_model: applies \p m's schedule (planning ended at \p c2).
void apply_planned(ScheduledModel &m, const Halide::Target &target, std::clock_t c2, bool assume_long_enough) {
    m.applied = apply_schedule(m.schedule, m.pipeline, target, assume_long_enough);
    if (debug_output())
        std::cerr << "loom: CPU s: apply " << double(std::clock() - c2) / CLOCKS_PER_SEC << "\n";
    for (auto &w : lint_gpu_loops(m.applied, m.pipeline)) m.warnings.push_back(w);
}

}  // namespace

ScheduledModel schedule_model(const Graph &g, const std::string &spec, const Halide::Target &target,
                              const std::string &model_path, const LowerOptions &lower_options,
                              const AutoscheduleFn &autofn) {
    std::clock_t c2;
    ScheduledModel m = plan_model(g, spec, target, model_path, lower_options, c2, autofn);
    apply_planned(m, target, c2, false);
    return m;
}

std::string EverySizeModel::describe() const {
    if (!short_sizes) return "";
    return "sizes where not (" + long_enough.text + ") run a second plan, made for " + short_plan + "\n";
}

EverySizeModel schedule_compiled_for_every_size(const Graph &g,
                                                const std::function<Graph(const std::vector<std::string> &)> &prepare_at,
                                                const std::string &spec, const Halide::Target &target,
                                                const std::string &model_path, bool small_size_plan,
                                                const AutoscheduleFn &autofn) {
    EverySizeModel r;
    std::clock_t c2;
    r.main = plan_model(g, spec, target, model_path, {}, c2, autofn);
    if (small_size_plan && spec == "auto" && !target.has_gpu_feature() && g.dynamic.active())
        plan_size_specializations(r.main.schedule, r.main.pipeline, target, &r.long_enough);
    // The symbols the kernels' lengths test go to the small end of their ranges.
    std::map<std::string, int64_t> sizes = g.dynamic.representative;
    bool smaller = false;
    if (r.long_enough.condition.defined())
        for (const auto &[sym, least] : g.dynamic.least_sizes()) {
            auto param = r.main.pipeline.size_params.find(sym);
            if (param == r.main.pipeline.size_params.end() ||
                !Halide::Internal::expr_uses_var(r.long_enough.condition, param->second.name()))
                continue;
            // The small end, rounded up to the power of two the representative size is a multiple
            // of (at most the small end): a detector planned at 640 gets 32 where its requirements
            // first accept 29, so that the second plan's tiles divide the sizes it meets.
            int64_t rep = sizes.at(sym), align = 1;
            while (align * 2 <= least && rep % (align * 2) == 0) align *= 2;
            int64_t small = std::min(rep, (least + align - 1) / align * align);
            smaller |= small < rep;
            sizes[sym] = small;
        }
    if (!smaller) {
        r.long_enough = {};
        apply_planned(r.main, target, c2, false);
        return r;
    }
    std::vector<std::string> flags;
    for (const auto &name : g.inputs) {
        const ValueInfo &vi = g.value(name);
        std::string f = name + "=";
        std::vector<int64_t> shape = vi.sym.empty() ? vi.shape : eval_shape(vi.sym, sizes);
        for (size_t d = 0; d < shape.size(); d++) f += (d ? "x" : "") + std::to_string(shape[d]);
        flags.push_back(f);
        r.short_plan += (r.short_plan.empty() ? "" : " ") + f;
    }
    std::clock_t c2s;
    r.short_sizes = std::make_shared<ScheduledModel>(plan_model(prepare_at(flags), spec, target, model_path, {}, c2s, autofn));
    apply_planned(*r.short_sizes, target, c2s, false);
    c2 = std::clock();
    apply_planned(r.main, target, c2, true);
    return r;
}

std::unique_ptr<JitModel> compile_every_size(const EverySizeModel &m, const Halide::Target &target) {
    auto jit = with_schedule_errors(m.main.applied, [&] { return std::make_unique<JitModel>(m.main.pipeline, target); });
    if (m.short_sizes)
        jit->serve_short_sizes_with(with_schedule_errors(m.short_sizes->applied, [&] {
                                        return std::make_unique<JitModel>(m.short_sizes->pipeline, target);
                                    }),
                                    m.long_enough.condition);
    return jit;
}

}  // namespace loom::cli
