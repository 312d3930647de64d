/// \file
/// The schedule language's AST (DESIGN.md "Schedule files"). A Schedule is data: a header (model,
/// its sha256, the target) and an ordered list of statements, each a chain of primitive calls on
/// one stage of one Func. Hand-written files (schedule_parser.h), the autoscheduler's output and the
/// printer (schedule_printer.h) share this one format; `parse(print(s)) == s`.
///
/// Building a statement in code (what the autoscheduler does):
/// \code
///   ScheduleStatement st("fc1_gemm");
///   st.comments.push_back("fuses fc1_gemm, fc1_relu: saves 4 MB");
///   st.add("compute_root").add("split", {"j", "jo", "ji", 8}).add("vectorize", {"ji"});
///   st.add("parallel", {"i"});
///   sched.statements.push_back(st);
/// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// Where something was written: file, 1-based line and column (0 = not from a file).
struct SourceLoc {
    std::string file;
    int line = 0;
    int col = 0;
    /// "file:line:col", or "<file>:" parts left out when unknown ("<schedule>" for no file).
    std::string str() const;
};

/// One argument of a primitive call.
struct ScheduleArg {
    enum class Kind {
        Ident,   ///< a Func or var name: "x", "r.x", "k", "root", "RoundUp" (bare enum names too)
        Int,     ///< an integer literal (may be negative)
        Tail,    ///< written `TailStrategy::<name>`; name holds just <name>
        Memory,  ///< written `MemoryType::<name>`; name holds just <name>
    };
    Kind kind = Kind::Ident;
    std::string name;   ///< Ident/Tail/Memory
    int64_t value = 0;  ///< Int
    SourceLoc loc;

    ScheduleArg() = default;
    ScheduleArg(const char *ident) : name(ident) {}          // NOLINT: implicit on purpose
    ScheduleArg(const std::string &ident) : name(ident) {}   // NOLINT
    ScheduleArg(int v) : kind(Kind::Int), value(v) {}        // NOLINT
    ScheduleArg(int64_t v) : kind(Kind::Int), value(v) {}    // NOLINT
    static ScheduleArg tail(const std::string &n);    ///< TailStrategy::n
    static ScheduleArg memory(const std::string &n);  ///< MemoryType::n

    bool is_ident() const { return kind == Kind::Ident; }
    bool is_int() const { return kind == Kind::Int; }
    /// The text as the printer writes it.
    std::string str() const;
    /// Equality ignores loc.
    bool operator==(const ScheduleArg &o) const;
    bool operator!=(const ScheduleArg &o) const { return !(*this == o); }
};

/// One primitive call: `split(x, xo, xi, 8)`, `rfactor(r.x, u) as loss_part`.
struct PrimitiveCall {
    std::string name;               ///< "split", "compute_at" …
    std::vector<ScheduleArg> args;
    std::string as_name;            ///< new Func name for rfactor/in ("" if none)
    SourceLoc loc;                  ///< position of the primitive's name

    PrimitiveCall() = default;
    PrimitiveCall(std::string n, std::vector<ScheduleArg> a = {}, std::string as = "")
        : name(std::move(n)), args(std::move(a)), as_name(std::move(as)) {}
    /// "split(x, xo, xi, 8)" (with " as n" when as_name is set), as in messages.
    std::string str() const;
    bool operator==(const PrimitiveCall &o) const;  ///< ignores loc
    bool operator!=(const PrimitiveCall &o) const { return !(*this == o); }
};

/// `func[.update(stage)].call().call()…;` with the comment lines written above it.
struct ScheduleStatement {
    std::string func;
    int stage = -1;                     ///< update index; -1 = the pure definition
    std::vector<PrimitiveCall> calls;
    std::vector<std::string> comments;  ///< comment lines, text after "# " (kept, printed above)
    SourceLoc loc;                      ///< position of the func name

    ScheduleStatement() = default;
    explicit ScheduleStatement(std::string f, int stage_ = -1) : func(std::move(f)), stage(stage_) {}
    /// Appends a call; returns *this for chaining.
    ScheduleStatement &add(const std::string &prim, std::vector<ScheduleArg> args = {},
                           const std::string &as_name = "");
    /// "fc1_gemm" or "fc1_gemm.update(0)".
    std::string stage_name() const;
    bool operator==(const ScheduleStatement &o) const;  ///< ignores loc
    bool operator!=(const ScheduleStatement &o) const { return !(*this == o); }
};

/// A whole schedule file.
struct Schedule {
    std::string model;   ///< model name from `# loom schedule for <model> (sha256 <hex>) on <target>`
    std::string sha256;  ///< model file hash ("" = not recorded)
    std::string target;  ///< Halide target string it was written for ("" = not recorded)
    std::vector<std::string> header_comments;  ///< other comment lines of the header block
    std::vector<ScheduleStatement> statements;
    std::vector<std::string> trailing_comments;  ///< comments after the last statement
    std::string file;    ///< path it was read from (not compared; used in messages)

    /// True if the header carries anything (model, hash, target or comments).
    bool has_header() const;
    /// Statements for \p func (any stage), in file order.
    std::vector<const ScheduleStatement *> statements_for(const std::string &func) const;
    bool operator==(const Schedule &o) const;  ///< ignores file and every loc
    bool operator!=(const Schedule &o) const { return !(*this == o); }
};

/// What the language knows about one primitive (shared by parser, validator, printer, tests). The
/// functions that check and apply it are in schedule/primitives/ (families.h).
struct PrimitiveInfo {
    const char *name;
    int min_args, max_args;  ///< max_args = -1: unbounded
    const char *signature;   ///< for messages: "split(var, outer, inner, factor[, TailStrategy])"
    bool makes_func;         ///< needs `as <name>` (rfactor, in)
    bool gpu;                ///< only valid on a GPU target (gpu_tile, gpu_blocks …)
    bool pure_only;          ///< Func-level only, not on update(k) (compute_at, bound, store_in …)
};

/// The primitive called \p name, or nullptr.
const PrimitiveInfo *find_primitive(const std::string &name);
/// All primitive names, for "did you mean" and listings.
std::vector<std::string> primitive_names();
/// Halide's TailStrategy names (RoundUp GuardWithIf Predicate PredicateLoads PredicateStores
/// ShiftInwards Auto).
const std::vector<std::string> &tail_strategy_names();
/// Halide's MemoryType names (Auto Heap Stack Register GPUShared GPUTexture LockedCache VTCM
/// AMXTile).
const std::vector<std::string> &memory_type_names();

}  // namespace loom
