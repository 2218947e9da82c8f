// End to end, the launcher and its ranks: on one machine, across machines, torchrun, hangs and deaths.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// The launcher never leaves a rank behind, however it ends.
TEST_F(EndToEnd, StoppingOrKillingTheLauncherLeavesNoRankBehind) {
  const std::string db = dir_.Sub("sig.db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  // A regex that matches the ranks' command lines (the launcher's plus
  // "--layout ... --rank R ...") but not the shell's own ("[-]": the shell's
  // line holds the pattern itself, which does not read "--layout").
  const std::string ranks = "'" + dir_.Sub("sig[.]db --ranks 2 --epochs 1000 .*--json [-]-layout") + "'";
  for (const char* sig : {"TERM", "KILL"}) {
    const std::string metrics = dir_.Sub(std::string("sig-") + sig + ".jsonl");
    auto r = RunCommand("{ " + kTrain + " --db " + db + " --ranks 2 --epochs 1000 --log-every 1 --metrics " + metrics +
                            " --json & L=$!; " + WaitForFirstStep(metrics) + "echo running $(pgrep -c -f " + ranks +
                            "); kill -" + sig + " $L; wait $L; echo status $?; " + EchoLeftAfterWaiting(ranks) + "}",
                        dir_);
    EXPECT_NE(r.out.find("running 2"), std::string::npos) << sig << ": " << r.out;
    EXPECT_NE(r.out.find(std::string("status ") + (sig[0] == 'T' ? "143" : "137")), std::string::npos)
        << sig << ": " << r.out;
    EXPECT_NE(r.out.find("left 0"), std::string::npos) << sig << ": " << r.out << r.err;
  }
}

// A 1,000-sample db, the train flags of two epochs on it (`args`), and what
// one launcher's `--ranks 2` made of them (`one`): the reference a job of two
// ranks started any other way must match.
struct TwoRankReference {
  std::string db, args;
  nlohmann::json one;
};
TwoRankReference MakeTwoRankReference(const TempDir& dir) {
  TwoRankReference ref{dir.Sub("db"), "", {}};
  EXPECT_EQ(PrepFashion(ref.db, "--limit 1000 --no-progress", dir).exit_code, 0);
  ref.args = "--db " + ref.db + " --epochs 2 --threads 1 --pin off --json";
  ref.one = TrainJson(ref.args + " --ranks 2", dir);
  EXPECT_EQ(ref.one["epochs"].size(), 2u);
  return ref;
}

// Many machines, here two launchers on 127.0.0.1 (one rank each,
// --nnodes 2), train exactly as one launcher running both ranks; so do two
// processes started with torchrun's environment (RANK, WORLD_SIZE, ...).
TEST_F(EndToEnd, TwoNodesAndTorchrunsEnvironmentTrainAsOneLauncher) {
  const auto [db, args, one] = MakeTwoRankReference(dir_);
  ASSERT_EQ(one["epochs"].size(), 2u);

  const std::string node = kTrain + " " + args + " --ranks 1 --nnodes 2 --master-addr 127.0.0.1 --master-port " +
                           std::to_string(FreePort()) + " --node-rank ";
  auto two = RunCommand("(" + node + "1 > " + dir_.Sub("node1.json") + " & " + node + "0; wait)", dir_);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto j = nlohmann::json::parse(two.out);
  EXPECT_EQ(j["ranks"], 2);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(j["epochs"][e]["train_loss"], one["epochs"][e]["train_loss"]) << e;
    EXPECT_EQ(j["epochs"][e]["weights_hash"], one["epochs"][e]["weights_hash"]) << e;
  }

  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(FreePort());
  auto torchrun = RunCommand("(" + env + " RANK=1 LOCAL_RANK=1 " + kTrain + " " + args + " > /dev/null & " + env +
                                 " RANK=0 LOCAL_RANK=0 " + kTrain + " " + args + "; wait)",
                             dir_);
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.err;
  auto t = nlohmann::json::parse(torchrun.out);
  EXPECT_EQ(t["epochs"][1]["weights_hash"], one["epochs"][1]["weights_hash"]);

  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --nnodes 2", dir_), "--nnodes 2 needs --master-port");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --nnodes 2 --node-rank 2 --master-port 1", dir_),
                     "--node-rank 2");
}

