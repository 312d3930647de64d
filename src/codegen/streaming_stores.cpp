#include "codegen/streaming_stores.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include <cstdlib>
#include <iostream>

#include "codegen/denormals.h"
#include "support/debug_output.h"

namespace loom {

namespace {

/// The buffer a store writes, from the TBAA tag Halide's CodeGen_LLVM::add_tbaa_metadata gives it:
/// an access type whose chain of parents ends at the root "Halide buffer"; the node just below the
/// root is named after the buffer (the nodes below it name constant-index ranges). "" when untagged.
std::string tbaa_buffer(const llvm::Instruction &inst) {
    const llvm::MDNode *tag = inst.getMetadata(llvm::LLVMContext::MD_tbaa);
    if (!tag || tag->getNumOperands() < 2) return "";
    const auto *node = llvm::dyn_cast<llvm::MDNode>(tag->getOperand(1));
    while (node && node->getNumOperands() >= 2) {
        const auto *parent = llvm::dyn_cast<llvm::MDNode>(node->getOperand(1));
        if (!parent) return "";
        if (parent->getNumOperands() == 1) {  // the root
            const auto *root = llvm::dyn_cast<llvm::MDString>(parent->getOperand(0));
            const auto *name = llvm::dyn_cast<llvm::MDString>(node->getOperand(0));
            if (!root || !name || root->getString() != "Halide buffer") return "";
            return name->getString().str();
        }
        node = parent;
    }
    return "";
}

}  // namespace

StreamingStoreMarks mark_streaming_stores(llvm::Module &m, const std::set<std::string> &buffers, int vector_bytes) {
    StreamingStoreMarks marks;
    if (buffers.empty()) return marks;
    llvm::LLVMContext &ctx = m.getContext();
    llvm::MDNode *nontemporal = llvm::MDNode::get(
        ctx, llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), 1)));
    const llvm::DataLayout &layout = m.getDataLayout();
    for (llvm::Function &f : m) {
        bool any = false;
        for (llvm::BasicBlock &bb : f)
            for (llvm::Instruction &inst : bb) {
                auto *store = llvm::dyn_cast<llvm::StoreInst>(&inst);
                if (!store || !store->getValueOperand()->getType()->isVectorTy()) continue;
                if (!buffers.count(tbaa_buffer(*store))) continue;
                uint64_t bytes = layout.getTypeStoreSize(store->getValueOperand()->getType()).getFixedSize();
                if (store->getAlign().value() < std::min<uint64_t>(bytes, (uint64_t)vector_bytes)) {
                    marks.unaligned++;
                    continue;
                }
                store->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
                marks.marked++;
                any = true;
            }
        if (!any) continue;
        // Non-temporal stores are weakly ordered: drain them before the function returns, so that
        // whoever learns it returned (the thread pool, the caller) sees the data.
        llvm::Function *sfence = llvm::Intrinsic::getDeclaration(&m, llvm::Intrinsic::x86_sse_sfence);
        for (llvm::BasicBlock &bb : f)
            if (auto *ret = llvm::dyn_cast<llvm::ReturnInst>(bb.getTerminator())) {
                llvm::IRBuilder<> b(ret);
                b.CreateCall(sfence);
            }
        marks.fenced++;
    }
    return marks;
}

std::set<std::string> streaming_funcs_in(const Halide::Pipeline &p, const std::set<std::string> &streaming) {
    std::set<std::string> in;
    if (streaming.empty()) return in;
    std::vector<Halide::Internal::Function> outs;
    for (const Halide::Func &f : p.outputs()) outs.push_back(f.function());
    for (const auto &kv : Halide::Internal::build_environment(outs))
        if (streaming.count(kv.first)) in.insert(kv.first);
    return in;
}

namespace {

int vector_bytes_of(const Halide::Target &t) { return t.natural_vector_size(Halide::Float(32)) * 4; }

/// Halide's LLVM module of \p p, marked. The module lives in \p ctx.
std::unique_ptr<llvm::Module> marked_module(const Halide::Pipeline &p, const std::vector<Halide::Argument> &args,
                                            const std::string &fn, const Halide::Target &target,
                                            const std::set<std::string> &streaming, llvm::LLVMContext &ctx,
                                            StreamingStoreMarks &marks, Halide::Module *module_out = nullptr) {
    Halide::Module m = Halide::Pipeline(p).compile_to_module(args, fn, target).resolve_submodules();
    std::unique_ptr<llvm::Module> lm = Halide::compile_module_to_llvm_module(m, ctx);
    marks = mark_streaming_stores(*lm, streaming, vector_bytes_of(target));
    if (debug_output()) {
        std::string names;
        for (const auto &n : streaming) names += (names.empty() ? "" : ", ") + n;
        std::cerr << "loom: " << fn << ": streaming stores into " << names << ": " << marks.marked
                  << " vector stores made non-temporal, " << marks.unaligned << " left normal (alignment unknown), "
                  << marks.fenced << " functions fenced\n";
    }
    if (module_out) *module_out = m;
    return lm;
}

}  // namespace

