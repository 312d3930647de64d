/// \file
/// The state of lowering one graph (src/ops' op lowerings write into it): a LowerContext maps graph
/// values to Halide Funcs and records every Func it makes in the LoweredPipeline.
///
/// Index convention: Halide lists a Func's args innermost first; graph tensors list dims outermost
/// first. Ops build index lists outermost first and call `at()` / `define()`, which reverse them,
/// so no op code reverses indices by hand.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/symbolic_shapes.h"
#include "lower/lowered.h"

namespace loom {

class LowerContext {
public:
    LowerContext(const Graph &g, LoweredPipeline &out) : graph(g), result(out) {}

    const Graph &graph;
    LoweredPipeline &result;
    LowerOptions options;  ///< lower_graph's options (set before any op is lowered)

    /// A Func for any graph value: a produced Func, an ImageParam (graph input) or a constant
    /// Buffer (initializer), always callable with one Expr per dim.
    Halide::Func value(const std::string &name);
    /// Float constant \p name stored with its dim \p dim in blocks of \p block, the block innermost
    /// (conv weights by output channel: LowerOptions::block_conv_weights; a GEMM's B by column).
    /// The Func is called, outermost first, with (x / block, the other indices in order, x % block)
    /// where x is the index along \p dim; like value(), it is never scheduled. A dim that is no
    /// multiple of \p block ends in a partial block filled with zeros (in bounds up to whole blocks).
    Halide::Func blocked_constant(const std::string &name, int dim, int block);
    /// Element of \p name at \p idx (outermost first), with NumPy broadcasting to \p out_rank dims:
    /// \p idx has out_rank entries; leading dims the value lacks are dropped, size-1 dims read 0.
    /// A one-element constant is returned as a literal (so Halide can simplify with it).
    Halide::Expr at(const std::string &name, const std::vector<Halide::Expr> &idx);
    /// The constant tensor of \p name, or nullptr when it is not an initializer.
    const Tensor *constant(const std::string &name) const { return graph.constant(name); }
    /// Shape / dtype of a value.
    const Shape &shape(const std::string &name) const { return graph.value(name).shape; }
    DType dtype(const std::string &name) const { return graph.value(name).dtype; }
    /// Symbolic shape of a value (graph/symbolic_shapes.h): its static dims as numbers when the
    /// graph is compiled for one size.
    SymShape sym(const std::string &name) const { return sym_shape_of(graph.value(name)); }
    /// A dim as a Halide Expr: an int32 constant when static, else an Expr over the pipeline's size
    /// Params (LoweredPipeline::size_params), read at run time.
    Halide::Expr size(const SymDim &d) const;
    /// size() of dim \p d of value \p name.
    Halide::Expr extent(const std::string &name, int d) const { return size(sym(name).at(d)); }
    /// Whether dim \p d of value \p name moves with the input sizes.
    bool is_dynamic(const std::string &name, int d) const { return !sym(name).at(d).is_static(); }
    /// The static size of dim \p d of \p name, which \p node needs as a number: a UserError naming
    /// the node, the dim and the fix (bind the size with --input) when it moves with the input sizes.
    int64_t static_extent(const Node &node, const std::string &name, int d) const;

    /// A new Func for \p node named `sanitize(node.name)` (suffix "" — the Func producing the
    /// node's output) or `sanitize(node.name) + "_" + suffix` (a helper such as "mean"), with
    /// pure vars named per var_names_for_rank(rank). Registers its LoweredFunc.
    Halide::Func make_func(const Node &node, const std::string &suffix, int rank);
    /// As above, and records the Func's extents (\p shape, outermost first) for listings and the
    /// cost model. Use it for helper Funcs; bind_output records the extents of output Funcs.
    Halide::Func make_func(const Node &node, const std::string &suffix, const Shape &shape);
    /// Dynamic shapes: records \p shape as the exact symbolic extents of helper \p f (made by
    /// make_func), whose moving extents make_func only guesses; a cut may then pass it between
    /// pipelines (LoweredFunc::sym_extents). Nothing for a static shape.
    void exact_extents(const Halide::Func &f, const SymShape &shape);
    /// The pure Vars of a Func made by make_func, outermost first.
    std::vector<Halide::Var> vars(int rank) const;
    /// Defines \p f(vars outermost first) = e. (Pure definition, reversing to Halide order.)
    void define(Halide::Func f, const std::vector<Halide::Var> &vars_outer_first, Halide::Expr e);
    /// Calls \p f with outermost-first indices.
    static Halide::Expr call(Halide::Func f, const std::vector<Halide::Expr> &idx_outer_first);
    /// Binds graph value \p name (a node output) to \p f, and records extents/metadata.
    void bind_output(const std::string &name, Halide::Func f);
    /// Registers that a Func made with make_func has an update stage with the given RVar names
    /// (as schedules write them: "k", "r.x"). Call once per update, in order.
    void note_update(Halide::Func f, const std::vector<std::string> &rvar_names);
    /// Marks Func \p f (made by make_func) as pointwise (pure, one read per producer point) and
    /// sets its rough arithmetic cost per point.
    void note_cost(Halide::Func f, bool pointwise, double flops_per_point);
    /// Marks Func \p f (made by make_func) as a helper the default schedules inline
    /// (LoweredFunc::inline_by_default).
    void note_inline_by_default(Halide::Func f);
    /// Marks Func \p f (made by make_func) as a conv's or pool's padded input
    /// (LoweredFunc::padded_input).
    void note_padded_input(Halide::Func f);