// srun's tasks as Slurm's own default starts them (MpiDefault=none: no PMI,
// so no MPI job): one job whose ranks meet over Gloo, as `--ranks 2` trains;
// --backend mpi there is refused saying what srun needs; torchrun started in
// such a task is the job; a step of one task (srun --pty bash) is no job.
TEST_F(EndToEnd, SrunsTasksWithoutPmiTrainAsOneJob) {
  const auto [db, args, one] = MakeTwoRankReference(dir_);
  ASSERT_EQ(one["epochs"].size(), 2u);
  auto task = [](int rank, int tasks) {  // what srun -n TASKS sets in task RANK (some of it)
    return "SLURM_JOB_ID=" + std::to_string(4242 + tasks) + " SLURM_STEP_ID=0 SLURM_PROCID=" + std::to_string(rank) +
           " SLURM_LOCALID=" + std::to_string(rank) + " SLURM_NTASKS=" + std::to_string(tasks) +
           " SLURM_STEP_NUM_TASKS=" + std::to_string(tasks) + " SLURM_NNODES=1 SLURM_NODEID=0 ";
  };
  const std::string task1 = dir_.Sub("task1.out");
  auto srun = RunCommand("(" + task(1, 2) + kTrain + " " + args + " > " + task1 + " 2>&1 & " + task(0, 2) + kTrain +
                             " " + args + "; wait)",
                         dir_);
  ASSERT_EQ(srun.exit_code, 0) << srun.err;
  auto s = nlohmann::json::parse(srun.out);
  EXPECT_EQ(s["ranks"], 2);
  EXPECT_EQ(s["epochs"][1]["weights_hash"], one["epochs"][1]["weights_hash"]);
  EXPECT_EQ(testing::ReadFile(task1), "");  // rank 1 of the job, not a job of its own that reports

  ExpectOneLineError(RunCommand(task(0, 2) + kTrain + " " + args + " --backend mpi", dir_),
                     "--backend mpi under srun without PMI (a job of 2 tasks): MPI cannot make one job of its "
                     "tasks; start them with srun --mpi=pmix");
  auto two_nodes = task(0, 2) + "SLURM_NNODES=2 SLURM_LOCALID=0 ";
  ExpectOneLineError(RunCommand(two_nodes + kTrain + " " + args, dir_),
                     "--master-addr is needed under srun without PMI (a job of 2 tasks) across 2 nodes");
  // srun names the step's nodes: task 0's, the first, serves the rendezvous (here this machine's name for itself).
  auto node = [&](int rank) {
    return task(rank, 2) + "SLURM_NNODES=2 SLURM_LOCALID=0 SLURM_NODEID=" + std::to_string(rank) +
           " SLURM_STEP_NODELIST=localhost,node2 ";
  };
  const std::string node1 = dir_.Sub("node1.out");
  auto nodes = RunCommand("(" + node(1) + kTrain + " " + args + " > " + node1 + " 2>&1 & " + node(0) + kTrain + " " +
                              args + "; wait)",
                          dir_);
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err << testing::ReadFile(node1);
  auto n = nlohmann::json::parse(nodes.out);
  EXPECT_EQ(n["config"]["dist"]["host"], "localhost");
  EXPECT_EQ(n["config"]["dist"]["nnodes"], 2);
  EXPECT_EQ(n["epochs"][1]["weights_hash"], one["epochs"][1]["weights_hash"]);
  const std::string torchrun = "WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 "
                               "MASTER_PORT=" + std::to_string(FreePort()) + " ";
  auto inside = TrainJson(args, dir_, task(1, 2) + torchrun);
  EXPECT_EQ(inside["ranks"], 1);
  auto shell = TrainJson(args + " --ranks 2", dir_, task(0, 1));
  EXPECT_EQ(shell["epochs"][1]["weights_hash"], one["epochs"][1]["weights_hash"]);

  // launch in srun's tasks: each task one rank, torchrun's variables from srun's.
  const std::string show = kLaunch + " -- /bin/sh -c 'echo rank $RANK of $WORLD_SIZE local $LOCAL_RANK'";
  auto ranks = RunCommand("(" + task(1, 2) + show + " & " + task(0, 2) + show + "; wait)", dir_);
  ASSERT_EQ(ranks.exit_code, 0) << ranks.err;
  for (const std::string line : {"rank 0 of 2 local 0\n", "rank 1 of 2 local 1\n"}) {
    size_t seen = 0;  // once: one rank per task, not every task a job of its own ranks
    for (size_t at = 0; (at = ranks.out.find(line, at)) != std::string::npos; ++at) ++seen;
    EXPECT_EQ(seen, 1u) << ranks.out;
  }
  // Across nodes: the rendezvous at the step's first node, or at MASTER_ADDR:MASTER_PORT as a batch script exports them.
  const std::string where = kLaunch + " -- /bin/sh -c 'echo $RANK at $MASTER_ADDR:$MASTER_PORT'";
  auto first_node = RunCommand(node(0) + where, dir_);
  ASSERT_EQ(first_node.exit_code, 0) << first_node.err;
  ASSERT_EQ(first_node.out.rfind("0 at localhost:", 0), 0u) << first_node.out;
  const std::string port = first_node.out.substr(15, first_node.out.size() - 16);  // the job id's, as every task derives it
  EXPECT_NE(first_node.err.find("rendezvous at localhost:" + port + " (the first node of SLURM_STEP_NODELIST)"),
            std::string::npos)
      << first_node.err;
  auto exported = RunCommand(node(1) + "MASTER_ADDR=10.9.8.7 MASTER_PORT=29511 " + where, dir_);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(exported.out, "[rank 1] 1 at 10.9.8.7:29511\n");
  ExpectOneLineError(RunCommand(node(0) + "MASTER_PORT=29x " + where, dir_), "MASTER_PORT=29x: not a port (1..65535)");
}

