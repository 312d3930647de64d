#include "graph/graph.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "support/error.h"

namespace loom {

namespace {
template <typename T>
const T *attr_as(const Node &n, const std::string &a, const char *want) {
    auto it = n.attrs.find(a);
    if (it == n.attrs.end()) return nullptr;
    const T *v = std::get_if<T>(&it->second);
    user_check(v != nullptr, n.describe(), ": attribute '", a, "' should be ", want);
    return v;
}
}  // namespace

std::string attr_str(const AttrValue &v) {
    std::ostringstream os;
    auto list = [&](const auto &xs) {
        os << "[";
        for (size_t i = 0; i < xs.size(); i++) os << (i ? ", " : "") << xs[i];
        os << "]";
    };
    if (auto i = std::get_if<int64_t>(&v)) os << *i;
    else if (auto d = std::get_if<double>(&v)) os << *d;
    else if (auto s = std::get_if<std::string>(&v)) os << '"' << *s << '"';
    else if (auto is = std::get_if<std::vector<int64_t>>(&v)) list(*is);
    else if (auto ds = std::get_if<std::vector<double>>(&v)) list(*ds);
    else if (auto ss = std::get_if<std::vector<std::string>>(&v)) list(*ss);
    else if (auto t = std::get_if<Tensor>(&v)) {
        os << "tensor<" << dtype_name(t->dtype()) << " " << shape_str(t->shape()) << ">";
        if (t->numel() <= 16) list(t->to_doubles());
    }
    return os.str();
}

int64_t Node::get_int(const std::string &a, int64_t def) const {
    auto p = attr_as<int64_t>(*this, a, "an int");
    return p ? *p : def;
}
double Node::get_float(const std::string &a, double def) const {
    auto it = attrs.find(a);
    if (it != attrs.end())
        if (auto i = std::get_if<int64_t>(&it->second)) return (double)*i;
    auto p = attr_as<double>(*this, a, "a float");
    return p ? *p : def;
}
std::string Node::get_string(const std::string &a, const std::string &def) const {
    auto p = attr_as<std::string>(*this, a, "a string");
    return p ? *p : def;
}
std::vector<int64_t> Node::get_ints(const std::string &a, const std::vector<int64_t> &def) const {
    auto it = attrs.find(a);
    if (it != attrs.end())
        if (auto i = std::get_if<int64_t>(&it->second)) return {*i};
    auto p = attr_as<std::vector<int64_t>>(*this, a, "a list of ints");
    return p ? *p : def;
}
std::vector<double> Node::get_floats(const std::string &a, const std::vector<double> &def) const {
    auto it = attrs.find(a);
    if (it != attrs.end())
        if (auto d = std::get_if<double>(&it->second)) return {*d};
    auto p = attr_as<std::vector<double>>(*this, a, "a list of floats");
    return p ? *p : def;
}
int64_t Node::need_int(const std::string &a) const {
    user_check(has(a), describe(), ": missing required attribute '", a, "'");
    return get_int(a, 0);
}
std::vector<int64_t> Node::need_ints(const std::string &a) const {
    user_check(has(a), describe(), ": missing required attribute '", a, "'");
    return get_ints(a);
}
std::string Node::describe() const { return op + " '" + name + "'"; }
int Node::num_inputs() const {
    int n = (int)inputs.size();
    while (n > 0 && inputs[n - 1].empty()) n--;
    return n;
}

const ValueInfo &Graph::value(const std::string &name) const {
    auto it = values.find(name);
    internal_check(it != values.end(), "unknown value '", name, "'");
    return it->second;
}
ValueInfo &Graph::value(const std::string &name) {
    auto it = values.find(name);
    internal_check(it != values.end(), "unknown value '", name, "'");
    return it->second;
}
const Tensor *Graph::constant(const std::string &name) const {
    auto it = initializers.find(name);
    return it == initializers.end() ? nullptr : &it->second;
}
void Graph::set_constant(const std::string &name, Tensor t) {
    ValueInfo &vi = values[name];
    vi.name = name;
    vi.dtype = t.dtype();
    vi.shape = t.shape();
    vi.symbols.clear();
    vi.has_shape = true;
    initializers[name] = std::move(t);
}

bool Graph::is_input(const std::string &name) const {
    return std::find(inputs.begin(), inputs.end(), name) != inputs.end();
}

bool Graph::is_output(const std::string &name) const {
    return std::find(outputs.begin(), outputs.end(), name) != outputs.end();
}

int Graph::producer(const std::string &v) const {
    for (size_t i = 0; i < nodes.size(); i++)
        for (const auto &o : nodes[i].outputs)
            if (o == v) return (int)i;
    return -1;
}
std::vector<int> Graph::consumers(const std::string &v) const {
    std::vector<int> r;
    for (size_t i = 0; i < nodes.size(); i++)
        for (const auto &in : nodes[i].inputs)
            if (in == v) {
                r.push_back((int)i);
                break;
            }
    return r;
}
const Node *Graph::find_node(const std::string &name) const {
    for (const auto &n : nodes)
        if (n.name == name) return &n;
    return nullptr;
}

void Graph::topo_sort() {
    std::map<std::string, int> prod;
    for (size_t i = 0; i < nodes.size(); i++)
        for (const auto &o : nodes[i].outputs)
            if (!o.empty()) prod[o] = (int)i;
    // Depth-first with an explicit stack, so that a long chain of nodes cannot overflow the call
    // stack; each frame is (node, index of the next input to visit).
    std::vector<int> state(nodes.size(), 0), order;  // 0 new, 1 on stack, 2 done
    std::vector<std::pair<int, size_t>> stack;
    for (size_t root = 0; root < nodes.size(); root++) {
        if (state[root]) continue;
        state[root] = 1;
        stack.push_back({(int)root, 0});
        while (!stack.empty()) {
            auto &[i, next] = stack.back();
            if (next == nodes[i].inputs.size()) {
                state[i] = 2;
                order.push_back(i);
                stack.pop_back();
                continue;
            }
            const std::string &in = nodes[i].inputs[next++];
            auto it = in.empty() ? prod.end() : prod.find(in);
            if (it == prod.end() || state[it->second] == 2) continue;
            user_check(state[it->second] != 1, "graph has a cycle: the output '", in, "' of ",
                       nodes[it->second].describe(), " flows back into its own inputs (",
                       it->second == i ? "it reads it itself" : "read by " + nodes[i].describe(),
                       "); a model graph must be acyclic");
            state[it->second] = 1;
            stack.push_back({it->second, 0});
        }
    }
    std::vector<Node> sorted;
    for (int i : order) sorted.push_back(std::move(nodes[i]));
    nodes = std::move(sorted);
}

void Graph::validate() const {
    std::set<std::string> defined, node_names;
    for (const auto &i : inputs) {
        user_check(defined.insert(i).second, "graph input '", i, "' is declared twice");
        user_check(values.count(i), "graph input '", i, "' has no type/shape information");
    }
    for (const auto &kv : initializers) defined.insert(kv.first);
    for (const auto &n : nodes) {
        user_check(node_names.insert(n.name).second, "two nodes are named '", n.name,
                   "'; node names must be unique");
        for (const auto &in : n.inputs)
            if (!in.empty() && !defined.count(in))  // the hint only on failure: it is quadratic
                throw UserError(str_cat(n.describe(), " reads '", in,
                                        "', which no earlier node, graph input or initializer defines; declare it "
                                        "as a graph input or export the model with its weights (export_params=True)",
                                        did_you_mean(in, std::vector<std::string>(defined.begin(), defined.end()))));
        for (const auto &o : n.outputs) {
            if (o.empty()) continue;
            user_check(defined.insert(o).second, n.describe(), " defines '", o,
                       "', which is already defined (by a graph input, initializer or earlier node)");
        }
    }
    for (const auto &o : outputs)
        user_check(defined.count(o), "graph output '", o, "' is produced by no node, input or initializer; "
                                          "check the exporter's output_names");
}

std::string Graph::unique_name(const std::string &base) const {
    if (!values.count(base) && !find_node(base)) return base;
    for (int i = 1;; i++) {
        std::string n = base + "_" + std::to_string(i);
        if (!values.count(n) && !find_node(n)) return n;
    }
}

int64_t Graph::parameter_count() const {
    int64_t n = 0;
    for (const auto &kv : initializers) n += kv.second.numel();
    return n;
}

}  // namespace loom
