#include "lower/loop_scratch.h"

namespace loom {

namespace {

using namespace Halide::Internal;

class LoopScratchOnPseudostack : public IRMutator {
    using IRMutator::visit;
    int cpu_loops = 0;
    bool in_gpu = false;

    Stmt visit(const For *op) override {
        bool gpu = op->device_api != Halide::DeviceAPI::None && op->device_api != Halide::DeviceAPI::Host;
        gpu = gpu || op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread ||
              op->for_type == ForType::GPULane;
        bool was_gpu = in_gpu;
        in_gpu = in_gpu || gpu;
        cpu_loops++;
        Stmt s = IRMutator::visit(op);
        cpu_loops--;
        in_gpu = was_gpu;
        return s;
    }

    Stmt visit(const Allocate *op) override {
        Stmt body = mutate(op->body);
        bool moves = cpu_loops > 0 && !in_gpu && op->memory_type == Halide::MemoryType::Auto &&
                     !op->new_expr.defined() && op->free_function.empty() &&
                     Allocate::constant_allocation_size(op->extents, op->name) == 0;
        Halide::MemoryType m = moves ? Halide::MemoryType::Stack : op->memory_type;
        if (!moves && body.same_as(op->body)) return op;
        return Allocate::make(op->name, op->type, m, op->extents, op->condition, body, op->new_expr,
                              op->free_function);
    }
};

}  // namespace

Stmt loop_scratch_on_pseudostack(const Stmt &s) { return LoopScratchOnPseudostack().mutate(s); }

void keep_loop_scratch_on_pseudostack(Halide::Pipeline &pipeline) {
    pipeline.add_custom_lowering_pass(new LoopScratchOnPseudostack);
}

}  // namespace loom