// Two launchers of one run that disagree on its recipe (the gradient
// compression, the learning rate) both end at the rendezvous, before any
// step, naming the member and its value on either node.
TEST_F(EndToEnd, NodesThatDisagreeOnTheRecipeAreToldSoBeforeTraining) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 256 --no-progress", dir_).exit_code, 0);
  struct Disagreement {
    std::string node0, node1, line;
  };
  for (const Disagreement& d :
       {Disagreement{"--sync-compress fp16", "--sync-compress bf16",
                     "sync.compress is \"bf16\" on rank 1 (node 1) and \"fp16\" on rank 0 (node 0)"},
        Disagreement{"--lr 0.01", "--lr 0.02", "optim.lr is 0.02 on rank 1 (node 1) and 0.01 on rank 0 (node 0)"}}) {
    SCOPED_TRACE(d.line);
    const std::string node = kTrain + " --db " + db + " --epochs 1 --threads 1 --pin off --timeout 30 --ranks 1 " +
                             "--nnodes 2 --master-addr 127.0.0.1 --master-port " + std::to_string(FreePort()) +
                             " --metrics " + dir_.Sub("m.jsonl") + " --node-rank ";
    auto r = RunCommand("{ " + node + "1 " + d.node1 + " > /dev/null 2> " + dir_.Sub("node1.err") + " & L1=$!; " +
                            node + "0 " + d.node0 + " > /dev/null 2> " + dir_.Sub("node0.err") +
                            "; echo node0 $?; wait $L1; echo node1 $?; }",
                        dir_);
    EXPECT_EQ(r.out, "node0 1\nnode1 1\n") << r.err;
    for (const char* err : {"node0.err", "node1.err"}) {
      const std::string text = testing::ReadFile(dir_.Sub(err));
      EXPECT_NE(text.find("the nodes disagree on the run: " + d.line), std::string::npos) << err << ": " << text;
    }
    EXPECT_EQ(testing::ReadFile(dir_.Sub("m.jsonl")).find("\"step\""), std::string::npos);  // no step was taken
  }
}

