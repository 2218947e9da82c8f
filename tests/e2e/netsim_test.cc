// Scale-out. Two simulated nodes (tools/netsim: network namespaces joined by
// a bridge, links shaped with tc's tbf): training across them follows the
// loopback run's trajectory exactly, and a link that drops ends both nodes
// within --timeout, each naming what it lost; netsim leaves no namespace behind (skipped, with one
// line, where this process may not create network namespaces). Compressed
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
  std::string OnEachNode(const std::string& args) const {
    return "'" + kTrain + " --db " + db_ + " --ranks 1 --threads 1 " + args +
           " --nnodes $NNODES --node-rank $NODE_RANK --master-addr $MASTER_ADDR --master-port $MASTER_PORT" +
           " --iface $GLOO_SOCKET_IFNAME > " + dir_.Sub("node$NODE_RANK.out") + " 2> " +
           dir_.Sub("node$NODE_RANK.err") + "'";
  }

  std::string db_;
};

int Namespaces(const TempDir& dir) { return std::stoi(RunCommand("ip netns list | wc -l", dir).out); }

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

TEST_F(Netsim, ALinkThatDropsEndsBothNodesWithinTheTimeout) {
  const int before = Namespaces(dir_);
  // The link drops 2 s after node 0's first logged step (so during training,
  // however long the start takes on a loaded machine).
  const std::string metrics = dir_.Sub("node0.metrics");
  auto r = RunCommand("{ start=$(date +%s); " + kNetsim + " --nodes 2 --rate 1gbit --cut 1@2 --cut-after " + metrics +
                          " -- " +
                          OnEachNode("--epochs 1000 --timeout 5 --eval-split \"\" --log-every 1 --metrics " +
                                     dir_.Sub("node$NODE_RANK.metrics")) +
                          "; echo status $? seconds $(( $(date +%s) - start )); }",
                      dir_);
  int status = -1, seconds = 99, cut_at = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "status %d seconds %d", &status, &seconds), 2) << r.out << r.err;
  EXPECT_NE(status, 0);
  const size_t down = r.err.find("netsim: node 1's link is down (");
  ASSERT_NE(down, std::string::npos) << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + down, "netsim: node 1's link is down (%d s", &cut_at), 1) << r.err;
  EXPECT_LE(seconds - cut_at, 5 + 2.5 + 4);  // --timeout, finding who is lost (comm.h), slack
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

TEST_F(EndToEnd, CompressedSyncsTrainToTheUncompressedAccuracyAndBadFlagsAreRefused) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string train = kTrain + " --db " + db + " ";
  const std::string recipe = "--db " + db + " --epochs 2 --ranks 2 --optimizer sgd --lr 0.05 --momentum 0.9 ";
  std::map<std::string, double> accuracy;
  for (const char* method : {"none", "fp16", "bf16", "powersgd"}) {
    auto j = TrainJson(recipe + "--sync-compress " + method + " --powersgd-warmup 4", dir_);
    ASSERT_EQ(j["epochs"].size(), 2u) << method;
    accuracy[method] = j["epochs"][1]["test_accuracy"].get<double>();
    EXPECT_EQ(j["config"]["sync"]["compress"], method);
  }
  EXPECT_GT(accuracy["none"], 0.65);  // chance is 0.1
  for (const char* method : {"fp16", "bf16", "powersgd"}) {
    EXPECT_NEAR(accuracy[method], accuracy["none"], 0.03) << method;  // 2,000 test samples
  }
  ExpectOneLineError(RunCommand(train + "--sync-compress int8", dir_),
                     "--sync-compress int8: expected none, fp16, bf16, powersgd");
  ExpectOneLineError(RunCommand(train + "--sync after-backward --sync-compress fp16", dir_),
                     "--sync-compress fp16 needs --sync bucketed");
  ExpectOneLineError(RunCommand(train + "--sync-compress powersgd --powersgd-rank 0", dir_),
                     "--powersgd-rank 0: must be in 1..256");
}

}  // namespace
}  // namespace granary
