#include "trainer/launch/heartbeat.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "base/file.h"

namespace granary {
namespace {

// One rank's slot; a cache line each, so ranks never share one.
struct alignas(64) Slot {
  std::atomic<int64_t> beat_ns;  // CLOCK_MONOTONIC (one clock for every process on the machine); 0: not started
  std::atomic<int64_t> step;
  std::atomic<int32_t> waiting;  // nesting depth of WaitingForPeers
  std::atomic<int32_t> pid;      // the rank's process, once attached
  std::atomic<int32_t> ended;    // RankEnd: how it ended, as far as it could tell
  std::atomic<int32_t> signal;   // kSignalled: which signal
  std::atomic<int64_t> ended_ns; // when it said so (CLOCK_MONOTONIC)
};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "slots are shared between processes: their atomics must not hide a lock");

int64_t NowNs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

Slot* own_slot = nullptr;  // this rank's, once attached

// A stop signal (from mpirun, or the launcher) or a crash: said on the
// board with its number, a write in flight's temporary file removed, then
// the default action.
void EndBySignal(int sig) {
  HeartbeatEnd(RankEnd::kSignalled, sig);
  RemoveTemporaryFilesNow();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// A rank started through mpirun is mpirun's child, not the launcher's: it
// dies with mpirun (which dies with the launcher), and says on the board
// which signal ended it (a stop signal or a crash), so that the launcher can
// name the rank that went first and keep its signal in the exit status, as
// it does for ranks it forked itself. Installed before MPI_Init, which then
// leaves these handlers in place (OpenMPI's opal_signal).
void FollowMpirun() {
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(128 + SIGKILL);  // mpirun died before the prctl
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, EndBySignal);
}

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

std::string HeartbeatBoard::Environment(int slot, bool by_path) const {
  const std::string board = by_path ? "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd_)
                                    : std::to_string(fd_);
  return "GRANARY_HEARTBEAT=" + board + ":" + std::to_string(slot);
}

RankPulse HeartbeatBoard::Read(int slot) const {
  const Slot& s = static_cast<const Slot*>(map_)[slot];
  RankPulse p;
  const int64_t beat = s.beat_ns.load(std::memory_order_relaxed);
  p.started = beat != 0;
  p.waiting = s.waiting.load(std::memory_order_relaxed) > 0;
  p.step = s.step.load(std::memory_order_relaxed);
  p.quiet_s = p.started ? static_cast<double>(NowNs() - beat) / 1e9 : 0;
  p.pid = s.pid.load(std::memory_order_relaxed);
  p.ended = static_cast<RankEnd>(s.ended.load(std::memory_order_acquire));
  p.signal = s.signal.load(std::memory_order_relaxed);
  p.ended_ns = s.ended_ns.load(std::memory_order_relaxed);
  return p;
}

Status AttachHeartbeat(const Environment& env) {
  if (!env.Has("GRANARY_HEARTBEAT") || own_slot != nullptr) return Status::OK();
  const std::string v = env.Get("GRANARY_HEARTBEAT");
  int fd = -1, slot = -1;
  const size_t colon = v.rfind(':');
  const std::string board = v.substr(0, colon);
  // A path (/proc/PID/fd/N of the launcher) where an MPI launcher between
  // the two closed the inherited descriptor.
  const bool by_path = board.rfind('/', 0) == 0;
  try {
    fd = by_path ? ::open(board.c_str(), O_RDWR | O_CLOEXEC) : std::stoi(board);
    slot = colon == std::string::npos ? -1 : std::stoi(v.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (fd < 0 || slot < 0) {
    if (fd >= 0 && by_path) ::close(fd);
    return Status::InvalidArgument("GRANARY_HEARTBEAT=" + v + ": not <fd or path>:<slot> of a board this rank can open");
  }
  const size_t bytes = sizeof(Slot) * static_cast<size_t>(slot + 1);
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the board alive
  if (map == MAP_FAILED) return Status::IOError("GRANARY_HEARTBEAT=" + v, "map the launcher's heartbeat board", err);
  own_slot = static_cast<Slot*>(map) + slot;
  own_slot->pid.store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
  if (by_path) FollowMpirun();
  // An exit() inside a library (OpenMPI's abort in MPI_Init) is an exit, not a vanishing.
  std::atexit([] {
    if (own_slot != nullptr && own_slot->ended.load() == static_cast<int32_t>(RankEnd::kRunning)) {
      HeartbeatEnd(RankEnd::kExited);
    }
  });
  HeartbeatBeat();
  return Status::OK();
}

void HeartbeatEnd(RankEnd how, int signal) {
  if (own_slot == nullptr) return;
  own_slot->signal.store(signal, std::memory_order_relaxed);
  own_slot->ended_ns.store(NowNs(), std::memory_order_relaxed);
  own_slot->ended.store(static_cast<int32_t>(how), std::memory_order_release);
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
