// Scale-out. Two simulated nodes (tools/netsim: network namespaces joined by
// a bridge, links shaped with tc's tbf): training across them (over Gloo, or
// one MPI job) follows the loopback run's trajectory exactly, and a link that
// drops ends both nodes within --timeout, each naming what it lost; netsim
// leaves no namespace behind (skipped, with one line, where this process may
// not create network namespaces). Compressed
// gradient syncs train to the uncompressed run's accuracy.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

const std::string kNetsim = GRANARY_SOURCE_DIR "/tools/netsim";

class Netsim : public EndToEnd {
 protected:
  void SetUp() override {
    EndToEnd::SetUp();
    auto probe = RunCommand(kNetsim + " --nodes 1 --rate 1gbit -- true", dir_);
    if (probe.exit_code != 0) GTEST_SKIP() << "tools/netsim cannot run here: " << probe.err;
    db_ = dir_.Sub("db");
    ASSERT_EQ(PrepFashion(db_, "--limit 1000 --no-progress", dir_).exit_code, 0);
  }

  // `train` on every simulated node: one rank each, the rendezvous on node 0.
  // `before` prefixes the command (e.g. "env -u GLOO_SOCKET_IFNAME").
  std::string OnEachNode(const std::string& args, const std::string& before = "") const {
    return "'" + before + " " + kTrain + " --db " + db_ + " --ranks 1 --threads 1 " + args +
           " --nnodes $NNODES --node-rank $NODE_RANK --master-addr $MASTER_ADDR --master-port $MASTER_PORT > " +
           dir_.Sub("node$NODE_RANK.out") + " 2> " + dir_.Sub("node$NODE_RANK.err") + "'";
  }

  std::string db_;
};

int Namespaces(const TempDir& dir) { return std::stoi(RunCommand("ip netns list | wc -l", dir).out); }

// How a tools/netsim run that cuts node 1's link (--cut 1@...) ended: its
// exit status and the seconds from the cut to its end; a failure names what
// of that could not be read.
struct AfterTheCut {
  int status = -1;
  int seconds = -1;
};

AfterTheCut RunWithACut(const std::string& netsim_command, const TempDir& dir) {
  auto r = RunCommand(
      "{ start=$(date +%s); " + netsim_command + "; echo status $? seconds $(( $(date +%s) - start )); }", dir);
  AfterTheCut after;
  int seconds = -1, cut_at = -1;
  if (std::sscanf(r.out.c_str(), "status %d seconds %d", &after.status, &seconds) != 2) {
    ADD_FAILURE() << "no status line: " << r.out << r.err;
    return after;
  }
  const size_t down = r.err.find("netsim: node 1's link is down (");
  if (down == std::string::npos ||
      std::sscanf(r.err.c_str() + down, "netsim: node 1's link is down (%d s", &cut_at) != 1) {
    ADD_FAILURE() << "the link was never cut: " << r.err;
    return after;
  }
  after.seconds = seconds - cut_at;
  return after;
}

TEST_F(Netsim, TwoShapedNodesTrainAsTwoNodesOnLoopbackDo) {
  const int before = Namespaces(dir_);
  const std::string recipe = "--epochs 2 --batch-size 64 --optimizer sgd --lr 0.05 --momentum 0.9 --seed 3 --json";
  auto shaped = RunCommand(kNetsim + " --nodes 2 --rate 1gbit -- " + OnEachNode(recipe), dir_);
  ASSERT_EQ(shaped.exit_code, 0) << shaped.err << testing::ReadFile(dir_.Sub("node0.err"));
  EXPECT_EQ(Namespaces(dir_), before);
  const auto simulated = nlohmann::json::parse(testing::ReadFile(dir_.Sub("node0.out")));
  EXPECT_EQ(simulated["ranks"], 2);
  // The same two nodes on loopback.
  const std::string node = kTrain + " --db " + db_ + " --ranks 1 --threads 1 " + recipe +
                           " --nnodes 2 --master-addr 127.0.0.1 --master-port " + std::to_string(FreePort()) +
                           " --node-rank ";
  auto loopback = RunCommand("{ " + node + "1 > /dev/null & " + node + "0 > " + dir_.Sub("loop.out") + "; wait; }",
                             dir_);
  ASSERT_EQ(loopback.exit_code, 0) << loopback.err;
  const auto looped = nlohmann::json::parse(testing::ReadFile(dir_.Sub("loop.out")));
  ASSERT_EQ(simulated["epochs"].size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(simulated["epochs"][e]["weights_hash"], looped["epochs"][e]["weights_hash"]) << "epoch " << e + 1;
    EXPECT_EQ(simulated["epochs"][e]["test_loss"], looped["epochs"][e]["test_loss"]) << "epoch " << e + 1;
  }
}

