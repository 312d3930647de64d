/// \file
/// Which forward activations a backward pass keeps and which it recomputes: AOTAutograd's min-cut
/// rematerialization partitioner on Loom's joint forward+backward graph. Every forward node is a
/// pair of flow vertices joined by an edge whose capacity is the bytes of saving its outputs;
/// backward readers are the sink, and ops too expensive to recompute (MatMul, Conv, reductions,
/// pooling, gathers, Resize) hang from the source, so a minimum s-t cut (Boost Graph's
/// Boykov-Kolmogorov max-flow) is the cheapest set of values to save from which the backward can
/// recompute everything else it reads with cheap ops (pointwise and layout). A pointwise value
/// that a backward MatMul reads as an operand (directly or through layout ops) hangs from the
/// source too: the GEMM's operand is stored in the backward anyway, so recomputing it is no cheaper
/// than saving it (AOTAutograd's is_materialized_backwards). The rewrite clones each recomputed
/// node into the backward pass, so the two passes' copies are scheduled apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace loom {

/// The partition of one joint graph and what it costs.
struct RecomputePlan {
    bool min_cut = true;                  ///< false: every value the backward reads is saved
    std::vector<std::string> saved;       ///< forward nodes whose outputs the backward reads as stored
    std::vector<std::string> recomputed;  ///< forward nodes the backward recomputes (graph order)
    int64_t saved_bytes = 0;              ///< bytes of the saved outputs (the cut's capacity)
    int64_t save_all_bytes = 0;           ///< bytes kept if every forward value the backward reads were saved
    double recompute_flops = 0;           ///< about one FLOP per recomputed output element
    int64_t peak_bytes = 0;               ///< peak live activation bytes in graph order, after the rewrite
    int64_t save_all_peak_bytes = 0;      ///< the same without recomputation
    /// Two lines: the totals and the peak estimate.
    std::string summary() const;
    /// summary(), then one line per saved or recomputed node.
    std::string describe() const;
};

/// True for a node of the backward pass or the optimizer's update (autodiff's "grad_" and
/// "update_" name prefixes); every other node is forward.
bool is_backward_node(const Node &n);

/// True when the partition may recompute \p op in the backward pass (cheap: pointwise or layout).
bool is_recomputable_op(const std::string &op);

/// The min-cut partition of \p g (forward and backward nodes told apart by is_backward_node).
/// Graph inputs and constants are free: the caller keeps them anyway. With \p min_cut false, the
/// plan saves every forward value the backward reads and recomputes nothing.
RecomputePlan plan_recompute(const Graph &g, bool min_cut = true);

/// Clones every node in \p plan.recomputed into the backward pass ("grad_recompute_<node>") and
/// points the backward readers at the clones, so the backward reads only saved values, inputs
/// and its own nodes. The graph computes the same values.
void apply_recompute(Graph &g, const RecomputePlan &plan);

/// Peak bytes of the values live at once when \p g's nodes run in graph order and every value is
/// stored (inputs and constants not counted): the activation-memory estimate the plan reports.
int64_t peak_activation_bytes(const Graph &g);

}  // namespace loom
