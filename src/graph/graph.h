/// \file
/// Loom's graph IR: typed values, nodes with attributes, a graph with inputs, outputs and
/// initializers (constant tensors). Ops use ONNX's names and semantics in the canonical form
/// documented in op_catalog.h (opset differences resolved into attributes).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "graph/sym_dim.h"
#include "graph/tensor.h"

namespace loom {

/// An attribute value: int, float, string, their lists, or a tensor.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, Tensor>;

/// Renders an attribute value for messages, dumps and CSE keys ("3", "[1, 2]", "\"linear\"").
std::string attr_str(const AttrValue &v);

/// Type and shape of a value (a tensor flowing on an edge). An empty \p dims entry in
/// \p symbols means that dim is static; otherwise it names a symbolic dim (e.g. "batch") that
/// must be bound before the graph is used.
struct ValueInfo {
    std::string name;
    DType dtype = DType::F32;
    Shape shape;                       ///< -1 for a dim not known yet
    std::vector<std::string> symbols;  ///< symbolic names per dim ("" = none); may be empty
    bool has_shape = false;            ///< shape known: set by shape inference, or by the importer for declared graph inputs/outputs (symbolic dims -1)
    /// Symbolic dims of a graph compiled for every size (graph/symbolic_shapes.h): one per dim of
    /// \p shape, which then holds the representative size; empty for a static value.
    SymShape sym;
};

/// One operator application.
struct Node {
    std::string name;                 ///< unique within the graph (importer makes one if empty)
    std::string op;                   ///< ONNX op type, e.g. "Conv"
    std::vector<std::string> inputs;  ///< value names; "" marks an omitted optional input
    std::vector<std::string> outputs;
    std::map<std::string, AttrValue> attrs;

    bool has(const std::string &a) const { return attrs.count(a) > 0; }
    /// Typed getters: the default when absent; a UserError naming node, op and attribute when the
    /// attribute has the wrong type.
    int64_t get_int(const std::string &a, int64_t def) const;
    double get_float(const std::string &a, double def) const;
    std::string get_string(const std::string &a, const std::string &def) const;
    std::vector<int64_t> get_ints(const std::string &a, const std::vector<int64_t> &def = {}) const;
    std::vector<double> get_floats(const std::string &a, const std::vector<double> &def = {}) const;
    /// Getters for a required attribute: a UserError naming it when missing.
    int64_t need_int(const std::string &a) const;
    std::vector<int64_t> need_ints(const std::string &a) const;
    /// "Conv 'conv1'": how messages name the node.
    std::string describe() const;
    /// The number of inputs actually given (trailing "" dropped).
    int num_inputs() const;
    /// True if input \p i is given (exists and is not "").
    bool has_input(int i) const { return i < (int)inputs.size() && !inputs[i].empty(); }
};

/// A model graph.
class Graph {
public:
    std::string name;
    int opset = 17;                       ///< default-domain opset the model was written for
    std::vector<Node> nodes;              ///< in topological order after topo_sort()
    std::vector<std::string> inputs;      ///< runtime inputs (initializers excluded)
    std::vector<std::string> outputs;
    std::map<std::string, ValueInfo> values;     ///< every value: inputs, outputs, intermediates
    std::map<std::string, Tensor> initializers;  ///< constant tensors (weights, folded values)
    /// Symbols kept open for dynamic shapes (inactive for a graph whose every dim is bound).
    DynamicDims dynamic;

    /// Info of value \p name; InternalError if unknown.
    const ValueInfo &value(const std::string &name) const;
    ValueInfo &value(const std::string &name);
    bool has_value(const std::string &name) const { return values.count(name) > 0; }
    bool is_constant(const std::string &name) const { return initializers.count(name) > 0; }
    /// True when \p name is one of the graph's runtime inputs.
    bool is_input(const std::string &name) const;
    /// True when \p name is one of the graph's outputs (a pass must not rename or fuse it away).
    bool is_output(const std::string &name) const;
    /// The initializer's data, or nullptr when the value is not a constant.
    const Tensor *constant(const std::string &name) const;
    /// Adds (or replaces) an initializer and its ValueInfo.
    void set_constant(const std::string &name, Tensor t);

    /// Index of the node producing \p value, or -1 (graph input / initializer).
    int producer(const std::string &value) const;
    /// Indices of nodes reading \p value.
    std::vector<int> consumers(const std::string &value) const;
    /// Node by name; nullptr if none.
    const Node *find_node(const std::string &name) const;

    /// Sorts nodes topologically (stable for already-sorted graphs); UserError naming a node on
    /// a cycle if there is one.
    void topo_sort();
    /// Checks structure: every input defined exactly once, no cycles, outputs produced, names
    /// unique. UserError naming the culprit.
    void validate() const;
    /// A fresh value/node name with \p base as prefix.
    std::string unique_name(const std::string &base) const;
    /// Number of parameters (elements of all initializers).
    int64_t parameter_count() const;
};

}  // namespace loom