StreamingStoreMarks compile_streaming_object(const Halide::Pipeline &p, const std::vector<Halide::Argument> &args,
                                             const std::string &fn, const Halide::Target &target,
                                             const std::string &object, const std::string &header,
                                             const std::set<std::string> &streaming) {
    llvm::LLVMContext ctx;
    StreamingStoreMarks marks;
    Halide::Module m(fn, target);
    std::unique_ptr<llvm::Module> lm = marked_module(p, args, fn, target, streaming, ctx, marks, &m);
    {
        auto out = Halide::make_raw_fd_ostream(object);
        Halide::compile_llvm_module_to_object(*lm, *out);
    }
    if (!header.empty()) m.compile({{Halide::OutputFileType::c_header, header}});
    return marks;
}

namespace {

/// The context a StreamingJit run passes as __user_context: Halide's JITUserContext (the runtime's
/// hooks read its handlers) and the error text.
struct RunContext : Halide::JITUserContext {
    std::string error;
};

void collect_error(Halide::JITUserContext *ctx, const char *msg) { static_cast<RunContext *>(ctx)->error += msg; }

}  // namespace

StreamingJit::StreamingJit(const Halide::Pipeline &p, const std::vector<Halide::ImageParam> &params,
                           const Halide::Target &target, const std::set<std::string> &streaming)
    : context_(std::make_unique<llvm::LLVMContext>()), params_(params) {
    // As Pipeline::compile_jit: a JIT target whose functions take a user context first.
    Halide::Target t = target.with_feature(Halide::Target::JIT).with_feature(Halide::Target::UserContext);
    std::vector<Halide::Argument> args;
    for (const auto &ip : params) args.emplace_back(ip);
    const std::string fn = "loom_streaming_" + p.outputs()[0].name();
    std::unique_ptr<llvm::Module> lm = marked_module(p, args, fn, t, streaming, *context_, marks_);
    std::vector<Halide::Internal::JITModule> runtime = Halide::Internal::JITSharedRuntime::get(lm.get(), t);
    module_.compile_module(std::move(lm), fn, t, runtime);
    if (target.has_feature(Halide::Target::Profile)) {
        profiler_report_ = (void (*)(Halide::JITUserContext *))module_.find_symbol_by_name("halide_profiler_report").address;
        profiler_reset_ = (void (*)())module_.find_symbol_by_name("halide_profiler_reset").address;
    }
}

StreamingJit::~StreamingJit() {
    module_ = Halide::Internal::JITModule();  // the execution engine and its module, before their context
}

void StreamingJit::realize(const std::vector<Halide::Buffer<>> &outputs,
                           int (*do_par_for)(Halide::JITUserContext *, int (*)(Halide::JITUserContext *, int, uint8_t *),
                                             int, int, uint8_t *),
                           void (*print)(Halide::JITUserContext *, const char *)) {
    RunContext rc;
    rc.handlers.custom_error = collect_error;
    rc.handlers.custom_do_par_for = do_par_for;
    rc.handlers.custom_do_task = flushing_do_task;
    rc.handlers.custom_print = print;
    Halide::Internal::JITSharedRuntime::populate_jit_handlers(&rc, Halide::JITHandlers{});
    Halide::JITUserContext *ctx = &rc;
    std::vector<const void *> argv;
    argv.push_back(&ctx);
    for (const auto &ip : params_) argv.push_back(ip.get().raw_buffer());
    for (const auto &b : outputs) argv.push_back(b.raw_buffer());
    int status = module_.argv_function()(argv.data());
    if (profiler_report_ && profiler_reset_) {
        // What Pipeline::realize does after a profiled run: report, then start the counts afresh.
        profiler_report_(ctx);
        profiler_reset_();
    }
    if (status != 0) {
        if (rc.error.empty()) rc.error = "the pipeline returned exit status " + std::to_string(status);
        throw Halide::RuntimeError(rc.error);
    }
}

}  // namespace loom