// Round 3: without --iface, node 1 used to fail ("connect [127.0.0.1]:
// Connection refused"): rank 0 advertised the loopback address its hostname
// resolves to. GLOO_SOCKET_IFNAME (netsim sets it) is honoured as PyTorch
// does, --iface over it; without either, the address that routes to
// --master-addr is used.
TEST_F(Netsim, WithoutIfaceTheNodesFindTheAddressTheyShare) {
  for (const char* before : {"", "env -u GLOO_SOCKET_IFNAME", "env GLOO_SOCKET_IFNAME=nope"}) {
    const std::string iface = std::string(before).find("nope") != std::string::npos ? "--iface eth0" : "";
    auto r = RunCommand(kNetsim + " --nodes 2 --rate 1gbit -- " + OnEachNode("--epochs 1 --json " + iface, before),
                        dir_);
    EXPECT_EQ(r.exit_code, 0) << before << ": " << r.err << testing::ReadFile(dir_.Sub("node1.err"));
    EXPECT_EQ(nlohmann::json::parse(testing::ReadFile(dir_.Sub("node0.out")), nullptr, false)["ranks"], 2) << before;
  }
}

TEST_F(Netsim, ALinkThatDropsEndsBothNodesWithinTheTimeout) {
  const int before = Namespaces(dir_);
  // The link drops 2 s after node 0's first logged step (so during training,
  // however long the start takes on a loaded machine).
  const std::string metrics = dir_.Sub("node0.metrics");
  const AfterTheCut after = RunWithACut(
      kNetsim + " --nodes 2 --rate 1gbit --cut 1@2 --cut-after " + metrics + " -- " +
          OnEachNode("--epochs 1000 --timeout 5 --eval-split \"\" --log-every 1 --metrics " +
                     dir_.Sub("node$NODE_RANK.metrics")),
      dir_);
  ASSERT_GE(after.seconds, 0);
  EXPECT_NE(after.status, 0);
  EXPECT_LE(after.seconds, 5 + 2.5 + 8);  // --timeout, finding who is lost (comm.h), slack for a loaded machine
  // Each node: one line saying what timed out and who is lost: node 0 names
  // rank 1, whose beats in the store stopped; node 1 cannot reach the store.
  const std::pair<const char*, const char*> says[] = {
      {"node0.err", "train: rank 0: lost rank 1 (node 1): no sign of life"},
      {"node1.err", "train: rank 1: cannot reach the rendezvous store on node 0"}};
  for (const auto& [err, who] : says) {
    const std::string text = testing::ReadFile(dir_.Sub(err));
    // Gloo's words for the timeout depend on where the wait was: "Timed out
    // ..." or "Application timeout caused pair closure".
    EXPECT_TRUE(text.find("Timed out") != std::string::npos || text.find("timeout") != std::string::npos)
        << err << ": " << text;
    EXPECT_NE(text.find(who), std::string::npos) << err << ": " << text;
  }
  EXPECT_EQ(Namespaces(dir_), before);
}

