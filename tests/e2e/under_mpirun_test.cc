// train under the user's own mpirun (OpenMPI as it ships: each rank bound to
// a core), under torchrun's environment gone wrong, and train's own mpirun
// stopped or its output lost: the right result or one line naming the cause.
#include <sched.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// mpirun as a user types it (root must say --allow-run-as-root).
std::string Mpirun() { return ::geteuid() == 0 ? "mpirun --allow-run-as-root " : "mpirun "; }

int UsableCpuCountForTest() {
  cpu_set_t set;
  return ::sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

class UnderMpirun : public SmallDbRun {
 protected:
  void SetUp() override {
    if (RunCommand("command -v mpirun", dir_).exit_code != 0) {
      GTEST_SKIP() << "no mpirun (tools/setup installs OpenMPI)";
    }
    SmallDbRun::SetUp();
  }
};

// The README's cluster command on one machine, with OpenMPI's default
// binding (a core per rank) and as `-H host:slots`: each process is one rank
// of a 2-rank job and trains as train's own 2 ranks of 1 thread do.
TEST_F(UnderMpirun, TheReadmesMpirunCommandTrainsAsTrainsOwnRanks) {
  const std::string recipe = "--db " + db_ + " --backend mpi --epochs 1 --seed 4 --json";
  const auto own = TrainJson(recipe + " --ranks 2 --threads 1", dir_);
  ASSERT_EQ(own["epochs"].size(), 1u);
  for (const std::string hosts : {"", "-H localhost:2 "}) {
    SCOPED_TRACE(hosts);
    auto r = RunCommand(Mpirun() + "-np 2 " + hosts + kTrain + " " + recipe, dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["config"]["dist"]["ranks"], 2);
    EXPECT_EQ(j["config"]["dist"]["threads"], 1);
    EXPECT_EQ(j["epochs"][0]["weights_hash"], own["epochs"][0]["weights_hash"]);
    EXPECT_NE(j["layout_text"].get<std::string>().find("bound by mpirun: this rank to CPU"), std::string::npos)
        << j["layout_text"];
  }
}

// Under mpirun a process is one rank of mpirun's job, whatever the flags say:
// what contradicts the job is refused, naming it, before any training.
TEST_F(UnderMpirun, FlagsThatContradictTheJobAreRefusedNamingIt) {
  const std::string run = Mpirun() + "-np 2 " + kTrain + " --db " + db_ + " --epochs 1 ";
  const std::pair<std::string, std::string> cases[] = {
      {"--backend gloo", "--backend gloo under mpirun (a job of 2 processes)"},
      {"--ranks 1", "--ranks 1: mpirun's job says 2"},
      {"--nnodes 3 --node-rank 2", "--nnodes 3: mpirun's job says 1"},
      {"--tune", "--tune under mpirun"},
      {"--tune-only", "--tune-only under mpirun"},
      {"--threads 2", "--threads 2: mpirun bound this rank to CPU"}};
  for (const auto& [flags, line] : cases) {
    SCOPED_TRACE(flags);
    auto r = RunCommand(run + flags, dir_);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(line), std::string::npos) << r.err;  // from whichever rank mpirun let say it
    EXPECT_EQ(r.out.find("epoch 1/"), std::string::npos) << r.out;
  }
  // An MPMD job with one process over Gloo: refused, so mpirun ends the job.
  auto mpmd = RunCommand(Mpirun() + "-np 1 " + kTrain + " --db " + db_ + " --backend mpi : -np 1 " + kTrain +
                             " --db " + db_ + " --backend gloo",
                         dir_);
  EXPECT_NE(mpmd.exit_code, 0);
  EXPECT_NE(mpmd.err.find("--backend gloo under mpirun"), std::string::npos) << mpmd.err;
  EXPECT_EQ(mpmd.out.find("epoch 1/"), std::string::npos) << mpmd.out;
  // Three ranks on two cores, unbound (mpirun --oversubscribe): named as the job's, not as a --ranks never given.
  auto three = RunCommand(Mpirun() + "--oversubscribe -np 3 " + kTrain + " --db " + db_ + " --batch-size 66", dir_);
  if (UsableCpuCountForTest() < 3) {
    EXPECT_NE(three.exit_code, 0);
    EXPECT_NE(three.err.find("mpirun's job runs 3 ranks on this node"), std::string::npos) << three.err;
    EXPECT_EQ(three.err.find("--ranks 3"), std::string::npos) << three.err;
  }
}

