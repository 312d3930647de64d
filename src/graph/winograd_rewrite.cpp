// rewrite_winograd_convs (winograd_rewrite.h): F(2x2, 3x3) Winograd for 3x3 stride-1 convs, as
// canonical ops with their shapes. The transform matrices are Lavin and Gray's (2016) for
// F(2, 3): Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1],
// Aᵀ = [1 1 1 0; 0 1 -1 -1]; every entry is exact in binary, so only U = G g Gᵀ rounds (once,
// from double).
#include "graph/winograd_rewrite.h"

#include <algorithm>
#include <array>
#include <map>

namespace loom {

namespace {

constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

/// Appends canonical nodes after a rewritten conv, each output a fresh value with its shape.
struct Emitter {
    Graph &g;
    std::string prefix;     ///< the conv's node name
    std::vector<Node> &out;

    std::string value(const std::string &what, const Shape &shape) {
        std::string v = g.unique_name(prefix + "_winograd_" + what);
        ValueInfo &vi = g.values[v];
        vi.name = v;
        vi.dtype = DType::F32;
        vi.shape = shape;
        vi.has_shape = true;
        return v;
    }
    std::string node(const std::string &op, std::vector<std::string> inputs, std::map<std::string, AttrValue> attrs,
                     const std::string &what, const Shape &shape) {
        const std::string v = value(what, shape);
        // unique: unique_name sees the values, not the nodes still to be added
        node_into(op, std::move(inputs), std::move(attrs), v, v);
        return v;
    }
    /// A node named \p name writing the existing value \p output (the rewritten conv's own output).
    void node_into(const std::string &op, std::vector<std::string> inputs, std::map<std::string, AttrValue> attrs,
                   const std::string &name, const std::string &output) {
        Node n;
        n.op = op;
        n.name = name;
        n.inputs = std::move(inputs);
        n.attrs = std::move(attrs);
        n.outputs = {output};
        out.push_back(std::move(n));
    }
    /// Every \p step-th plane of \p x along \p axis from \p start, \p len of them.
    std::string slice(const std::string &x, int axis, int64_t start, int64_t step, int64_t len, const std::string &what) {
        Shape s = g.value(x).shape;
        std::vector<int64_t> starts(s.size(), 0), steps(s.size(), 1);
        starts[axis] = start;
        steps[axis] = step;
        s[axis] = len;
        return node("Slice", {x}, {{"starts", starts}, {"steps", steps}}, what, s);
    }
    std::string binary(const char *op, const std::string &a, const std::string &b, const std::string &what) {
        return node(op, {a, b}, {}, what, g.value(a).shape);
    }
    /// Bᵀ applied to four planes: (d0 - d2, d1 + d2, d2 - d1, d1 - d3).
    std::array<std::string, 4> input_rows(const std::array<std::string, 4> &d, const std::string &what) {
        return {binary("Sub", d[0], d[2], what + "0"), binary("Add", d[1], d[2], what + "1"),
                binary("Sub", d[2], d[1], what + "2"), binary("Sub", d[1], d[3], what + "3")};
    }
    /// Aᵀ applied to four planes: (m0 + m1 + m2, m1 - m2 - m3).
    std::array<std::string, 2> output_rows(const std::array<std::string, 4> &m, const std::string &what) {
        return {binary("Add", binary("Add", m[0], m[1], what + "0s"), m[2], what + "0"),
                binary("Sub", binary("Sub", m[1], m[2], what + "1s"), m[3], what + "1")};
    }
};

}  // namespace

bool winograd_eligible(const Graph &g, const Node &n, int64_t min_channels) {
    if (n.op != "Conv" || n.num_inputs() < 2 || n.outputs.size() != 1) return false;
    const Tensor *w = g.constant(n.inputs[1]);
    if (!w || w->dtype() != DType::F32 || w->shape().size() != 4) return false;
    if (n.has_input(2)) {
        const Tensor *b = g.constant(n.inputs[2]);
        if (!b || b->dtype() != DType::F32) return false;
    }
    if (n.get_ints("kernel_shape") != std::vector<int64_t>{3, 3} || n.get_ints("strides") != std::vector<int64_t>{1, 1} ||
        n.get_ints("dilations") != std::vector<int64_t>{1, 1} || n.get_int("group", 1) != 1 ||
        n.get_ints("pads") != std::vector<int64_t>{1, 1, 1, 1})
        return false;
    const ValueInfo &x = g.value(n.inputs[0]);
    if (!x.has_shape || !x.sym.empty() || x.dtype != DType::F32 || x.shape.size() != 4) return false;
    if (std::any_of(x.shape.begin(), x.shape.end(), [](int64_t d) { return d <= 0; })) return false;
    return x.shape[1] == w->shape()[1] && w->shape()[2] == 3 && w->shape()[3] == 3 && w->shape()[0] >= min_channels &&
           w->shape()[1] >= min_channels;
}

int rewrite_winograd_convs(Graph &g, int64_t min_channels) {
    std::vector<size_t> convs;
    for (size_t i = 0; i < g.nodes.size(); i++)
        if (winograd_eligible(g, g.nodes[i], min_channels)) convs.push_back(i);
    std::vector<Node> added;
    for (size_t i : convs) {
        const Node conv = g.nodes[i];
        const Tensor &w = *g.constant(conv.inputs[1]);
        const Tensor *bias = conv.has_input(2) ? g.constant(conv.inputs[2]) : nullptr;
        const Shape xs = g.value(conv.inputs[0]).shape;
        const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], K = w.shape()[0];
        const int64_t TH = (H + 1) / 2, TW = (W + 1) / 2;  // tiles; an odd side's last tile is half outside
        Emitter e{g, conv.name, added};

        // Input transform: the padded input holds rows and columns -1 .. 2*T, then Bᵀ d B.
        std::string xp = e.node("Pad", {conv.inputs[0]},
                                {{"pads", std::vector<int64_t>{0, 0, 1, 1, 0, 0, 2 * TH + 1 - H, 2 * TW + 1 - W}},
                                 {"mode", std::string("constant")}, {"value", 0.0}},
                                "pad", {N, C, 2 * TH + 2, 2 * TW + 2});
        std::array<std::string, 4> rows;
        for (int r = 0; r < 4; r++) rows[r] = e.slice(xp, 2, r, 2, TH, "row" + std::to_string(r));
        std::array<std::string, 4> bt_rows = e.input_rows(rows, "bt");
        std::vector<std::string> planes;  // V's plane t = 4a + b
        for (int a = 0; a < 4; a++) {
            std::array<std::string, 4> cols;
            for (int s = 0; s < 4; s++)
                cols[s] = e.slice(bt_rows[a], 3, s, 2, TW, "col" + std::to_string(a) + std::to_string(s));
            std::array<std::string, 4> v = e.input_rows(cols, "v" + std::to_string(a));
            planes.insert(planes.end(), v.begin(), v.end());
        }
        std::string V = e.node("Concat", planes, {{"axis", int64_t(1)}}, "input", {N, 16 * C, TH, TW});

        // The 16 products as one grouped 1x1 conv; U = G g Gᵀ per (k, c), in double.
        Tensor U(DType::F32, {16 * K, C, 1, 1}), ub(DType::F32, {16 * K});
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < C; c++) {
                double gg[3][3], t[4][3];
                for (int y = 0; y < 3; y++)
                    for (int x = 0; x < 3; x++) gg[y][x] = w.get(((k * C + c) * 3 + y) * 3 + x);
                for (int a = 0; a < 4; a++)
                    for (int x = 0; x < 3; x++) t[a][x] = kG[a][0] * gg[0][x] + kG[a][1] * gg[1][x] + kG[a][2] * gg[2][x];
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 4; b++)
                        U.set(((4 * a + b) * K + k) * C + c, t[a][0] * kG[b][0] + t[a][1] * kG[b][1] + t[a][2] * kG[b][2]);
            }
        // Aᵀ's column 1 and A's row 1 are all ones: a bias on plane t = (1, 1) reaches each output once.
        for (int64_t q = 0; q < 16 * K; q++) ub.set(q, bias && q / K == 5 ? bias->get(q % K) : 0.0);
        const std::string uname = g.unique_name(conv.name + "_winograd_weight");
        const std::string bname = g.unique_name(conv.name + "_winograd_bias");
        g.set_constant(uname, U);
        g.set_constant(bname, ub);
        Node prod;
        prod.op = "Conv";
        prod.name = conv.name;  // the products keep the conv's name
        prod.inputs = {V, uname, bname};
        prod.outputs = {e.value("products", {N, 16 * K, TH, TW})};
        prod.attrs = {{"kernel_shape", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{1, 1}},
                      {"dilations", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                      {"group", int64_t(16)}};
        g.nodes[i] = prod;

        // Output transform Aᵀ M A: rows (a) first, then columns (b).
        std::array<std::string, 16> m;
        for (int t = 0; t < 16; t++) m[t] = e.slice(prod.outputs[0], 1, t * K, 1, K, "m" + std::to_string(t));
        std::array<std::array<std::string, 2>, 4> at_rows;  // [b][row of the output tile]
        for (int b = 0; b < 4; b++) at_rows[b] = e.output_rows({m[b], m[4 + b], m[8 + b], m[12 + b]}, "at" + std::to_string(b));
        std::vector<std::string> outs;  // channel block (y * 2 + x): DepthToSpace DCR's order
        for (int y = 0; y < 2; y++) {
            std::array<std::string, 2> o =
                e.output_rows({at_rows[0][y], at_rows[1][y], at_rows[2][y], at_rows[3][y]}, "y" + std::to_string(y));
            outs.insert(outs.end(), o.begin(), o.end());
        }
        std::string cat = e.node("Concat", outs, {{"axis", int64_t(1)}}, "output_tiles", {N, 4 * K, TH, TW});
        // DepthToSpace (DCR) spreads each tile's four outputs; an odd side is then cropped.
        const std::map<std::string, AttrValue> d2s = {{"blocksize", int64_t(2)}, {"mode", std::string("DCR")}};
        if (2 * TH != H || 2 * TW != W) {
            std::string spread = e.node("DepthToSpace", {cat}, d2s, "spread", {N, K, 2 * TH, 2 * TW});
            e.node_into("Slice", {spread},
                        {{"starts", std::vector<int64_t>{0, 0, 0, 0}}, {"steps", std::vector<int64_t>{1, 1, 1, 1}}},
                        g.unique_name(conv.name + "_winograd_crop"), conv.outputs[0]);
        } else {
            e.node_into("DepthToSpace", {cat}, d2s, g.unique_name(conv.name + "_winograd_to_space"), conv.outputs[0]);
        }
    }
    for (auto &n : added) g.nodes.push_back(std::move(n));
    if (!convs.empty()) g.topo_sort();
    return (int)convs.size();
}

}  // namespace loom
