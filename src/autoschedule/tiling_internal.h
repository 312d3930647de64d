/// \file
/// Private to src/autoschedule: the per-kernel schedule emitter that emit_kernel runs, split over
/// sources the way Halide splits its simplifier (Simplify_Internal.h): tiling.cpp holds the
/// common members (statements, inlining, pure loops, rfactor rows), the row, pointwise, reduction
/// and generic kernels and emit_kernel; tiling_gemm.cpp and tiling_conv.cpp hold the GEMM and conv
/// emitters. The GEMM, the conv and the split reduction run in three steps: choose (a GemmPlan,
/// ConvPlan or SplitReductionPlan of plain decisions), emit (the statements of that plan), explain
/// (the comment text on its tile loop).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "autoschedule/autoschedule_internal.h"

namespace loom::autosched {

/// The arguments of one primitive call.
using Args = std::vector<ScheduleArg>;

/// Largest power-of-two lane count <= V that \p extent can hold (0 when under 4 lanes).
inline int fit_lanes(int V, int64_t extent) {
    int l = V;
    while (l > 1 && l > extent) l /= 2;
    return l >= 4 || (l >= 2 && V <= 4) ? l : 0;
}

/// The conv whose row blocks compute \p pad, a padded conv input in a kernel of its own, alone or
/// with producers inlined into it (that kernel then emits only their compute_inline: Ctx::conv
/// places the pad), or "".
std::string conv_of_pad(const LoweredPipeline &p, const std::map<std::string, FuncInfo> &info,
                        const FusionPlan &plan, const MachineModel &m, const std::string &pad);

/// A GEMM kernel's decisions (Ctx::choose_gemm), which Ctx::emit_gemm turns into statements.
struct GemmPlan {
    enum class Path {
        Generic,       ///< no vectorised micro-kernel applies: Ctx::generic
        WrapperTiles,  ///< F computed per micro-kernel tile of a wrapper T (Ctx::kernel_tiles)
        CacheBlocked,  ///< F per MC x NCt tile of T (its epilogue or a wrapper), k in chunks of KC
        RootTiles,     ///< F at root: column panels of NC, micro-kernel tiles in its update
        RootRagged,    ///< F at root, columns the tile does not divide: one guarded vector a step
    };
    Path path = Path::Generic;
    std::string F;             ///< the matmul
    std::string T;             ///< the Func whose tiles hold F's results: F, its epilogue or wrapper
    bool wrap = false;         ///< T is a fresh wrapper `<F>_out` (F.in())
    GemmTile gt;               ///< micro-kernel MR x NR and cache blocking
    int V = 1;                 ///< vector lanes
    int64_t M = 0, N = 0, K = 0;
    int esize = 4;             ///< bytes per element (for the comment's strip and panel sizes)
    bool few_rows = false;     ///< fewer than two row tiles per core
    bool block = false;        ///< column panels: NC < N
    bool exact_rows = false;   ///< MR divides M (else the last row tile is guarded)
    bool ksplit = false, jsplit = false, isplit = false;  ///< CacheBlocked: k chunks, j and i tiles
    bool kunroll = false;      ///< the update's k loop unrolled by four
    bool by_cols = false;      ///< RootRagged: the column vectors are the tasks
    bool batch_parallel = false;  ///< the outermost batch var is the parallel loop
};

/// A conv kernel's decisions (Ctx::choose_conv), which Ctx::emit_conv turns into statements.
struct ConvPlan {
    enum class Path {
        Generic,          ///< not a conv these paths tile: Ctx::generic
        ChannelTile,      ///< output channels vectorised over blocked weights: WT (w) x HT rows x CB
        DepthwiseOutput,  ///< a depthwise graph output per row of a channel block of its wrapper T
        DepthwiseBlocks,  ///< a depthwise conv under its epilogue (Ctx::depthwise_blocks)
        DepthwiseChannels,  ///< a depthwise conv under its epilogue (or wrapper), vectorized over channels
        RowBlocks,        ///< under an epilogue: V (w) x HT rows x CB channels, tasks of row blocks
        EpilogueTiles,    ///< under an epilogue: WT x CB tiles, tasks of (n, channel block, rows)
        RootTiles,        ///< no epilogue: the update's own WT x CB tiles, channels in parallel
    };
    Path path = Path::Generic;
    std::string F;           ///< the conv
    std::string T;           ///< the Func whose loop nest holds F: F, its epilogue or wrapper
    bool wrap = false;       ///< T is a fresh wrapper `<F>_out` (F.in())
    int V = 1;               ///< vector lanes
    int64_t W = 0;           ///< row width (innermost extent)
    int WT = 1;              ///< tile width along w
    int vl = 0;              ///< lanes of its vectors (0: not vectorised)
    int nvec = 1;            ///< vectors per tile row
    int CB = 1;              ///< output channels per tile
    int HT = 1;              ///< rows per tile (RowBlocks, ChannelTile)
    int RT = 1;              ///< ChannelTile: tile rows per task (rows outer)
    bool rows_outer = false;   ///< ChannelTile: tasks of rows, every channel block inside
    bool block_tasks = false;  ///< ChannelTile: tasks of one channel block, its row blocks inside
    bool round_up = false;   ///< a tile past the row's end is computed into the allocation (RoundUp)
};

/// How a reduction with too few outputs for the cores is split into parallel partial results
/// (Ctx::choose_split_reduction), which Ctx::emit_split_reduction turns into an rfactor.
struct SplitReductionPlan {
    bool serial = false;           ///< no split: left serial (no even split, or a unit outer RVar)
    bool over_outer_rvar = false;  ///< several RVars: the outermost is the parallel var
    int64_t n = 0;                 ///< terms of the innermost RVar
    int64_t chunk = 0;             ///< one RVar: terms per partial result (n / partials)
    bool vec = false;              ///< the partials vectorised over the innermost RVar's lanes
};

/// The schedule emitter of one kernel: what emit_kernel was given, and one member per kind of
/// kernel that appends the statements of its loop nest to `out`.
struct Ctx {
    const LoweredPipeline &p;                      ///< the whole pipeline
    const std::map<std::string, FuncInfo> &info;   ///< analyze()'s facts, per Func
    const FusionPlan &plan;                        ///< every kernel and Func decision
    const Kernel &k;                               ///< the kernel being emitted
    const Halide::Target &target;                  ///< the compile target
    const MachineModel &m;                         ///< cores, vector width, caches
    const ScheduleKnobs &knobs;                    ///< tuning overrides (0: the model's choice)
    std::vector<ScheduleStatement> &out;           ///< the schedule, appended to
    std::vector<std::string> &func_names;          ///< names taken, for fresh() Func names
    KernelTiling &tiling;                          ///< the chosen tiling, recorded as data

