#include "trainer/launch/heartbeat.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "base/file.h"
#include "trainer/launch/rank_processes.h"

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
  std::atomic<int32_t> rank;     // a peer board's: the rank's number in its job
};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "slots are shared between processes: their atomics must not hide a lock");

int64_t NowNs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

Slot* own_slot = nullptr;  // this rank's, once attached
Slot* peer_board = nullptr;  // JoinPeerBoard's, and its slots
int peer_slots = 0;

constexpr const char* kPeerBoardPrefix = "granary-peers.";

// What a rank does once it has a slot: says its pid, and that an exit()
// inside a library (OpenMPI's abort in MPI_Init) is an exit, not a vanishing.
void ClaimSlot(Slot* slot) {
  own_slot = slot;
  own_slot->pid.store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
  std::atexit([] {
    if (own_slot != nullptr && own_slot->ended.load() == static_cast<int32_t>(RankEnd::kRunning)) {
      HeartbeatEnd(RankEnd::kExited);
    }
  });
  HeartbeatBeat();
}

// Peer boards whose ranks' parent is gone (a job that ended before all of its
// ranks joined): their names, this user's only.
void SweepPeerBoards() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPeerBoardPrefix, 0) != 0) continue;
    const long parent = std::strtol(name.c_str() + std::strlen(kPeerBoardPrefix), nullptr, 10);
    struct stat st {};
    if (parent > 0 && ::kill(static_cast<pid_t>(parent), 0) != 0 && errno == ESRCH &&
        ::lstat(entry.path().c_str(), &st) == 0 && st.st_uid == ::geteuid()) {
      ::unlink(entry.path().c_str());
    }
  }
}

// A stop signal (from mpirun, or the launcher) or a crash: said on the
// board with its number, a write in flight's temporary file removed, then
// the default action.
void EndBySignal(int sig) {
  HeartbeatEnd(RankEnd::kSignalled, sig);
  RemoveTemporariesAndDie(sig);
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
  ClaimSlot(static_cast<Slot*>(map) + slot);
  if (by_path) FollowMpirun();
  return Status::OK();
}

void JoinPeerBoard(const std::string& job, int global, int local, int local_world) {
  if (own_slot != nullptr || local < 0 || local >= local_world || local_world > 4096) return;
  std::string id;  // the job's id as a file name may hold it
  for (char c : job) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') id += c;
  }
  if (id.empty()) return;
  SweepPeerBoards();
  const std::string path = std::string("/dev/shm/") + kPeerBoardPrefix + std::to_string(::getppid()) + "." + id;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  const size_t bytes = sizeof(Slot) * static_cast<size_t>(local_world);
  struct stat st {};
  void* map = MAP_FAILED;
  // Another user's file of that name is not joined; every rank sizes it alike.
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      (static_cast<size_t>(st.st_size) >= bytes || ::ftruncate(fd, static_cast<off_t>(bytes)) == 0)) {
    map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (map == MAP_FAILED) return;
  peer_board = static_cast<Slot*>(map);
  peer_slots = local_world;
  peer_board[local].rank.store(global, std::memory_order_relaxed);
  ClaimSlot(peer_board + local);
  bool all_joined = true;
  for (int i = 0; i < local_world; ++i) all_joined = all_joined && peer_board[i].pid.load() != 0;
  if (all_joined) ::unlink(path.c_str());  // the last to join; another doing it too finds it gone
}

bool HasPeerBoard() { return peer_board != nullptr; }

std::string StuckPeers(double quiet_s) {
  std::string found;
  for (int i = 0; i < peer_slots; ++i) {
    const Slot& s = peer_board[i];
    const int pid = s.pid.load(std::memory_order_relaxed);
    if (&s == own_slot || pid == 0) continue;
    const std::string name = "rank " + std::to_string(s.rank.load(std::memory_order_relaxed));
    const ProcState state = ReadProcState(pid);
    const auto ended = static_cast<RankEnd>(s.ended.load(std::memory_order_acquire));
    std::string line;
    if (ended != RankEnd::kRunning || state.state == 0 || state.state == 'Z') {
      line = name + " (pid " + std::to_string(pid) + ") has ended" +
             (ended == RankEnd::kSignalled ? " by signal " + std::to_string(s.signal.load()) : "");
    } else {
      const double quiet = static_cast<double>(NowNs() - s.beat_ns.load(std::memory_order_relaxed)) / 1e9;
      const bool stopped = state.state == 'T' || state.state == 't';
      if (!stopped && (s.waiting.load(std::memory_order_relaxed) > 0 || quiet < 0.9 * quiet_s)) continue;
      line = name + " (pid " + std::to_string(pid) + (stopped ? "; its process is stopped" : "") +
             ") made no progress for " + std::to_string(static_cast<long>(quiet)) + " s, after " +
             std::to_string(s.step.load(std::memory_order_relaxed)) + " steps";
    }
    found += (found.empty() ? "" : "; ") + line;
  }
  return found;
}

namespace {

// The peers on this machine stopped by a signal (SIGSTOP, Ctrl-Z) that have
// not ended, siblings of this rank (started by its parent): not one a
// debugger holds ('t'), whose user is looking at it.
std::vector<const Slot*> StoppedPeers() {
  std::vector<const Slot*> stopped;
  for (int i = 0; i < peer_slots; ++i) {
    const Slot& s = peer_board[i];
    const int pid = s.pid.load(std::memory_order_relaxed);
    if (&s == own_slot || pid == 0 || s.ended.load(std::memory_order_acquire) != 0) continue;
    const ProcState state = ReadProcState(pid);
    if (state.state == 'T' && state.parent == ::getppid()) stopped.push_back(&s);
  }
  return stopped;
}

}  // namespace

std::string EndStoppedPeersAtExit() {
  std::string ranks;
  for (const Slot* s : StoppedPeers()) {
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(s->rank.load(std::memory_order_relaxed));
  }
  if (ranks.empty()) return "";
  static std::atomic<bool> registered{false};
  if (!registered.exchange(true)) {
    std::atexit([] {
      for (const Slot* s : StoppedPeers()) ::kill(s->pid.load(std::memory_order_relaxed), SIGKILL);
    });
  }
  return "; as this rank exits it ends rank " + ranks + " with SIGKILL (a stopped process cannot end with the job)";
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
