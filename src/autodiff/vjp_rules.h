/// \file
/// The vector-Jacobian product rule of each canonical op: given the gradients of a node's outputs,
/// the nodes computing the gradients of its inputs, written as canonical ops (a Conv's input
/// gradient is a ConvTranspose, its weight gradient a Conv over the batch, a MaxPool's a masked
/// ConvTranspose with one-hot taps). Private to src/autodiff.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autodiff/graph_emitter.h"
#include "graph/passes.h"

namespace loom::autodiff {

/// What a rule sees.
struct VjpArgs {
    GraphEmitter &e;
    const Node &node;
    /// Gradient of each output (a value of the graph; every entry is set: a zero constant for an
    /// output no path to the loss reads).
    std::vector<std::string> dy;
    /// Whether each input needs a gradient (a parameter reaches it).
    std::vector<bool> wanted;
    /// Evaluates a node on constants (the reference interpreter, given from above): Resize's rule
    /// finds its interpolation matrices with it. May be empty.
    const NodeEvaluator *evaluate = nullptr;

    const std::string &x(int i) const { return node.inputs[i]; }
    const std::string &y(int k = 0) const { return node.outputs[k]; }
    const Shape &xs(int i) const { return e.shape(node.inputs[i]); }
    const Shape &ys(int k = 0) const { return e.shape(node.outputs[k]); }
    bool want(int i) const { return i < (int)wanted.size() && wanted[i]; }
};

/// A rule returns one gradient per input ("" for an input it gives none: not wanted, or an
/// integer/boolean operand).
using VjpRule = std::function<std::vector<std::string>(VjpArgs &)>;

/// Rules by op name.
const std::map<std::string, VjpRule> &vjp_rules();
/// Ops whose outputs carry no gradient (comparisons, logic, ArgMax/ArgMin, Floor, Ceil, Cast to an
/// integer): a path through them contributes nothing.
const std::set<std::string> &zero_gradient_ops();

}  // namespace loom::autodiff