// On one machine the ranks meet through a FileStore on a memfd, so
// no rendezvous port is opened at all; every TCP socket the ranks hold (Gloo's
// connections) is on the loopback address. (LibTorch 1.13's TCPStore listened
// on every interface.)
TEST_F(EndToEnd, OnOneMachineTheRanksHoldOnlyLoopbackSockets) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string start = "{ " + kTrain + " --db " + db + " --ranks 2 --epochs 1000 & echo $! > " + dir_.Sub("pid");
  ASSERT_EQ(RunCommand(start + "; }", dir_).exit_code, 0);
  const int pid = std::stoi(testing::ReadFile(dir_.Sub("pid")));
  // TCP sockets by inode: local address (hex, as /proc/net/tcp{,6} shows it).
  auto tcp_sockets = [] {
    std::map<std::string, std::string> local;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::istringstream lines(testing::ReadFile(table));
      std::string line;
      std::getline(lines, line);  // the header
      while (std::getline(lines, line)) {
        std::istringstream f(line);
        std::string slot, address, remote, state, queues, timer, retransmits, uid, timeout, inode;
        f >> slot >> address >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
        local[inode] = address.substr(0, address.find(':'));
      }
    }
    return local;
  };
  std::vector<std::string> addresses;  // of the ranks' TCP sockets
  for (int tries = 0; tries < 600 && addresses.size() < 2; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    addresses.clear();
    const auto local = tcp_sockets();
    std::istringstream ranks(testing::ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                                               "/children"));
    for (std::string rank; ranks >> rank;) {
      std::error_code ec;
      for (const auto& fd : fs::directory_iterator("/proc/" + rank + "/fd", ec)) {
        const std::string target = fs::read_symlink(fd.path(), ec).string();
        if (target.rfind("socket:[", 0) != 0) continue;
        const auto it = local.find(target.substr(8, target.size() - 9));
        if (it != local.end()) addresses.push_back(it->second);
      }
    }
  }
  ::kill(pid, SIGTERM);
  for (int tries = 0; tries < 200 && ::kill(pid, 0) == 0; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(addresses.size(), 2u) << "the ranks never connected";
  const std::set<std::string> loopback = {"0100007F", "00000000000000000000000001000000",
                                          "0000000000000000FFFF00000100007F"};
  for (const std::string& a : addresses) EXPECT_EQ(loopback.count(a), 1u) << "a rank's socket on " << a;
}

