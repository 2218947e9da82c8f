#include "trainer/launch/heartbeat.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace granary {
namespace {

// One rank's slot; a cache line each, so ranks never share one.
struct alignas(64) Slot {
  std::atomic<int64_t> beat_ns;  // CLOCK_MONOTONIC (one clock for every process on the machine); 0: not started
  std::atomic<int64_t> step;
  std::atomic<int32_t> waiting;  // nesting depth of WaitingForPeers
};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "slots are shared between processes: their atomics must not hide a lock");

int64_t NowNs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

Slot* own_slot = nullptr;  // this rank's, once attached

}  // namespace

StatusOr<HeartbeatBoard> HeartbeatBoard::Create(int ranks) {
  // Not close-on-exec: the ranks inherit it.
  const int fd = ::memfd_create("granary-heartbeat", 0);
  if (fd < 0) return Status::IOError("memfd", "create the heartbeat board", errno);
  const size_t bytes = sizeof(Slot) * static_cast<size_t>(ranks);
  void* map = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (map == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return Status::IOError("memfd", "map the heartbeat board", err);
  }
  return HeartbeatBoard(fd, map, ranks);  // zero-filled: nothing started
}

HeartbeatBoard::HeartbeatBoard(HeartbeatBoard&& other) noexcept
    : fd_(other.fd_), map_(other.map_), ranks_(other.ranks_) {
  other.fd_ = -1;
  other.map_ = nullptr;
}

HeartbeatBoard::~HeartbeatBoard() {
  if (map_ != nullptr) ::munmap(map_, sizeof(Slot) * static_cast<size_t>(ranks_));
  if (fd_ >= 0) ::close(fd_);
}

std::string HeartbeatBoard::Environment(int slot) const {
  return "GRANARY_HEARTBEAT=" + std::to_string(fd_) + ":" + std::to_string(slot);
}

RankPulse HeartbeatBoard::Read(int slot) const {
  const Slot& s = static_cast<const Slot*>(map_)[slot];
  RankPulse p;
  const int64_t beat = s.beat_ns.load(std::memory_order_relaxed);
  p.started = beat != 0;
  p.waiting = s.waiting.load(std::memory_order_relaxed) > 0;
  p.step = s.step.load(std::memory_order_relaxed);
  p.quiet_s = p.started ? static_cast<double>(NowNs() - beat) / 1e9 : 0;
  return p;
}

Status AttachHeartbeat() {
  const char* value = std::getenv("GRANARY_HEARTBEAT");
  if (value == nullptr || own_slot != nullptr) return Status::OK();
  const std::string v = value;
  int fd = -1, slot = -1;
  const size_t colon = v.find(':');
  try {
    fd = std::stoi(v.substr(0, colon));
    slot = colon == std::string::npos ? -1 : std::stoi(v.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (fd < 0 || slot < 0) return Status::InvalidArgument("GRANARY_HEARTBEAT=" + v + ": not <fd>:<slot>");
  const size_t bytes = sizeof(Slot) * static_cast<size_t>(slot + 1);
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the board alive
  if (map == MAP_FAILED) return Status::IOError("GRANARY_HEARTBEAT=" + v, "map the launcher's heartbeat board", err);
  own_slot = static_cast<Slot*>(map) + slot;
  HeartbeatBeat();
  return Status::OK();
}

void HeartbeatBeat() {
  if (own_slot != nullptr) own_slot->beat_ns.store(NowNs(), std::memory_order_relaxed);
}

void HeartbeatStep(int64_t step) {
  if (own_slot == nullptr) return;
  own_slot->step.store(step, std::memory_order_relaxed);
  HeartbeatBeat();
}

WaitingForPeers::WaitingForPeers() {
  if (own_slot == nullptr) return;
  own_slot->waiting.fetch_add(1, std::memory_order_relaxed);
  HeartbeatBeat();
}

WaitingForPeers::~WaitingForPeers() {
  if (own_slot == nullptr) return;
  HeartbeatBeat();
  own_slot->waiting.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace granary
