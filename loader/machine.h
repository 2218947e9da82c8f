// What of the machine this process may use: its CPUs and its memory, as
// the loader's bounds and its use of the page cache decide by them.
#pragma once

#include <cstdint>
#include <string>

namespace granary {

// The CPUs this process may run on (sched_getaffinity), at least 1.
int UsableCpuCount();

// The memory this process may use: the machine's (MemTotal), or less where
// a memory cgroup limit of its cgroup or one above it says so (v1
// memory.limit_in_bytes, v2 memory.max; the page cache counts against
// both). `cgroup_root`: where the cgroup file systems are mounted (v1's
// memory controller at <root>/memory, v2 at <root> or <root>/unified).
uint64_t MemoryLimitBytes(const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace granary