    /// Facts about Func \p n.
    const FuncInfo &fi(const std::string &n) const { return info.at(n); }
    /// The lowered record of Func \p n.
    const LoweredFunc &lf(const std::string &n) const { return *fi(n).lf; }
    /// Vector lanes of Func \p n's element type.
    int lanes(const std::string &n) const { return m.lanes(lf(n).dtype); }
    /// Lanes that \p f's rows are vectorized with (fit_lanes), or 0 for scalar rows: a padded input
    /// (LoweredFunc::padded_input) whose rows hold fewer than 4 vectors stays scalar, since every
    /// vector of such a row meets the border and reads through clamped indices, a gather per lane.
    int row_lanes(const std::string &f) const;

    // --- common (tiling.cpp) ---

    /// Pure vars and every update's RVars of \p n (names a fresh var must avoid).
    std::vector<std::string> names_of(const std::string &n) const;
    /// Appends a statement for stage \p stage (-1: pure) of \p f.
    ScheduleStatement &add(const std::string &f, int stage = -1);
    /// Adds the plan's reason for \p f's placement to \p st's comments.
    void note(ScheduleStatement &st, const std::string &f);
    /// A depthwise conv \p F under its epilogue \p T, whose statement conv() began in \p st (it
    /// computes T at root): tasks of channel blocks (tiling_conv.cpp).
    void depthwise_blocks(ScheduleStatement &st, const std::string &T, const std::string &F);
    /// A depthwise conv \p F under its epilogue (or wrapper) \p T vectorized over its channels, its padded
    /// input stored channels innermost (Ctx::depthwise_channels says when; tiling_conv.cpp).
    void depthwise_channel_tiles(ScheduleStatement &st, const std::string &T, const std::string &F);
    /// compute_inline for the kernel's inlined members, but those in \p placed (scheduled otherwise).
    void inline_members(const std::set<std::string> &placed = {});
    std::set<std::string> place_member_pads(const std::string &F, const std::string &owner, const std::string &var);
    /// Row reduction \p s vectorised by rfactor, its partial computed at \p at_func.\p at_var;
    /// false when it does not fit. \p row_tile: that loop holds several rows, so the partial is
    /// stored lanes innermost (each row's lanes one dense vector).
    bool rfactor_rows(const std::string &s, const std::string &at_func, const std::string &at_var,
                      bool row_tile = false);
    /// Reduction \p s over several whole inner dims: its RVars fused, vectorised by rfactor, the
    /// partial computed at \p s.\p at_var; false when the RVars do not walk one dense block.
    bool rfactor_block(const std::string &s, const std::string &at_var);
    /// Rows of a row kernel that share one load of its row-broadcast reads (1: no tile); see
    /// tiling.cpp. \p depth: the row dims; \p per: rows per parallel task.
    int64_t row_tile(int depth, int64_t per) const;
    /// Whether a row kernel prefetches its next row (tile) in its output pass: statistics per
    /// whole row of at least 1 KiB, more bytes than the L2s hold (tiling.cpp).
    bool prefetches_next_tile() const;
    /// Whether the kernel's root qualifies for stream_stores (all but its vectorized loop): a
    /// graph output, a pure row or pointwise Func on x86, a kernel moving more than the LLC.
    bool streams_output() const;
    /// stream_stores on the kernel's root when streams_output() and a vectorized loop writes it
    /// (tiling.cpp says why).
    void stream_output(size_t first);
    /// Vectorizes update \p u of \p f along its innermost pure var, the reduction inside each
    /// vector (split, reorder so that the RVars run within the vector's loop), as wide as the
    /// pure definition's vectors (fit_lanes): a short row (a 4-wide pool, a 10-class GEMM) gets
    /// narrower ones rather than none, and the update is not left unscheduled beside a scheduled
    /// pure definition (which Halide warns about). Returns the outer var's name, "" when the row
    /// is too short or not contiguous.
    std::string vectorize_update(ScheduleStatement &u, const std::string &f, std::vector<std::string> &used);
    /// Rows of \p row_elems elements per parallel task.
    int64_t rows_per_task(double rows, double row_elems) const;
    /// Parallel outer and vectorised inner loops of a root's pure stage; returns the row var.
    std::string pure_loops(ScheduleStatement &st, const std::string &f, int depth);
    /// Width of each input of a concat along \p f's inner var that unrolls as vector copies, or 0.
    int64_t concat_piece(const std::string &f) const;
    /// The kernel's fusion and cost estimate, as comments on \p st.
    void comment_kernel(ScheduleStatement &st);