// An MPI job across simulated nodes: mpirun in node 0 reaches
// node 1 through netsim --mpi's remote-shell agent, and the ranks talk over
// the shaped link. It trains as the same two ranks over MPI on one machine
// do; a link that drops ends the job, named, leaving nothing behind.
TEST_F(Netsim, AnMpiJobAcrossShapedNodesTrainsAsOnOneMachineAndEndsWhenALinkDrops) {
  if (RunCommand("command -v mpirun", dir_).exit_code != 0) GTEST_SKIP() << "no mpirun: tools/setup installs OpenMPI";
  const int before = Namespaces(dir_);
  const std::string recipe = "--epochs 2 --batch-size 64 --optimizer sgd --lr 0.05 --momentum 0.9 --seed 3";
  const std::string job =
      "'mpirun --allow-run-as-root -np 2 -H $NETSIM_HOSTS " + kTrain + " --db " + db_ + " --backend mpi --threads 1 ";
  auto shaped = RunCommand(kNetsim + " --nodes 2 --rate 1gbit --mpi -- " + job + recipe + " --json > " +
                               dir_.Sub("mpi.out") + " 2> " + dir_.Sub("mpi.err") + "'",
                           dir_);
  ASSERT_EQ(shaped.exit_code, 0) << shaped.err << testing::ReadFile(dir_.Sub("mpi.err"));
  const auto simulated = nlohmann::json::parse(testing::ReadFile(dir_.Sub("mpi.out")));
  EXPECT_EQ(simulated["ranks"], 2);
  EXPECT_EQ(simulated["config"]["dist"]["nnodes"], 2);  // two nodes to OpenMPI: TCP over eth0 between them
  const auto local = TrainJson("--db " + db_ + " --ranks 2 --threads 1 --backend mpi " + recipe, dir_);
  ASSERT_EQ(simulated["epochs"].size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(simulated["epochs"][e]["weights_hash"], local["epochs"][e]["weights_hash"]) << "epoch " << e + 1;
  }

  // Node 1's link drops 2 s after rank 0's first logged step. Rank 0's
  // all-reduce times out (--timeout 5) or mpirun finds its daemon on node 1
  // gone (netsim's keepalive: 10 s idle, 3 probes 2 s apart; or, once
  // mpirun has sent there, its 5 retransmissions, about 13 s), whichever is
  // first; either says so, naming what it lost.
  const std::string metrics = dir_.Sub("mpi.metrics");
  const AfterTheCut after = RunWithACut(
      kNetsim + " --nodes 2 --rate 1gbit --mpi --cut 1@2 --cut-after " + metrics + " -- " + job +
          "--epochs 1000 --timeout 5 --eval-split \"\" --log-every 1 --metrics " + metrics + " > " +
          dir_.Sub("cut.out") + " 2> " + dir_.Sub("cut.err") + "'",
      dir_);
  ASSERT_GE(after.seconds, 0);
  EXPECT_NE(after.status, 0);
  EXPECT_LE(after.seconds, 16 + 10 + 8);  // the keepalive, netsim's --grace, slack for a loaded machine
  const std::string said = testing::ReadFile(dir_.Sub("cut.err"));
  EXPECT_TRUE(said.find("did not complete it within --timeout 5 s") != std::string::npos ||
              said.find("lost communication with a remote daemon") != std::string::npos)
      << said;
  EXPECT_EQ(RunCommand("{ " + EchoLeftAfterWaiting("'" + db_ + " [-]-backend mpi'") + "}", dir_).out, "left 0\n");
  EXPECT_EQ(Namespaces(dir_), before);
}

