/// \file
/// How many CPU cores this process may run on: the scheduler's affinity mask (`taskset`, a
/// container's cpuset), not every core the machine has, so that a process confined to two cores
/// neither plans nor compiles for sixteen.
#pragma once

namespace loom {

/// The cores in this process's affinity mask (at least 1); where the mask cannot be read, every
/// core the machine reports.
int usable_cores();

}  // namespace loom
