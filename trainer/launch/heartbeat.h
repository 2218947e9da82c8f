// Heartbeats: what each rank process is doing, kept in memory it shares with
// its launcher, so that the launcher can tell a rank that hangs (stopped,
// stuck, starved) from the ranks that wait for it in a collective, name it,
// and stop a many-node run whose ranks on other machines would otherwise wait
// on it for ever. Started by torchrun or by hand, a rank has no board and
// every call below does nothing.
#pragma once

#include <cstdint>
#include <string>

#include "base/environment.h"
#include "base/status.h"

namespace granary {

// How a rank's process ended, as it said itself (HeartbeatEnd): one that
// ends still kRunning was killed by a signal it could not catch (SIGKILL,
// the OOM killer) or crashed.
enum class RankEnd : int32_t { kRunning = 0, kExited = 1, kSignalled = 2 };

// A copy of one rank's slot, as the launcher reads it.
struct RankPulse {
  bool started = false;  // the rank has attached to the board
  bool waiting = false;  // blocked in a collective or the rendezvous
  int64_t step = 0;      // optimizer steps taken
  double quiet_s = 0;    // seconds since it last showed a sign of life
  int pid = 0;           // the rank's process (0: not attached)
  RankEnd ended = RankEnd::kRunning;
  int signal = 0;        // kSignalled: the signal it said ended it
  int64_t ended_ns = 0;  // when it said how it ended (CLOCK_MONOTONIC), to tell who went first
};

// The launcher's side: one slot per local rank in an anonymous shared file
// (memfd) the ranks inherit across exec. Movable, not copyable.
class HeartbeatBoard {
 public:
  static StatusOr<HeartbeatBoard> Create(int ranks);
  HeartbeatBoard(HeartbeatBoard&& other) noexcept;
  HeartbeatBoard& operator=(HeartbeatBoard&&) = delete;
  HeartbeatBoard(const HeartbeatBoard&) = delete;
  ~HeartbeatBoard();

  // "GRANARY_HEARTBEAT=<fd>:<slot>", for local rank `slot`'s environment;
  // `by_path`: the board as /proc/<launcher>/fd/<fd>, for a rank started
  // through mpirun, which does not pass descriptors on.
  std::string Environment(int slot, bool by_path = false) const;
  RankPulse Read(int slot) const;

 private:
  HeartbeatBoard(int fd, void* map, int ranks) : fd_(fd), map_(map), ranks_(ranks) {}
  int fd_ = -1;
  void* map_ = nullptr;
  int ranks_ = 0;
};

// The rank's side. AttachHeartbeat reads GRANARY_HEARTBEAT of `env` once, at start,
// from the main thread; the others may be called from any thread.
Status AttachHeartbeat(const Environment& env);
void HeartbeatBeat();              // a sign of life (an evaluation batch, ...)
void HeartbeatStep(int64_t step);  // an optimizer step taken
// How this rank is ending (async-signal-safe: a signal handler may call it);
// `signal`: the one that ends it, for kSignalled.
void HeartbeatEnd(RankEnd how, int signal = 0);

// A job's ranks on one machine that no launcher of ours started (the user's
// mpirun or srun) keep a board of their own: /dev/shm/granary-peers.<parent
// pid>.<job>, which each joins at slot `local` of `local_world` as rank
// `global` (of the job). Its name is removed once every local rank has
// joined (their mappings keep it), or by a later join once the parent that
// started those ranks is gone. Best effort: where it cannot be made, the
// rank has no board. Call once, at start, from the main thread.
void JoinPeerBoard(const std::string& job, int global, int local, int local_world);
bool HasPeerBoard();
// For a rank whose collective gave up after `quiet_s`: the ranks on this
// machine that have shown no sign of life for about that long outside any
// collective, or have ended, named ("rank 1 (pid 4242; its process is
// stopped) made no progress for 10 s, after 3 steps"); "" if none is (or
// this rank has no peer board).
std::string StuckPeers(double quiet_s);
// For a rank giving up on the job: the ranks on this machine stopped by a
// signal (SIGSTOP, Ctrl-Z; not held by a debugger) are ended with SIGKILL
// when this process exits (after it has said why it failed). Once its peers
// are gone such a rank could only resume into a collective that fails
// (OpenMPI's shared memory transport then prints "Read -1, expected ..."
// from a rank the user cannot tell is done), and mpirun ends it anyway when
// this rank fails. Says so ("; as this rank exits ..."), or "".
std::string EndStoppedPeersAtExit();

// Marks this rank as blocked on its peers for its lifetime (collectives nest:
// the outermost one counts).
class WaitingForPeers {
 public:
  WaitingForPeers();
  ~WaitingForPeers();
  WaitingForPeers(const WaitingForPeers&) = delete;
  WaitingForPeers& operator=(const WaitingForPeers&) = delete;
};

}  // namespace granary