    // --- row, pointwise and reduction kernels (tiling.cpp) ---

    /// A pointwise or row kernel: the root's loops, row members computed per row.
    void rows_or_pointwise();
    /// A pointwise kernel that reads its producer transposed: tiles, the producer's tile copied
    /// first (`in`); false when the kernel does not transpose (tiling.cpp says why).
    bool transposed_tile();
    /// A rank-2 pointwise kernel whose inlined member reads a product transposed in cache: tiles
    /// of one vector by one vector, the transposed var unrolled; false when none (tiling.cpp).
    bool transposed_member_tiles();
    /// Prefetches of the next row of the inputs that costly row-buffered Func \p f reads.
    void prefetch_next_row(ScheduleStatement &st, const std::string &f, int lv);
    /// prefetch on \p st of each graph input that \p f reads point for point (through inlined
    /// producers), \p rows rows ahead of its \p lv-lane vector loop over the row; \p why ends
    /// the comment.
    void prefetch_rows_ahead(ScheduleStatement &st, const std::string &f, int lv, int64_t rows,
                             const std::string &why);
    /// Schedule names of the graph inputs that \p f reads point for point (as many points as f),
    /// directly or through inlined producers.
    std::vector<std::string> point_read_inputs(const std::string &f) const;
    /// Graph inputs that \p f reads directly or through producers inlined into it.
    void collect_inlined_inputs(const std::string &f, std::set<std::string> &inputs) const;
    /// A reduction kernel: parallel over outputs, or rfactor partials when they are too few.
    void reduction();
    /// A reduction with outputs enough for the cores, its root's statement at out[\p root_at].
    void reduction_per_output(size_t root_at);
    /// How a reduction with too few outputs splits (choose).
    SplitReductionPlan choose_split_reduction() const;
    /// The comment on \p sp's rfactor, or on the root when it is left serial ("" for none).
    std::string explain_split_reduction(const SplitReductionPlan &sp) const;
    /// The rfactor and the partials' loops of \p sp (the root's statement at out[\p root_at]).
    void emit_split_reduction(size_t root_at, const SplitReductionPlan &sp);