// A rank that hangs (SIGSTOP) ends the run within --timeout, with
// a line naming it, non-zero, and no process left; a rendezvous port already
// in use is one clear error at once.
TEST_F(EndToEnd, AHungRankEndsTheRunWithinTheTimeoutAndABusyPortIsNamed) {
  const std::string db = dir_.Sub("hang.db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string ranks = "'" + dir_.Sub("hang[.]db --ranks 2 --epochs 1000 --timeout 5 .*[-]-layout") + "' ";
  const std::string metrics = dir_.Sub("hang.jsonl");
  auto r = RunCommand("{ " + kTrain + " --db " + db + " --ranks 2 --epochs 1000 --timeout 5 --log-every 1 --metrics " +
                          metrics + " > /dev/null & L=$!; " + WaitForFirstStep(metrics) + "pkill -STOP -f " + ranks +
                          "-n; start=$(date +%s); wait $L; echo status $?; echo seconds $(( $(date +%s) - start )); " +
                          EchoLeftAfterWaiting(ranks) + "}",
                      dir_);
  EXPECT_NE(r.out.find("status 1"), std::string::npos) << r.out << r.err;
  const size_t at = r.out.find("seconds ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_LE(std::stoi(r.out.substr(at + 8)), 5 + 8) << r.out;  // --timeout, slack for a loaded machine
  EXPECT_NE(r.out.find("left 0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("train: rank 1 made no progress for "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its process is stopped"), std::string::npos) << r.err;

  const int port = FreePort();
  auto busy = RunCommand("python3 -c 'import socket,subprocess,sys; s=socket.socket(); "
                         "s.bind((\"127.0.0.1\", " + std::to_string(port) + ")); s.listen(); "
                         "sys.exit(subprocess.call(sys.argv[1:]))' " +
                             kTrain + " --db " + db + " --ranks 2 --master-port " + std::to_string(port),
                         dir_);
  EXPECT_NE(busy.exit_code, 0);
  EXPECT_NE(busy.err.find("Address already in use"), std::string::npos) << busy.err;
}

// Across machines (two launchers on 127.0.0.1): a rank on node 1
// that hangs or is killed ends both launchers within --timeout (and a little),
// node 1's naming it, and rank 0 naming it too (it stopped beating in the
// store); a master that never answers is one line within --timeout.
TEST_F(EndToEnd, ARankThatHangsOrDiesOnAnotherNodeEndsBothLaunchers) {
  const std::string db = dir_.Sub("nodes.db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  for (const std::string signal : {"STOP", "KILL"}) {
    const std::string metrics = dir_.Sub("nodes-" + signal + ".jsonl");  // rank 0's: its first step is the cue
    const std::string node = kTrain + " --db " + db + " --epochs 1000 --threads 1 --timeout 5 --ranks 1 --nnodes 2 " +
                             "--log-every 1 --metrics " + metrics + " --master-addr 127.0.0.1 --master-port " +
                             std::to_string(FreePort()) + " --node-rank ";
    const std::string rank1 = "'" + dir_.Sub("nodes[.]db .*[-]-node-rank 1 [-]-layout") + "'";
    auto r =
        RunCommand("{ " + node + "1 > /dev/null 2> " + dir_.Sub("node1.err") + " & L1=$!; " + node +
                       "0 > /dev/null 2> " + dir_.Sub("node0.err") + " & L0=$!; " + WaitForFirstStep(metrics) +
                       "pkill -" + signal + " -f " + rank1 + "; start=$(date +%s); wait $L0; echo node0 $? " +
                       "$(( $(date +%s) - start )); wait $L1; echo node1 $? $(( $(date +%s) - start )); " +
                       EchoLeftAfterWaiting("'" + dir_.Sub("nodes[.]db .*[-]-layout") + "'") + "}",
                   dir_);
    int status0 = -1, seconds0 = 99, status1 = -1, seconds1 = 99, left = -1;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "node0 %d %d\nnode1 %d %d\nleft %d", &status0, &seconds0, &status1, &seconds1,
                          &left),
              5)
        << r.out << r.err;
    EXPECT_NE(status0, 0) << signal;
    EXPECT_NE(status1, 0) << signal;
    EXPECT_LE(seconds0, 5 + 8) << signal;  // --timeout, slack for a loaded machine
    EXPECT_LE(seconds1, 5 + 8) << signal;
    EXPECT_EQ(left, 0) << signal;
    const std::string err1 = testing::ReadFile(dir_.Sub("node1.err"));
    EXPECT_NE(err1.find(signal == "STOP" ? "rank 1 on node 1 made no progress for"
                                         : "rank 1 on node 1 was killed by signal 9"),
              std::string::npos)
        << err1;
    const std::string err0 = testing::ReadFile(dir_.Sub("node0.err"));
    EXPECT_NE(err0.find("train: rank 0: lost rank 1 (node 1): no sign of life"), std::string::npos) << err0;
  }

  const int port = FreePort();
  auto lonely = RunCommand("{ start=$(date +%s); " + kTrain + " --db " + db + " --ranks 1 --nnodes 2 --node-rank 1 " +
                               "--master-addr 127.0.0.1 --master-port " + std::to_string(port) +
                               " --timeout 3; echo status $? seconds $(( $(date +%s) - start )); }",
                           dir_);
  EXPECT_NE(lonely.out.find("status 1 "), std::string::npos) << lonely.out;
  // --timeout, and slack for a loaded machine: the time includes the process's own start.
  EXPECT_LE(std::stoi(lonely.out.substr(lonely.out.find("seconds ") + 8)), 3 + 8) << lonely.out;
  ExpectOneLineError(testing::CommandResult{1, "", lonely.err},
                     "node 0's rendezvous at 127.0.0.1:" + std::to_string(port) +
                         " did not answer within --timeout 3 s");
}