// torchrun's variables that do not fit, or beside mpirun's, are refused;
// --backend mpi across machines without mpirun is refused before any rank.
TEST_F(UnderMpirun, AJobEnvironmentThatDoesNotFitIsRefused) {
  const std::string torchrun = "LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 ";
  ExpectOneLineError(RunCommand("RANK=5 WORLD_SIZE=2 " + torchrun + train_, dir_),
                     "train: rank 5: torchrun environment: RANK 5, WORLD_SIZE 2");
  ExpectOneLineError(RunCommand("RANK=abc WORLD_SIZE=2 " + torchrun + train_, dir_),
                     "torchrun environment: RANK abc");
  ExpectOneLineError(RunCommand("RANK=0 WORLD_SIZE=2 " + train_, dir_), "LOCAL_WORLD_SIZE is not");
  auto both = RunCommand(Mpirun() + "-np 2 -x RANK=0 -x WORLD_SIZE=2 " + train_, dir_);
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("both torchrun's variables (RANK 0, WORLD_SIZE 2) and an MPI launcher's"),
            std::string::npos)
      << both.err;
  ExpectOneLineError(RunCommand(train_ + "--backend mpi --nnodes 2 --master-port 29999", dir_),
                     "--backend mpi --nnodes 2: train starts MPI jobs on this machine only");
}

// train's own mpirun needs no remote shell on one machine (OpenMPI's plm
// isolated), and the launcher's variables replace a user's of the same name.
TEST_F(UnderMpirun, TrainsOwnMpirunNeedsNoSshAndItsVariablesWin) {
  const std::string bin = dir_.Sub("bin");
  fs::create_directories(bin);
  const std::string mpiexec = RunCommand("command -v mpiexec", dir_).out;
  fs::create_symlink(mpiexec.substr(0, mpiexec.find('\n')), bin + "/mpiexec");  // and no ssh beside it
  auto r = RunCommand("env PATH=" + bin + " " + train_ + "--ranks 2 --backend mpi --epochs 1", dir_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("epoch 1/1"), std::string::npos) << r.out;
  for (const char* backend : {"gloo", "mpi"}) {
    auto stray = RunCommand(std::string("GRANARY_HEARTBEAT=garbage:0 ") + train_ + "--ranks 2 --epochs 1 --backend " +
                                backend,
                            dir_);
    EXPECT_EQ(stray.exit_code, 0) << backend << ": " << stray.err;
  }
}

// Train's own mpirun puts OpenMPI's shared memory in /dev/shm (a segment of
// 4 MiB a rank, PMIx's store). Where /dev/shm is too small for it (a
// container's is 64 MiB unless docker run --shm-size says more), a rank died
// by SIGBUS inside MPI_Init and the line said `rank 1 was killed ...: SIGKILL,
// the OOM killer or a crash`; now the launcher says so before starting any.
TEST_F(UnderMpirun, TrainsOwnMpirunOnADevShmTooSmallForItIsToldSo) {
  if (RunCommand("unshare -rm true", dir_).exit_code != 0) GTEST_SKIP() << "no unshare: user namespaces are off";
  auto on_shm = [&](const std::string& size) {
    return RunCommand("unshare -rm sh -c 'mount -t tmpfs -o size=" + size + " tmpfs /dev/shm && exec " + train_ +
                          "--ranks 2 --backend mpi --epochs 1'",
                      dir_);
  };
  ExpectOneLineError(on_shm("4m"), "--backend mpi: /dev/shm has 4.0 MiB free, and OpenMPI's shared memory for 2 "
                                   "ranks on this machine takes about 14 MiB (a 4 MiB segment each)");
  auto docker = on_shm("64m");  // docker run's default
  EXPECT_EQ(docker.exit_code, 0) << docker.err;
  EXPECT_NE(docker.out.find("epoch 1/1"), std::string::npos) << docker.out;
}