// Round 3: numbers are base 10 (bash read 08 as octal, train read NNODES=010
// as 10), a rate tc cannot shape is refused, --cut-after waits for its file
// to change, and no helper of netsim's (the stopper's or the cutter's sleep)
// outlives it, whether it ends by itself or by SIGTERM.
TEST_F(Netsim, NumbersAreDecimalRatesAreBoundedAndNothingOutlivesIt) {
  auto eight = RunCommand(kNetsim + " --nodes 08 --rate 1gbit -- 'echo nodes=$NNODES'", dir_);
  EXPECT_EQ(eight.exit_code, 0) << eight.err;
  size_t eights = 0;
  for (size_t at = 0; (at = eight.out.find("nodes=8\n", at)) != std::string::npos; at += 8) ++eights;
  EXPECT_EQ(eights, 8u) << eight.out;
  for (const char* rate : {"8bit", "99999999999gbit", "18446744073709551616bit"}) {
    auto r = RunCommand(kNetsim + " --nodes 2 --rate " + std::string(rate) + " -- true", dir_);
    EXPECT_EQ(r.exit_code, 2) << rate;
    EXPECT_NE(r.err.find("--rate"), std::string::npos) << r.err;
  }
  // An option given last without its value is refused at once (it looped on a failed `shift 2`).
  for (const char* args : {"--nodes", "--mpi --rate", "--nodes 2 --cut"}) {
    auto r = RunCommand("timeout 10 " + kNetsim + " " + args, dir_);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("needs a value"), std::string::npos) << r.err;
  }

  // The cut file exists from the start: node 1 changes it only once it has
  // seen its link up, then waits (up to 60 s) for the cut.
  const std::string mark = dir_.Sub("mark");
  testing::WriteFile(mark, "old\n");
  auto cut = RunCommand(kNetsim + " --nodes 2 --rate 1gbit --cut 01@0.2 --cut-after " + mark +
                            " -- 'if [ $NODE_RANK = 1 ]; then sleep 2; ip -br link show eth0 | grep -q UP && echo up;"
                            " echo new >> " + mark + "; for i in $(seq 600); do"
                            " ip -br link show eth0 | grep -q DOWN && echo down && break; sleep 0.1; done; fi'",
                        dir_);
  EXPECT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_EQ(cut.out, "up\ndown\n") << cut.err;
  EXPECT_NE(cut.err.find("node 1's link is down"), std::string::npos) << cut.err;

  // A node fails: the stopper waits --grace 47 s. Once by SIGTERM, once by the other node ending.
  const std::string failing = " --nodes 2 --rate 1gbit --grace 47 -- 'if [ $NODE_RANK = 0 ]; then exit 3; else ";
  auto stopped = RunCommand("{ " + kNetsim + failing + "sleep 99; fi' 2> " + dir_.Sub("ns.err") + " & ns=$!;" +
                                " until grep -q 'a node exited' " + dir_.Sub("ns.err") + "; do sleep 0.1; done;" +
                                " kill -TERM $ns; wait $ns; echo status $?; }",
                            dir_);
  EXPECT_EQ(stopped.out, "status 143\n") << stopped.err;
  auto ended = RunCommand(kNetsim + failing + "sleep 1; fi'", dir_);
  EXPECT_EQ(ended.exit_code, 3) << ended.err;
  EXPECT_EQ(ended.err.find("Killed"), std::string::npos) << ended.err;
  EXPECT_EQ(RunCommand("pgrep -f '^sleep (47|99)$' | wc -l", dir_).out, "0\n");
}

TEST_F(EndToEnd, CompressedSyncsTrainToTheUncompressedAccuracyAndBadFlagsAreRefused) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string train = kTrain + " --db " + db + " ";
  const std::string recipe = "--db " + db + " --epochs 2 --ranks 2 --optimizer sgd --lr 0.05 --momentum 0.9 ";
  std::map<std::string, double> accuracy;
  for (const char* method : {"none", "fp16", "bf16", "powersgd"}) {
    const std::string warmup = std::string(method) == "powersgd" ? " --powersgd-warmup 4" : "";
    auto j = TrainJson(recipe + "--sync-compress " + method + warmup, dir_);
    ASSERT_EQ(j["epochs"].size(), 2u) << method;
    accuracy[method] = j["epochs"][1]["test_accuracy"].get<double>();
    EXPECT_EQ(j["config"]["sync"]["compress"], method);
  }
  EXPECT_GT(accuracy["none"], 0.65);  // chance is 0.1
  for (const char* method : {"fp16", "bf16", "powersgd"}) {
    EXPECT_NEAR(accuracy[method], accuracy["none"], 0.03) << method;  // 2,000 test samples
  }
  // Over MPI (its fp16/bf16 sums are MPI user ops) too.
  if (RunCommand("command -v mpirun", dir_).exit_code == 0) {
    for (const std::string method : {"fp16", "bf16", "powersgd"}) {
      const std::string warmup = method == "powersgd" ? " --powersgd-warmup 4" : "";
      auto j = TrainJson(recipe + "--backend mpi --sync-compress " + method + warmup, dir_);
      ASSERT_EQ(j["epochs"].size(), 2u) << method;
      EXPECT_NEAR(j["epochs"][1]["test_accuracy"].get<double>(), accuracy["none"], 0.03) << method << " over MPI";
    }
  }
  ExpectOneLineError(RunCommand(train + "--sync-compress int8", dir_),
                     "--sync-compress int8: expected none, fp16, bf16 or powersgd");
  ExpectOneLineError(RunCommand(train + "--sync after-backward --sync-compress fp16", dir_),
                     "--sync-compress fp16 needs --sync bucketed");
  ExpectOneLineError(RunCommand(train + "--sync-compress powersgd --powersgd-rank 0", dir_),
                     "--powersgd-rank 0: must be in 1..256");
}

}  // namespace
}  // namespace granary