    // --- GEMM kernels (tiling_gemm.cpp) ---

    /// The kernel's first member placed \p pl, or "".
    std::string member_with(Placement pl) const;
    /// The GEMM's prologue (Placement::Block) computed per row block \p par of \p owner (its
    /// epilogue or wrapper).
    void block_members(const std::string &owner, const std::string &par);
    /// A GEMM kernel: register micro-kernel, cache blocking under an epilogue (choose, emit).
    void gemm();
    /// The GEMM kernel's path, tiles and flags; reads the kernel, writes nothing but a fresh
    /// wrapper name into func_names.
    GemmPlan choose_gemm();
    /// The comment on the statement of \p g's tile loop (micro-kernel, tiles, L1/L2 footprint).
    std::string explain_gemm(const GemmPlan &g) const;
    /// The statements of \p g: the wrapper, T's tile loops, F and its update, the members.
    void emit_gemm(const GemmPlan &g);
    /// Per path of emit_gemm: completes T's statement \p st (compute_root) and adds F's.
    void kernel_tiles(ScheduleStatement &st, const GemmPlan &g);
    void gemm_cache_blocked(ScheduleStatement &st, const GemmPlan &g);
    void gemm_root_ragged(ScheduleStatement &st, const GemmPlan &g);
    /// A batch-1 GEMV's update \p u split over blocks of B's rows, one task each (rfactor).
    void gemv_row_blocks(ScheduleStatement &u, const GemmPlan &g, int tasks);
    void gemm_root_tiles(ScheduleStatement &st, const GemmPlan &g);

    // --- conv kernels (tiling_conv.cpp) ---