// What ended a run over train's own mpirun is named as over Gloo: mpirun
// killed, mpirun stopping every rank, a rank's signal (kept in the exit
// status; SIGKILL, which the rank cannot say, told by mpirun's status), and
// OpenMPI's own complaint in one line.
TEST_F(UnderMpirun, WhatEndedARunOverTrainsOwnMpirunIsNamed) {
  const std::string metrics = dir_.Sub("m.jsonl");
  const std::string run = train_ + "--ranks 2 --backend mpi --epochs 1000 --log-every 1 --metrics " + metrics;
  const std::string mpiexec = "'^[^ ]*mpiexec .*" + db_ + "'", rank1 = "'^" + kTrain + " .*" + db_ + ".* [-]-rank 1$'";
  const std::string processes = "'^([^ ]*mpiexec|" + kTrain + ") .*" + db_ + "'";
  struct Case {
    std::string signal, target, status, line;
  };
  for (const Case& c : {Case{"KILL", mpiexec, "137", "was killed by signal 9 (Killed); its ranks end with it"},
                        Case{"TERM", rank1, "143", "train: rank 1 was killed by signal 15 (Terminated)"},
                        Case{"TERM", mpiexec, "143", "ended the job, stopping its ranks with signal 15"},
                        Case{"SEGV", rank1, "139", "train: rank 1 was killed by signal 11 (Segmentation fault)"},
                        Case{"KILL", rank1, "137", "train: rank 1 was killed (its process ended without exiting"}}) {
    SCOPED_TRACE(c.signal + " " + c.target);
    fs::remove(metrics);
    auto r = RunCommand("{ " + run + " > /dev/null & L=$!; " + WaitForFirstStep(metrics) + "pkill -" + c.signal +
                            " -f " + c.target + "; wait $L; echo status $?; " + EchoLeftAfterWaiting(processes) + "}",
                        dir_);
    EXPECT_NE(r.out.find("status " + c.status), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("left 0"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(c.line), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("noticed that process"), std::string::npos) << r.err;  // mpirun's box, said by the launcher
  }
  auto bogus = RunCommand("OMPI_MCA_btl=bogus " + train_ + "--ranks 2 --backend mpi --epochs 1", dir_);
  EXPECT_EQ(bogus.exit_code, 1) << bogus.err;  // mpirun's status: no rank's signal
  // OpenMPI's account, boxes summed up as lines (which of its messages arrive before it ends the job varies;
  // on a loaded machine none may: then the launcher says what it saw, and the settings that may be why).
  if (bogus.err.find("no reason from OpenMPI arrived") == std::string::npos) {
    EXPECT_NE(bogus.err.find("train: OpenMPI: "), std::string::npos) << bogus.err;
    EXPECT_NE(bogus.err.find("train: OpenMPI ended the job, for the reason it gives above"), std::string::npos)
        << bogus.err;
  } else {  // the ranks' signal named where they said it before mpirun ended them
    EXPECT_NE(bogus.err.find("ended the job before any rank took a step, "), std::string::npos) << bogus.err;
    EXPECT_NE(bogus.err.find("settings from the environment: OMPI_MCA_btl=bogus"), std::string::npos) << bogus.err;
  }
  EXPECT_EQ(bogus.err.find("-----"), std::string::npos) << bogus.err;
  EXPECT_EQ(bogus.err.find("killed"), std::string::npos) << bogus.err;
  EXPECT_EQ(bogus.err.find("was mpirun sent it?"), std::string::npos) << bogus.err;
  size_t boxes = 0;  // each of OpenMPI's messages once, however many ranks sent it
  for (size_t at = 0; (at = bogus.err.find("MPI_INIT failed", at)) != std::string::npos; ++at) ++boxes;
  EXPECT_LE(boxes, 1u) << bogus.err;
}

// train's own mpirun stopped (SIGSTOP) mid-run: the run ends within
// --timeout, naming mpirun, exit non-zero, nothing left behind; stdout that
// cannot be written fails the run as over Gloo; SIGHUP ends it as SIGTERM
// does; a launcher killed outright leaves its shared memory to the next.
TEST_F(UnderMpirun, AStoppedOrLostMpirunAndLostOutputEndTheRunNamed) {
  const std::string run = kTrain + " --db " + db_ + " --ranks 2 --backend mpi ";
  auto full = RunCommand("{ " + run + "--epochs 1 > /dev/full; }", dir_);
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_NE(full.err.find("train: stdout: write failed: No space left on device"), std::string::npos) << full.err;

  const std::string metrics = dir_.Sub("m.jsonl");
  // This run's processes (mpiexec, the ranks), not the shell that names them.
  const std::string mpiexec = "'^[^ ]*mpiexec .*" + db_ + "'";
  const std::string processes = "'^([^ ]*mpiexec|" + kTrain + ") .*" + db_ + "'";
  auto stopped = RunCommand("{ " + run + "--epochs 1000 --timeout 5 --log-every 1 --metrics " + metrics +
                                " > /dev/null & L=$!; " + WaitForFirstStep(metrics) + "pkill -STOP -f " + mpiexec +
                                "; start=$(date +%s); wait $L; echo status $?; echo seconds $(( $(date +%s) - start "
                                ")); " + EchoLeftAfterWaiting(processes) +
                                "[ -e /dev/shm/granary-mpi.$L ] && echo shm left; }",
                            dir_);
  EXPECT_NE(stopped.out.find("status 1"), std::string::npos) << stopped.out << stopped.err;
  const size_t at = stopped.out.find("seconds ");
  ASSERT_NE(at, std::string::npos) << stopped.out;
  EXPECT_LE(std::stoi(stopped.out.substr(at + 8)), 5 + 8) << stopped.out;  // --timeout, slack for a loaded machine
  EXPECT_NE(stopped.out.find("left 0"), std::string::npos) << stopped.out;
  EXPECT_EQ(stopped.out.find("shm left"), std::string::npos) << stopped.out;
  EXPECT_NE(stopped.err.find("has been stopped for"), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("train: mpirun (pid "), std::string::npos) << stopped.err;

  for (const std::string signal : {"HUP", "KILL"}) {
    SCOPED_TRACE(signal);
    const std::string m = dir_.Sub("m-" + signal + ".jsonl");
    auto r = RunCommand("{ " + run + "--epochs 1000 --log-every 1 --metrics " + m + " > /dev/null & L=$!; " +
                            WaitForFirstStep(m) + "kill -" + signal + " $L; wait $L; echo status $?; " +
                            EchoLeftAfterWaiting(processes) + "echo launcher $L; }",
                        dir_);
    EXPECT_NE(r.out.find(signal == "HUP" ? "status 129" : "status 137"), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("left 0"), std::string::npos) << r.out;
    const size_t l = r.out.find("launcher ");
    ASSERT_NE(l, std::string::npos);
    const std::string shm = "/dev/shm/granary-mpi." + std::to_string(std::stol(r.out.substr(l + 9)));
    if (signal == "KILL") {  // the next launch sweeps what a killed launcher left
      ASSERT_EQ(RunCommand(run + "--epochs 1", dir_).exit_code, 0);
    }
    EXPECT_FALSE(fs::exists(shm)) << shm;
  }
}

// Under the user's mpirun no launcher of ours watches the ranks: with rank 1
// stopped, rank 0's collective gives up at --timeout naming rank 1 and that
// its process is stopped (the ranks on a machine share a board, heartbeat.h)
// and ending it as rank 0 exits (a stopped rank resumed by mpirun after rank 0 has gone
// would print OpenMPI's "Read -1, expected ..."; without the kill it did in
// about half the runs), and the board's name is gone from /dev/shm (its name
// holds the ranks' parent, this mpirun: other tests' boards may come and go
// meanwhile).
TEST_F(UnderMpirun, ARankStoppedUnderTheUsersMpirunIsNamed) {
  const std::string metrics = dir_.Sub("m.jsonl");
  const std::string ranks = "'^" + kTrain + " .*" + db_ + "'";
  auto r = RunCommand("{ " + Mpirun() + "-np 2 " + kTrain + " --db " + db_ +
                          " --backend mpi --epochs 1000 --timeout 5 --log-every 1 --metrics " + metrics +
                          " > /dev/null & L=$!; " + WaitForFirstStep(metrics) +
                          "for p in $(pgrep -f " + ranks + "); do tr '\\0' '\\n' < /proc/$p/environ | "
                          "grep -q '^OMPI_COMM_WORLD_RANK=1$' && kill -STOP $p && echo stopped $p; done; "
                          "wait $L; echo status $?; " + EchoLeftAfterWaiting(ranks) +
                          "ls /dev/shm | grep \"^granary-peers\\.$L\\.\"; true; }",
                      dir_);
  ASSERT_NE(r.out.find("stopped "), std::string::npos) << r.out << r.err;
  const std::string pid = r.out.substr(r.out.find("stopped ") + 8, r.out.find('\n', r.out.find("stopped ")) -
                                                                       r.out.find("stopped ") - 8);
  EXPECT_EQ(r.out.find("status 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("rank 0: all-reduce: the other ranks did not complete it within --timeout 5 s: rank 1 (pid " +
                       pid + "; its process is stopped) made no progress for"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("; as this rank exits it ends rank 1 with SIGKILL (a stopped process cannot end with the job)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("Read -1"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("left 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("granary-peers"), std::string::npos) << r.out;  // no board's name left behind
}

// MPI is a plugin train opens when MPI is asked for: train itself needs no
// OpenMPI library (none among its dependencies), so it starts and trains
// over Gloo where MPI cannot be loaded (here: a copy of train beside a plugin
// that is no library), and --backend mpi there is one line saying what is
// missing.
TEST_F(UnderMpirun, TrainNeedsNoMpiLibraryUnlessMpiIsAskedFor) {
  auto needed = RunCommand("{ readelf -d " + kTrain + " | grep NEEDED; }", dir_);
  ASSERT_EQ(needed.exit_code, 0) << needed.err;
  EXPECT_NE(needed.out.find("libtorch"), std::string::npos) << needed.out;
  EXPECT_EQ(needed.out.find("libmpi"), std::string::npos) << needed.out;
  const std::string copy = dir_.Sub("bin");
  fs::create_directories(copy);
  fs::copy_file(kTrain, copy + "/train");
  testing::WriteFile(copy + "/libgranary_mpi.so", "not a library");
  const std::string train = copy + "/train --db " + db_ + " --epochs 1 ";
  EXPECT_EQ(RunCommand(train + "--ranks 2 > /dev/null", dir_).exit_code, 0);
  auto mpi = RunCommand(train + "--ranks 2 --backend mpi", dir_);
  EXPECT_EQ(mpi.exit_code, 1) << mpi.err;
  ExpectOneLineError(mpi, "--backend mpi needs OpenMPI's libraries (Debian: libopenmpi3) and train's MPI plugin: " +
                              copy + "/libgranary_mpi.so");
}

}  // namespace
}  // namespace granary
