#include "schedule/schedule_header.h"

#include "schedule/schedule_internal.h"
#include "support/error.h"

namespace loom {

namespace {

// Whether a schedule written for \p written makes the same code for \p running: the JIT feature
// only says how the code is loaded, so a file written by a JIT run matches an artifact's target.
bool same_code_target(const std::string &written, const Halide::Target &running) {
    try {
        return Halide::Target(written).without_feature(Halide::Target::JIT) ==
               running.without_feature(Halide::Target::JIT);
    } catch (const Halide::Error &) {
        return written == running.to_string();
    }
}

}  // namespace

using sched_internal::where;

std::vector<std::string> check_schedule_header(const Schedule &s, const Halide::Target &target,
                                               const std::string &model_sha256) {
    std::vector<std::string> warnings;
    std::string file = s.file.empty() ? "<schedule>" : s.file;
    if (!s.sha256.empty() && !model_sha256.empty() && s.sha256 != model_sha256)
        warnings.push_back(file + ": written for model " + s.model + " with sha256 " + s.sha256 +
                           ", but this model's sha256 is " + model_sha256 +
                           "; Func names may have changed");
    for (const auto &st : s.statements)
        for (const auto &c : st.calls) {
            const PrimitiveInfo *pi = find_primitive(c.name);
            if (pi && pi->gpu && !target.has_gpu_feature())
                throw UserError(where(c.loc.line > 0 ? c.loc : st.loc, file) + st.stage_name() + "." + c.str() +
                                ": target " + target.to_string() +
                                " has no GPU; this schedule is for a GPU target" +
                                (s.target.empty() ? "" : " (" + s.target + ")") +
                                "; valid: a CPU schedule, `eager`, `inline` or `auto`");
        }
    if (!s.target.empty()) {
        bool file_gpu = false;
        try {
            file_gpu = Halide::Target(s.target).has_gpu_feature();
        } catch (Halide::Error &) {
            file_gpu = s.target.find("cuda") != std::string::npos;
        }
        if (file_gpu != target.has_gpu_feature())
            throw UserError(file + ": written for " + (file_gpu ? "GPU" : "CPU") + " target " + s.target +
                            ", but the target is " + (target.has_gpu_feature() ? "GPU" : "CPU") + " target " +
                            target.to_string() + "; valid: a schedule for a " +
                            (target.has_gpu_feature() ? "GPU" : "CPU") + " target, `eager`, `inline` or `auto`");
        if (!same_code_target(s.target, target))
            warnings.push_back(file + ": written for target " + s.target + ", running on " + target.to_string());
    }
    return warnings;
}

}  // namespace loom
