/// \file
/// GPU reductions that are kernels of their own (not fused into a row kernel): reduction_kernel
/// chooses one way of reducing from the reduction's extent and output count, then the way's
/// emitter writes it: serial per output thread (short), one block per output, or a split reduction
/// whose blocks add their partials atomically. A GEMM goes to gemm_kernel instead.

#include "autoschedule/gpu_schedule_internal.h"
#include "schedule/schedule_builtin.h"

namespace loom::gpu_autosched {

namespace {

// The ways a reduction kernel is mapped onto the GPU.
enum class ReductionWay {
    Gemm,            // a register-tiled matrix product (gemm_kernel)
    Default,         // several rvars or no pure vars: schedule_builtin.h's GPU default
    Short,           // under 256 elements: one output per thread, the reduction serial inside
    BlockPerOutput,  // many outputs, or not long enough to split: one block per output
    Split,           // few long outputs: blocks of kSplitChunk elements, partials added atomically
};

ReductionWay choose_reduction_way(const LoweredFunc &r) {
    if (gemm_like(r)) return ReductionWay::Gemm;
    int64_t k = rvar_extent(r);
    int64_t outs = product(r.extents);
    if (k < 256) return k < 0 || r.vars.empty() ? ReductionWay::Default : ReductionWay::Short;
    // A reduction to one value (a training step's loss) has no pure var to map onto blocks: its
    // chunks are the blocks, one when it is short.
    if (r.vars.empty()) return ReductionWay::Split;
    // Two outputs per SM of an H100 (132 SMs) keep every SM busy with whole blocks.
    if (outs >= 2 * 132 || k < 16384) return ReductionWay::BlockPerOutput;
    return ReductionWay::Split;
}

}  // namespace

void GpuCtx::reduction_kernel(const LoweredFunc &r) {
    switch (choose_reduction_way(r)) {
    case ReductionWay::Gemm: return gemm_kernel(r, r);
    case ReductionWay::Default:
        if (plan.channels_last.count(r.name))
            return channels_last_global_pool(r) ? channels_last_pool(r) : channels_last_reduction(r);
        for (auto &d : default_statements(r, target)) s.statements.push_back(d);
        return;
    case ReductionWay::Short: return short_reduction(r);
    case ReductionWay::BlockPerOutput: return block_per_output_reduction(r);
    case ReductionWay::Split: return split_reduction(r);
    }
}

// Short reductions (small GEMMs, pools): one output per thread, the reduction serial inside;
// guarded tails so that small extents never read outside the inputs.
void GpuCtx::short_reduction(const LoweredFunc &r) {
    pointwise_kernel(r);
    ScheduleStatement up(r.name, 0);
    std::string x = r.vars.back(), xo = ident(r, x + "o"), xt = ident(r, x + "t");
    int64_t nx = r.extents.back();
    int tx = (int)std::min<int64_t>(kPointThreads, pow2_floor(nx));
    up.add("split", {x, xo, xt, tx, tail(nx % tx == 0)});
    std::vector<ScheduleArg> order = {r.update_rvars[0][0], xt};
    std::vector<ScheduleArg> threads = {xt}, blocks = {xo};
    if (r.vars.size() >= 2) {
        std::string y = r.vars[r.vars.size() - 2], yo = ident(r, y + "o"), yt = ident(r, y + "t");
        int64_t ny = r.extents[r.vars.size() - 2];
        int ty = (int)std::max<int64_t>(1, std::min<int64_t>(kPointThreads / tx, pow2_floor(ny)));
        up.add("split", {y, yo, yt, ty, tail(ny % ty == 0)});
        order.push_back(yt);
        threads.push_back(yt);
        blocks.push_back(yo);
    }
    if (r.vars.size() >= 3) {
        std::string outer = fuse_outer(up, r, (int)r.vars.size() - 2);
        // Past gridDim.z's limit the fused outer var is blockIdx.x instead.
        blocks.insert(outer_extent(r, (int)r.vars.size() - 2) > kMaxGridYZ ? blocks.begin() : blocks.end(), outer);
    }
    for (auto &b : blocks) order.push_back(b);
    up.add("reorder", order).add("gpu_threads", threads).add("gpu_blocks", blocks);
    s.statements.push_back(up);
}

// One block per output: the pure stage (the init) is mapped like a pointwise kernel, the partials
// computed at the innermost block var (add_blocks maps up to three innermost pure vars onto blocks).
void GpuCtx::block_per_output_reduction(const LoweredFunc &r) {
    pointwise_kernel(r);
    block_reduction(r, r.name, r.vars.empty() ? "" : r.vars.back(), kRowThreads, false);
    ScheduleStatement up(r.name, 0);
    add_blocks(up, r);
    s.statements.push_back(up);
}

// Few outputs: chunks of kSplitChunk elements, one block each. The block's partial is computed
// inside the same kernel, at the block var of the output's update, which adds it atomically: one
// kernel (plus the init), not a partials kernel and a combining kernel
// (bench/DECISIONS.md#d40-gpu-split-reduction-one-kernel).
void GpuCtx::split_reduction(const LoweredFunc &r) {
    int64_t k = rvar_extent(r);
    int64_t chunk = std::min<int64_t>(kSplitChunk, (k + kRowThreads - 1) / kRowThreads * kRowThreads);
    std::string rv = r.update_rvars[0][0];
    std::string rb = ident(r, rv + "b"), rc = ident(r, rv + "c"), blk = r.name + "_blk";
    int64_t nb = (k + chunk - 1) / chunk;
    ScheduleStatement pure_st(r.name);
    pure_st.comments.push_back("split reduction: " + std::to_string(nb) + " blocks of " + std::to_string(chunk) +
                               " elements, each adding its partial atomically");
    pure_st.add("compute_root").add("gpu_single_thread");  // the init
    s.statements.push_back(pure_st);
    ScheduleStatement up(r.name, 0);
    up.add("split", {rv, rb, rc, (int64_t)chunk, rtail(k % chunk == 0)});
    up.add("rfactor", {rb, "b"}, blk);
    s.statements.push_back(up);
    ScheduleStatement up2(r.name, 0);
    up2.add("atomic");
    add_blocks(up2, r, {rb});
    s.statements.push_back(up2);
    // The block's partial summed in the registers of the thread that combines it (BlockCombine).
    total_in_registers(blk, r.name, rb, "b");
    // Each block: kRowThreads threads accumulate coalesced partials, in two levels.
    block_partials(r, blk, rc, chunk, kRowThreads, r.name, rb, r.name + "_thr", r.name + "_thr2", {},
                   BlockCombine{kVec, true});
}

}  // namespace loom::gpu_autosched