    /// Conv \p F's padded inputs computed at \p owner.\p var (\p per: for the comment).
    void place_pads(const std::string &F, const std::string &owner, const std::string &var, const std::string &per);
    /// A conv kernel: channel tiles, else direct convolution tiles along rows (choose, emit).
    void conv();
    /// The conv kernel's path and tile; reads the kernel, writes nothing but a fresh wrapper name
    /// into func_names.
    ConvPlan choose_conv();
    /// The comment on the statement of \p c's tile loop (tile, accumulators, reduction).
    std::string explain_conv(const ConvPlan &c) const;
    /// The statements of \p c: the wrapper, T's loops, F and its update, the members.
    void emit_conv(const ConvPlan &c);
    /// ConvPlan::ChannelTile's tile and tasks in \p c (whose F it was given).
    void choose_channel_tile(ConvPlan &c);
    /// Per path of emit_conv: completes T's statement \p st (compute_root) and adds F's.
    void channel_tile(ScheduleStatement &st, const ConvPlan &c);
    /// The plan's conv first, then every other conv of the kernel computed per tile of the same
    /// epilogue (a residual block's downsample conv beside its last conv): each gets the plan's
    /// statements with its own vars.
    std::vector<std::string> tile_convs(const ConvPlan &c) const;
    /// The producer that 1x1 conv \p X (tiled \p c) reads from a channels-innermost copy, or ""
    /// (tiling_conv.cpp says when that pays). None where the producer is stored so itself.
    std::string staged_input(const std::string &X, const ConvPlan &c) const;
    /// Whether the conv kernel rooted at \p root stores its output channels innermost, (c, w, h, n):
    /// a channel tile (vectorised over output channels) whose every reader takes a pixel's channels
    /// together (tiling_conv.cpp says which readers do).
    bool output_channels_innermost(const std::string &root) const;
    /// Whether the pointwise kernel rooted at \p root stores its output channels innermost: no
    /// graph output, its channels a multiple of a vector, its every reader taking a pixel's
    /// channels together.
    bool pointwise_channels_innermost(const std::string &root) const;
    /// Schedules a pointwise kernel stored so: its loops run (c, w, h, n), vectorised over channels.
    bool pointwise_over_channels();
    /// Whether Func \p f reads its producers a pixel's channels at a time: a channel-tiled 1x1 conv
    /// (its input broadcasts), the root of a channel-tiled conv kernel, a Func of a DepthwiseChannels
    /// kernel or the padded input it computes, or a pointwise Func inlined into such a kernel or pad
    /// whose readers all do.
    bool reads_pixel_channels(const std::string &f) const;
    /// Whether conv \p F's padded input is wider than a stride-1 conv of its taps reads (stride > 1).
    bool reads_strided_rows(const std::string &F) const;
    /// Whether depthwise conv \p F runs ConvPlan::DepthwiseChannels: under a pointwise epilogue
    /// that is no graph output (or, no graph output itself, at its kernel's root, per tile of a
    /// wrapper `<conv>_out`), at stride 2 or with 5 or more taps a row, its filter stored
    /// channels last, its channels a multiple of a vector, its one padded input computed in its
    /// kernel and (\p source) reading only values stored channels innermost.
    bool depthwise_channels(const std::string &F, bool source = true) const;
    /// Whether conv \p F reads a root kernel that runs DepthwiseChannels (vectorized over channels)
    /// and stores its output NCHW: each vector's lanes are stored a channel plane apart.
    bool reads_channel_plane_scatter(const std::string &F) const;
    /// With \p source false, depthwise_channels leaves out this test: whether every value the
    /// padded input of \p F reads is stored channels innermost by a 1x1 conv's channel tile.
    bool source_channels_innermost(const std::string &F) const;
    /// Whether conv \p F is tiled over its output channels (ConvPlan::ChannelTile): by
    /// channel_tiled's rule, or a 1x1 conv whose every reader is a DepthwiseChannels kernel.
    bool tiles_channels(const std::string &F) const;
    /// Whether Func \p f is read only by DepthwiseChannels kernels: a padded input one of them
    /// computes, or a pointwise Func inlined into such a pad or kernel whose readers all are.
    bool read_by_depthwise_channels(const std::string &f, bool source = true) const;
    /// The statements of that copy: `P.in(X)` at root, stored channels innermost.
    void stage_channels_innermost(const std::string &X, const std::string &P);
    void conv_depthwise_output(ScheduleStatement &st, const ConvPlan &c);
    void conv_row_blocks(ScheduleStatement &st, const ConvPlan &c);
    void conv_epilogue_tiles(ScheduleStatement &st, const ConvPlan &c);
    /// Returns the padded inputs it placed per task (place_member_pads), which stay out of inline_members.
    std::set<std::string> conv_root_tiles(ScheduleStatement &st, const ConvPlan &c);

    // --- any kernel (tiling.cpp) ---

    /// compute_root of \p f with parallel outer work and a vectorised inner var on every stage.
    void generic_func(const std::string &f, bool kernel_comment);
    /// Every non-inlined member of the kernel scheduled by generic_func.
    void generic();
};

}  // namespace loom::autosched