// --backend mpi on one machine: train starts its ranks through mpirun
// itself. Two ranks train exactly as over Gloo (the same losses and
// weights, the sync after backward or bucketed, compressed to fp16); a rank
// killed or stopped after its first step ends the run within --timeout,
// named, with no process left behind.
TEST_F(EndToEnd, OverMpiTwoRanksTrainAsOverGlooAndALostRankIsNamed) {
  if (RunCommand("command -v mpirun", dir_).exit_code != 0) GTEST_SKIP() << "no mpirun (tools/setup installs OpenMPI)";
  const std::string db = dir_.Sub("mpi.db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string base = "--db " + db + " --seed 3 --dropout 0 --batch-size 32 --ranks 2 ";
  const std::string args = base + "--epochs 1 ";
  for (const char* sync : {"--sync after-backward", "--sync bucketed --bucket-mb 1", "--sync-compress fp16"}) {
    SCOPED_TRACE(sync);
    auto gloo = TrainJson(args + sync + " --backend gloo", dir_);
    auto mpi = TrainJson(args + sync + " --backend mpi", dir_);
    ASSERT_EQ(mpi["epochs"].size(), 1u);
    EXPECT_EQ(mpi["config"]["dist"]["backend"], "mpi");
    EXPECT_EQ(mpi["epochs"][0]["train_loss"], gloo["epochs"][0]["train_loss"]);
    EXPECT_EQ(mpi["epochs"][0]["weights_hash"], gloo["epochs"][0]["weights_hash"]);
  }

  // Checkpoints do not depend on the backend: a run saved under one resumes
  // under the other exactly (the weights of a run never interrupted).
  const auto whole = TrainJson(base + "--epochs 2 --backend gloo", dir_);
  ASSERT_EQ(whole["epochs"].size(), 2u);
  for (const auto& [first, then] : {std::pair<const char*, const char*>{"gloo", "mpi"}, {"mpi", "gloo"}}) {
    SCOPED_TRACE(std::string(first) + " then " + then);
    const std::string ck = " --checkpoint-dir " + dir_.Sub(std::string("ck-") + first);
    TrainJson(args + "--backend " + first + ck, dir_);
    const auto resumed = TrainJson(base + "--epochs 2 --resume --backend " + then + ck, dir_);
    ASSERT_FALSE(resumed["epochs"].empty());
    EXPECT_EQ(resumed["epochs"].back()["weights_hash"], whole["epochs"][1]["weights_hash"]);
    EXPECT_EQ(resumed["config"]["dist"]["backend"], then);
  }

  const std::string rank1 = "'^" + kTrain + " .*mpi[.]db .*[-]-rank 1$'";
  for (const std::string signal : {"STOP", "KILL"}) {
    SCOPED_TRACE(signal);
    const std::string metrics = dir_.Sub("m-" + signal + ".jsonl");
    auto r = RunCommand("{ " + kTrain + " --db " + db + " --ranks 2 --backend mpi --epochs 1000 --timeout 5 " +
                            "--log-every 1 --metrics " + metrics + " > /dev/null & L=$!; " + WaitForFirstStep(metrics) +
                            "pkill -" + signal + " -f " + rank1 + "; start=$(date +%s); wait $L; echo status $?; " +
                            "echo seconds $(( $(date +%s) - start )); " +
                            EchoLeftAfterWaiting("'mpi[.]db .*[-]-layout'") + "}",
                        dir_);
    EXPECT_EQ(r.out.find("status 0"), std::string::npos) << r.out << r.err;
    const size_t at = r.out.find("seconds ");
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_LE(std::stoi(r.out.substr(at + 8)), 5 + 8) << r.out;  // --timeout, slack for a loaded machine
    EXPECT_NE(r.out.find("left 0"), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.err.find(signal == "STOP" ? "train: rank 1 made no progress for " : "train: rank 1 was killed"),
              std::string::npos)
        << r.err;
  }
}

// A rank the kernel's out-of-memory killer ends (a batch too large for a
// container's memory limit, docker run -m, a Slurm job's --mem) was said as
// `rank 1 was killed by signal 9 (Killed)`, the cause left to dmesg, which a
// container may not read. Now the kernel's count of such kills says it; a
// rank killed by SIGKILL otherwise is said as before. The loader's bound on
// prefetched batches was half the machine's memory, whatever the limit.
TEST_F(EndToEnd, ARankTheOutOfMemoryKillerEndsIsSaidToBeEndedSo) {
  const std::string cgroup = "granary-test-oom-" + std::to_string(::getpid());
  const std::string procs = MakeCgroup("memory", cgroup, {{"memory.limit_in_bytes", std::to_string(256 << 20)}},
                                       {{"memory.max", std::to_string(256 << 20)}, {"memory.swap.max", "0"}});
  if (procs.empty()) GTEST_SKIP() << "this process may not make a memory cgroup";
  // Rank 1 fills 1 GiB (or kills itself), rank 0 waits to be stopped.
  auto launch = [&](const std::string& rank1) {
    const std::string script = "import os, time\nif os.environ[\"RANK\"] == \"1\":\n    " + rank1 +
                               "\ntime.sleep(120)\n";
    testing::WriteFile(dir_.Sub("rank.py"), script);
    return RunCommand("sh -c 'echo $$ > " + procs + " && exec " + kLaunch + " --ranks 2 -- /usr/bin/python3 " +
                      dir_.Sub("rank.py") + "'", dir_);
  };
  const auto oom = launch("x = b\"x\" * (1 << 30)");
  const auto killed = launch("os.kill(os.getpid(), 9)");
  // The loader's prefetch is bounded by the cgroup's limit, not the machine's memory.
  ASSERT_EQ(PrepFashion(dir_.Sub("db"), "--limit 256 --no-progress", dir_).exit_code, 0);
  const auto prefetch = RunCommand("sh -c 'echo $$ > " + procs + " && exec " + kLoader + " bench " + dir_.Sub("db") +
                                       " --prefetch 64 --batch 4096'", dir_);
  fs::remove(fs::path(procs).parent_path());  // empty: every rank has ended
  EXPECT_NE(oom.exit_code, 0);
  EXPECT_NE(oom.err.find("launch: rank 1 was killed by signal 9 (Killed): the kernel's out-of-memory killer ended it, "
                         "the run's processes having outgrown the 256 MiB their memory cgroup allows"),
            std::string::npos)
      << oom.err;
  ExpectOneLineError(prefetch, "prefetch 64 x batch 4096: 0.8 GiB of batches, more than half of the 0.2 GiB its "
                               "memory cgroup allows");
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_NE(killed.err.find("launch: rank 1 was killed by signal 9 (Killed); stopping the other ranks"),
            std::string::npos)
      << killed.err;
}

// A run stopped whole longer than --timeout, then continued (Ctrl-Z then fg
// at a terminal, Slurm's scontrol suspend and resume, SIGSTOP and SIGCONT to
// its process group): the launcher, stopped with its ranks, counted the stop
// as their silence and ended the run, `rank 1 made no progress for 12 s`. A
// turn of its loop long after the last now means it was stopped itself, and
// silence counts from then. A train rank that was waiting in a collective
// when stopped finds Gloo's wait past --timeout: that is said as what it is.
TEST_F(EndToEnd, ARunStoppedWholeAndContinuedIsNotTakenForHung) {
  testing::WriteFile(dir_.Sub("wait.py"), R"(
import os, time, torch
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1).step()  # a step taken: judged by its progress
open(os.environ["READY"] + os.environ["RANK"], "w").close()
while not os.path.exists(os.environ["READY"] + "go"):
    time.sleep(0.1)
print("rank", os.environ["RANK"], "went on", flush=True)
)");
  const std::string ready = dir_.Sub("ready.");
  // Stopped for 8 s past --timeout 5, then let go on and told to finish.
  auto launched = RunCommand("(READY=" + ready + " setsid " + kLaunch + " --ranks 2 --timeout 5 -- /usr/bin/python3 " +
                                 dir_.Sub("wait.py") + " & pid=$!; for i in $(seq 600); do [ -e " + ready + "0 ] && " +
                                 "[ -e " + ready + "1 ] && break; sleep 0.1; done; kill -STOP -$pid; sleep 8; " +
                                 "kill -CONT -$pid; touch " + ready + "go; wait $pid; echo status $?)",
                             dir_);
  EXPECT_NE(launched.out.find("status 0"), std::string::npos) << launched.out << launched.err;
  EXPECT_NE(launched.out.find("rank 1 went on"), std::string::npos) << launched.out;
  EXPECT_EQ(launched.err.find("made no progress"), std::string::npos) << launched.err;

  const std::string db = dir_.Sub("db"), metrics = dir_.Sub("m.jsonl");
  ASSERT_EQ(PrepFashion(db, "--limit 1000 --no-progress", dir_).exit_code, 0);
  auto trained = RunCommand("(setsid " + kTrain + " --db " + db + " --epochs 1 --ranks 2 --timeout 5 --metrics " +
                                metrics + " --log-every 1 & pid=$!; " + WaitForFirstStep(metrics) +
                                "kill -STOP -$pid; sleep 8; kill -CONT -$pid; wait $pid; echo status $?)",
                            dir_);
  EXPECT_EQ(trained.err.find("made no progress"), std::string::npos) << trained.err;
  // Ranks stopped between collectives go on; one stopped inside one cannot, and says why.
  if (trained.out.find("status 0") == std::string::npos) {
    EXPECT_NE(trained.err.find(": this process was stopped (Ctrl-Z, SIGSTOP, a suspended job) and "),
              std::string::npos)
        << trained.err;
  }
}

}  // namespace
}  // namespace granary
