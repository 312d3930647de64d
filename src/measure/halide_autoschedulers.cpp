#include "measure/halide_autoschedulers.h"

#include <cstdlib>
#include <mutex>
#include <set>

#include "support/error.h"

namespace loom {

const std::vector<std::string> &halide_autoscheduler_names() {
    static const std::vector<std::string> names = {"mullapudi2016", "li2018", "adams2019"};
    return names;
}

std::string halide_autoscheduler_registered_name(const std::string &name) {
    std::string lower;
    for (char c : name) lower += (char)std::tolower((unsigned char)c);
    if (lower == "mullapudi2016") return "Mullapudi2016";
    if (lower == "li2018") return "Li2018";
    if (lower == "adams2019") return "Adams2019";
    std::string valid;
    for (const auto &n : halide_autoscheduler_names()) valid += (valid.empty() ? "" : ", ") + n;
    throw UserError(str_cat("unknown Halide autoscheduler '", name, "'",
                            did_you_mean(lower, halide_autoscheduler_names()), " (valid: ", valid, ")"));
}

std::string halide_plugin_dir() {
    if (const char *d = std::getenv("LOOM_HALIDE_PLUGIN_DIR"); d && *d) return d;
    return "/usr/lib/x86_64-linux-gnu/halide14";
}

void load_halide_autoscheduler(const std::string &name) {
    static std::mutex mu;
    static std::set<std::string> loaded;
    std::string reg = halide_autoscheduler_registered_name(name);
    std::lock_guard<std::mutex> lock(mu);
    if (loaded.count(reg)) return;
    std::string lower;
    for (char c : reg) lower += (char)std::tolower((unsigned char)c);
    std::string path = halide_plugin_dir() + "/libautoschedule_" + lower + ".so";
    try {
        Halide::load_plugin(path);
    } catch (const Halide::Error &e) {
        throw UserError(str_cat("cannot load Halide autoscheduler ", reg, " from ", path, ": ",
                                e.what(), " (set LOOM_HALIDE_PLUGIN_DIR to the plugins' folder)"));
    }
    loaded.insert(reg);
}

Halide::MachineParams halide_machine_params(const MachineModel &m) {
    return Halide::MachineParams(m.cores, (uint64_t)(m.l2_bytes > 0 ? m.l2_bytes : 1 << 20), 40);
}

std::string apply_halide_autoscheduler(LoweredPipeline &lowered, const std::string &name,
                                       const Halide::Target &target, const MachineModel &machine) {
    load_halide_autoscheduler(name);
    std::string reg = halide_autoscheduler_registered_name(name);
    Halide::Pipeline p = lowered.pipeline();
    try {
        Halide::AutoSchedulerResults r = p.auto_schedule(reg, target, halide_machine_params(machine));
        return r.schedule_source;
    } catch (const Halide::Error &e) {
        throw UserError(str_cat("Halide autoscheduler ", reg, " failed: ", e.what()));
    }
}

}  // namespace loom
