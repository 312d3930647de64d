/// \file
/// Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions, as a rewrite of the canonical graph into
/// ops Loom already lowers and the reference interpreter already checks. Off unless asked for
/// (PrepareOptions::winograd, `LOOM_WINOGRAD=1`): through the existing conv, concat and
/// pointwise schedules it runs slower than the direct conv
/// (bench/DECISIONS.md#d169-winograd-f23-as-a-graph-rewrite-opt-in).
///
/// Each 2x2 output tile of Y = conv(X, g) + b is Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A over the 4x4 input
/// tile d at (2i-1, 2j-1). The rewrite writes it as
///   - input transform: X padded by (1, 1) before and enough after for whole tiles, eight
///     stride-2 Slices and Sub/Add nodes (Bᵀ d B is separable: rows, then columns), the 16
///     transformed planes joined along the channels: V [N, 16·C, ⌈H/2⌉, ⌈W/2⌉];
///   - the 16 products: one 1x1 Conv of 16 groups with U = G g Gᵀ folded at compile time
///     (in double) as its weights [16·K, C, 1, 1]; the bias goes into the group that Aᵀ · A
///     spreads over all four outputs of a tile (t = (1, 1)), so it is exact without an Add;
///   - output transform: Slices of the 16 groups, Add/Sub nodes (Aᵀ M A), the four outputs of
///     each tile joined along the channels and spread by DepthToSpace (DCR), cropped to H x W.
/// The conv's readers (BN already folded, activation, residual Add) read the cropped result.
#pragma once

#include "graph/graph.h"

namespace loom {

/// Whether \p n is a conv this rewrite takes: a float 2-D Conv with a constant 3x3 filter,
/// stride 1, dilation 1, one group, pads (1,1,1,1), a constant bias or none, a known NCHW input
/// shape, and at least \p min_channels input and output channels.
bool winograd_eligible(const Graph &g, const Node &n, int64_t min_channels = 8);

/// Rewrites every winograd_eligible Conv of \p g (canonical form, shapes known) as above, the
/// new nodes in canonical form with their shapes. The conv's node name prefixes every new node
/// and value (`<conv>_winograd_...`), the product Conv keeps the conv's name. Returns how many
/// convs were rewritten.
int rewrite_winograd_convs(Graph &g, int64_t min_channels = 8);

}  // namespace loom
