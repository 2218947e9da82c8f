// What of the machine this process may use, its CPUs and its memory, as a
// container or scheduler may limit them (cgroups): the trainer's layout, the
// loader's bounds and its use of the page cache decide by them; and how many
// processes the kernel killed for want of memory, to say why one died.
#pragma once

#include <cstdint>
#include <string>

namespace granary {

// The CPUs this process may use: those it may run on (sched_getaffinity),
// or fewer where a CPU quota grants less (CpuQuotaCpus, read once a
// process); at least 1.
int UsableCpuCount();

// The CPU time a CPU quota of this process's cgroup, or of one above it,
// grants, in CPUs: quota / period (v1 cpu.cfs_quota_us / cpu.cfs_period_us,
// v2 cpu.max), the smallest on the way up; 0 where none is set. `docker run
// --cpus 2`, a Kubernetes pod's CPU limit and systemd's CPUQuota= set one:
// the process may run on every CPU of the machine, but for that much CPU
// time each period, and threads beyond it are throttled, not run.
// `cgroup_root` as for MemoryLimitBytes (v1's cpu controller at <root>/cpu).
double CpuQuota(const std::string& cgroup_root = "/sys/fs/cgroup");

// CpuQuota's whole CPUs, at least 1 (rounded down, as Go's automaxprocs
// does: a thread on a part of a CPU is throttled every period), or 0 where
// no quota is set.
int CpuQuotaCpus(const std::string& cgroup_root = "/sys/fs/cgroup");

// The machine's memory (MemTotal), in bytes.
uint64_t MachineMemoryBytes();

// The memory this process may use: the machine's (MemTotal), or less where
// a memory cgroup limit of its cgroup or one above it says so (v1
// memory.limit_in_bytes, v2 memory.max; the page cache counts against
// both). `cgroup_root`: where the cgroup file systems are mounted (v1's
// memory controller at <root>/memory, v2 at <root> or <root>/unified).
uint64_t MemoryLimitBytes(const std::string& cgroup_root = "/sys/fs/cgroup");

// How many processes the kernel's out-of-memory killer has ended: where this
// process's memory cgroup, or one above it, outgrew its limit (v1
// memory.oom_control's oom_kill, v2 memory.events', summed on the way up),
// and on the whole machine (/proc/vmstat's oom_kill, every such kill
// included). Counted before processes start and after one is killed by
// SIGKILL, they say whether the kernel killed it for memory.
struct OomKills {
  uint64_t cgroup = 0;
  uint64_t machine = 0;
};
OomKills CountOomKills(const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace granary