    /// Graph value \p name as an argument of an extern stage (a cuBLAS GEMM, a cuDNN conv): the
    /// input's ImageParam, or the producing Func, then bound to its whole shape (the extern's bounds
    /// query is a runtime call: the Func's own loops keep constant extents) and marked
    /// feeds_extern (realized, never inlined). False when it is neither (a constant).
    bool extern_operand(const std::string &name, Halide::ExternFuncArgument &arg);
    /// Registers extern stage \p ext, calling C function \p fn (LoweredPipeline::extern_calls) and
    /// computing a buffer of \p shape (LoweredPipeline::extern_shapes).
    void note_extern_call(const std::string &fn, const Halide::Func &ext, const Shape &shape);
    /// The only consumer of \p value when \p accept takes it (the activation a library call can
    /// apply), \p value is not a graph output and LowerOptions::fuse_activation_epilogue is on;
    /// else nullptr.
    const Node *sole_activation_consumer(const std::string &value,
                                         const std::function<bool(const Node &)> &accept) const;
    /// Lists extern stage \p ext (of \p node, output shape \p shape) as a LoweredFunc (is_extern),
    /// so that it can be bound to values and be a pipeline output.
    void register_extern(Halide::Func ext, const Node &node, const Shape &shape);
    /// Node \p node_name's output is computed by \p f (an extern stage that fused the node's work):
    /// lower_graph binds the node's output to \p f instead of lowering it.
    void fuse_node_into(const std::string &node_name, Halide::Func f) { fused_nodes_[node_name] = f; }
    /// The Func a node was fused into (undefined when it was not).
    Halide::Func fused_into(const std::string &node_name) const {
        auto it = fused_nodes_.find(node_name);
        return it == fused_nodes_.end() ? Halide::Func() : it->second;
    }

    /// Rebinds graph value \p name, already bound, to \p f (which computes the same values): ops
    /// lowered later read \p f. An NHWC conv stage (LowerOptions::conv_nhwc) rebinds its input to
    /// a read of the NHWC copy it makes, so that the input's other consumers share that copy and
    /// the producer is inlined into it instead of written to memory too.
    void rebind(const std::string &name, Halide::Func f);
    /// The NHWC Func (channels innermost; bfloat16 bits under Precision::BF16, else FP32) holding
    /// graph value \p name, made by an NHWC conv stage (its output, or the copy of its input);
    /// undefined when none.
    Halide::Func nhwc(const std::string &name) const {
        auto it = nhwc_.find(name);
        return it == nhwc_.end() ? Halide::Func() : it->second;
    }
    /// Records \p f as value \p name stored NHWC (see nhwc).
    void note_nhwc(const std::string &name, Halide::Func f) { nhwc_[name] = f; }

    /// The LoweredFunc record of a Func made by make_func (InternalError if \p f is not one).
    LoweredFunc &record(const Halide::Func &f);

    /// The Halide type for a dtype (bool is UInt(1) in Funcs, ImageParams and output buffers,
    /// one byte per element; constant bool Buffers are stored as UInt(8) and read as != 0).
    static Halide::Type halide_type(DType t);
    /// Casts \p e to dtype \p t (bool: e != 0; bf16 to and from its bits through float32).
    static Halide::Expr cast_to(DType t, Halide::Expr e);

    /// A literal of dtype \p t with value \p v.
    static Halide::Expr literal(DType t, double v);

    /// The Func name of \p node: its sanitised name, made unique (the first call reserves it).
    std::string func_base(const Node &node);
    /// True once graph value \p name has a Func (bound output, input or constant).
    bool has_value(const std::string &name) const {
        return values_.count(name) > 0 || graph.constant(name) != nullptr;
    }

    /// Used by lower_graph: registers graph input \p name's ImageParam and returns the Func
    /// \p read_name through which every op reads it (vars named by layout, so that a schedule's
    /// `x.in(consumer) as x_tile` wrapper has them; inlined unless wrapped).
    Halide::Func add_input(const std::string &name, const Halide::ImageParam &p, const std::string &read_name);
    /// Reserves \p name so that no Func made later takes it; returns the name made unique.
    std::string reserve_name(const std::string &name);
    /// Wrapper Func name (input "_im" Funcs and constant wrappers) -> graph value name, for
    /// working out which graph inputs a Func reads.
    const std::map<std::string, std::string> &wrapper_values() const { return wrappers_; }

private:
    std::map<std::string, Halide::Func> values_;
    std::map<std::string, std::string> func_of_value_;
    std::map<std::string, std::string> node_base_;   ///< node name -> sanitised unique Func base
    std::map<std::string, size_t> record_index_;     ///< Func name -> index in result.funcs
    std::map<std::string, std::string> wrappers_;
    std::set<std::string> used_names_;
    std::map<std::string, Halide::Func> fused_nodes_;
    std::map<std::string, Halide::Func> nhwc_;
};

/// Vars as Exprs (for index lists).
std::vector<Halide::Expr> exprs(const std::vector<Halide::Var> &vs);
/// f(idx outermost first) as an assignable reference, for update definitions.
Halide::FuncRef ref(Halide::Func f, const std::vector<Halide::Expr> &idx_outer_first);
/// The RVars of \p r as schedules write them: "r$x" -> "r.x".
std::vector<std::string> rvar_names(const Halide::RDom &r);

}  // namespace loom
