#include "trainer/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/file.h"
#include "tests/test_util.h"
#include "trainer/models/registry.h"
#include "trainer/optim/optimizer.h"

namespace granary {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct TrainedNet {
  std::shared_ptr<Classifier> net;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

TrainedNet MakeRun(uint64_t seed) {
  torch::manual_seed(seed);
  TrainedNet r;
  r.net = CreateModel({"resnet", {1, 8, 8}, 3, 0}).value();  // parameters and BatchNorm buffers
  TrainConfig t;
  t.optim.optimizer = "sgd";
  t.optim.momentum = 0.9;
  t.ResolveDefaults();
  r.optimizer = CreateOptimizer(t.optim, r.net->parameters()).value();
  return r;
}

// A step, so the optimizer has momentum state and BatchNorm running statistics move.
void Step(TrainedNet& r) {
  r.optimizer->zero_grad();
  torch::nll_loss(torch::log_softmax(r.net->forward(torch::rand({4, 1, 8, 8})), 1), torch::arange(4) % 3).backward();
  r.optimizer->step();
}

CheckpointHeader Header(int64_t step) {
  CheckpointHeader h;
  h.config.data.db = "some.db";
  h.db_content_hash = "xxh64:0123456789abcdef";
  h.at.global_step = step;
  h.at.epoch = 1;
  h.at.position = 96;
  h.at.world = 2;
  h.at.loss_sums = {1.5, 2.25};
  h.at.sample_counts = {48, 48};
  return h;
}

// Loads `c` into `into` as a rank resumes: one CheckpointArchive, the model's
// values, then the optimizer's.
Status Restore(const Checkpoint& c, TrainedNet& into) {
  StatusOr<CheckpointArchive> archive = CheckpointArchive::Parse(c);
  if (!archive.ok()) return archive.status();
  GRANARY_RETURN_IF_ERROR(archive->RestoreModel(*into.net));
  return archive->RestoreOptimizer(*into.optimizer);
}

void ExpectSameState(TrainedNet& a, TrainedNet& b) {
  auto pa = a.net->named_parameters(), pb = b.net->named_parameters();
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  auto ba = a.net->named_buffers(), bb = b.net->named_buffers();
  for (const auto& x : ba) EXPECT_TRUE(torch::equal(x.value(), bb[x.key()])) << x.key();
}

TEST(Checkpoint, RoundTripRestoresWeightsBuffersOptimizerAndPosition) {
  TempDir dir;
  TrainedNet a = MakeRun(1);
  Step(a);
  ASSERT_TRUE(WriteCheckpoint(dir.Sub("ck"), Header(7), *a.net, *a.optimizer, 3).ok());
  auto latest = LatestCheckpoint(dir.Sub("ck"));
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(fs::path(latest.value()).filename(), "step-0000000007.ckpt");
  auto c = ReadCheckpoint(latest.value());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->header.at.global_step, 7);
  EXPECT_EQ(c->header.at.position, 96u);
  EXPECT_EQ(c->header.at.loss_sums, (std::vector<double>{1.5, 2.25}));
  EXPECT_EQ(c->header.db_content_hash, "xxh64:0123456789abcdef");
  EXPECT_EQ(c->header.config, Header(7).config);

  TrainedNet b = MakeRun(2);  // other weights
  const Status restored = Restore(c.value(), b);
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  ExpectSameState(a, b);
  // The optimizer's momentum came back too: the next identical step matches.
  torch::manual_seed(5);
  Step(a);
  torch::manual_seed(5);
  Step(b);
  ExpectSameState(a, b);
}

TEST(Checkpoint, KeepsTheNewestAndDeletesOnlyItsOwnFiles) {
  TempDir dir;
  TrainedNet a = MakeRun(1);
  const std::string ck = dir.Sub("ck");
  fs::create_directories(ck);
  ASSERT_TRUE(WriteFileSynced(ck + "/step-0000000000.ckpt", "not ours: no magic").ok());
  ASSERT_TRUE(WriteFileSynced(ck + "/notes.txt", "the user's").ok());
  // Writes killed before their renames (as earlier versions and this one name
  // them), and what is only named so: a directory, a link to the user's file.
  ASSERT_TRUE(WriteFileSynced(ck + "/step-0000000002.ckpt.tmp", "a write killed before its rename").ok());
  ASSERT_TRUE(WriteFileSynced(ck + "/step-0000000002.ckpt.tmp-Ab12Cd", "another").ok());
  fs::create_directory(ck + "/step-0000000003.ckpt.tmp");
  testing::WriteFile(dir.Sub("users-file"), "the user's");
  fs::create_symlink(dir.Sub("users-file"), ck + "/step-0000000004.ckpt.tmp-zzzzzz");
  for (int64_t step : {1, 2, 3, 4}) ASSERT_TRUE(WriteCheckpoint(ck, Header(step), *a.net, *a.optimizer, 2).ok());
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(ck)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"step-0000000000.ckpt", "notes.txt", "step-0000000003.ckpt",
                                          "step-0000000004.ckpt", "step-0000000003.ckpt.tmp",
                                          "step-0000000004.ckpt.tmp-zzzzzz"}));
  EXPECT_EQ(testing::ReadFile(dir.Sub("users-file")), "the user's");
  EXPECT_EQ(fs::path(LatestCheckpoint(ck).value()).filename(), "step-0000000004.ckpt");
  EXPECT_EQ(LatestCheckpoint(dir.Sub("empty")).status().code(), Status::Code::kNotFound);
}

// The background writer: each Write snapshots the state when called (a
// step after it does not reach the file), writes one after another, and
// reports a failed write at the next Write or Wait.
TEST(CheckpointWriter, WritesTheStateAtTheCallInOrderAndReportsFailures) {
  TempDir dir;
  TrainedNet a = MakeRun(1);
  const std::string ck = dir.Sub("ck");
  std::vector<std::vector<torch::Tensor>> written;
  {
    CheckpointWriter writer;
    for (int64_t step : {1, 2, 3}) {
      Step(a);
      std::vector<torch::Tensor> state;
      for (const auto& p : a.net->parameters()) state.push_back(p.detach().clone());
      written.push_back(state);
      ASSERT_TRUE(writer.Write(ck, Header(step), *a.net, *a.optimizer, 2).ok());
    }
    Step(a);  // while the last write may still run: not in it
    ASSERT_TRUE(writer.Wait().ok());
  }
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(ck)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"step-0000000002.ckpt", "step-0000000003.ckpt"}));
  for (int64_t step : {2, 3}) {
    auto c = ReadCheckpoint(ck + "/step-000000000" + std::to_string(step) + ".ckpt");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    TrainedNet b = MakeRun(2);
    const Status restored = Restore(c.value(), b);
    ASSERT_TRUE(restored.ok()) << restored.ToString();
    const auto params = b.net->parameters();
    for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], written[step - 1][i])) << i;
  }

  ASSERT_TRUE(WriteFileSynced(dir.Sub("a-file"), "not a directory").ok());
  CheckpointWriter failing;
  ASSERT_TRUE(failing.Write(dir.Sub("a-file"), Header(1), *a.net, *a.optimizer, 2).ok());  // fails in the background
  Status later = failing.Write(dir.Sub("a-file"), Header(2), *a.net, *a.optimizer, 2);
  EXPECT_EQ(later.code(), Status::Code::kIOError) << later.ToString();
  EXPECT_NE(later.message().find("a-file"), std::string::npos) << later.message();
  EXPECT_TRUE(failing.Wait().ok());  // the failure was reported once, and nothing more was written
}

TEST(Checkpoint, DamagedFilesAreRefusedSayingWhy) {
  TempDir dir;
  TrainedNet a = MakeRun(1);
  ASSERT_TRUE(WriteCheckpoint(dir.Sub("ck"), Header(9), *a.net, *a.optimizer, 3).ok());
  const std::string path = dir.Sub("ck/step-0000000009.ckpt");
  std::string good;
  ASSERT_TRUE(ReadFile(path, &good).ok());
  struct Damage {
    std::string name, bytes, needle;
  };
  std::string flipped = good;
  flipped[flipped.size() - 100] ^= 0x20;
  std::string header_flip = good;
  header_flip[14] ^= 0x01;
  // The header's JSON with one value replaced, its length field updated.
  auto with_header_value = [&](const std::string& from, const std::string& to) {
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>(good[8 + i])) << (8 * i);
    std::string header = good.substr(12, length);
    EXPECT_NE(header.find(from), std::string::npos) << header;
    header.replace(header.find(from), from.size(), to);
    std::string out = good.substr(0, 8);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(header.size() >> (8 * i)));
    return out + header + good.substr(12 + length);
  };
  const Damage cases[] = {
      {"a float world", with_header_value("\"world\":2", "\"world\":2e300"), "\"world\" is out of range"},
      {"a negative epoch", with_header_value("\"epoch\":", "\"epoch\":-"), "\"epoch\" is out of range"},
      {"payload byte", flipped, "payload hash mismatch"},
      {"an edited step", with_header_value("\"global_step\":9", "\"global_step\":96"), "header hash mismatch"},
      {"truncated", good.substr(0, good.size() - 10), "(truncated?)"},
      {"header byte", header_flip, "not a usable checkpoint"},
      {"no magic", "PK" + good.substr(2), "no checkpoint magic"},
      {"short", "GRNY", "no checkpoint magic"},
      {"header length", good.substr(0, 8) + std::string("\xff\xff\xff\x7f", 4) + good.substr(12), "runs past"},
  };
  for (const Damage& d : cases) {
    ASSERT_TRUE(WriteFileSynced(dir.Sub("bad.ckpt"), d.bytes).ok());
    auto c = ReadCheckpoint(dir.Sub("bad.ckpt"));
    EXPECT_FALSE(c.ok()) << d.name;
    EXPECT_NE(c.status().message().find(d.needle), std::string::npos) << d.name << ": " << c.status().message();
    EXPECT_NE(c.status().message().find(dir.Sub("bad.ckpt")), std::string::npos) << d.name;
  }
}

// A file that is not a checkpoint's kind is refused at once: a FIFO would
// block a read for ever, /dev/zero never end (it was read until memory ran out).
TEST(Checkpoint, AFifoOrADeviceIsRefusedWithoutReadingIt) {
  TempDir dir;
  const std::string fifo = dir.Sub("fifo.ckpt");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    auto c = ReadCheckpoint(path);
    ASSERT_FALSE(c.ok()) << path;
    EXPECT_NE(c.status().message().find(path + ": is a"), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("not a regular file"), std::string::npos) << c.status().message();
  }
}

// Two runs never share a directory: a second new run is refused naming the
// first; the first's --resume is not; a run in progress holds the lock.
TEST(CheckpointDir, BelongsToOneRunAndOnlyItsResumeMayContinueThere) {
  TempDir dir;
  TrainedNet a = MakeRun(1);
  const std::string ck = dir.Sub("ck");
  std::string run_a;
  {
    DirectoryLock lock;
    auto claimed = ClaimCheckpointDir(ck, nullptr, &lock);
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    run_a = claimed.value();
    EXPECT_EQ(run_a.size(), 16u);
    EXPECT_EQ(CheckpointDirRun(ck).value(), run_a);

    DirectoryLock other;  // a second run while the first runs
    auto busy = ClaimCheckpointDir(ck, nullptr, &other);
    ASSERT_FALSE(busy.ok());
    EXPECT_NE(busy.status().message().find("--checkpoint-dir " + ck + ": in use by run " + run_a + " (started "),
              std::string::npos)
        << busy.status().message();

    CheckpointHeader h = Header(4);
    h.run = run_a;
    ASSERT_TRUE(WriteCheckpoint(ck, h, *a.net, *a.optimizer, 3).ok());
  }
  DirectoryLock lock;  // the first run has ended: a new run is still refused, naming it
  auto second = ClaimCheckpointDir(ck, nullptr, &lock);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message().find("--checkpoint-dir " + ck + ": holds the checkpoints of run " + run_a),
            0u)
      << second.status().message();
  EXPECT_NE(second.status().message().find("--resume latest"), std::string::npos);

  auto resumed = ReadCheckpoint(LatestCheckpoint(ck).value());
  ASSERT_TRUE(resumed.ok());
  auto again = ClaimCheckpointDir(ck, &resumed.value(), &lock);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again.value(), run_a);

  // A file there that is not a usable checkpoint is not silently shared either.
  DirectoryLock fresh;
  const std::string ck2 = dir.Sub("ck2");
  fs::create_directories(ck2);
  ASSERT_TRUE(WriteFileSynced(ck2 + "/step-0000000001.ckpt", "damaged").ok());
  auto damaged = ClaimCheckpointDir(ck2, nullptr, &fresh);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("holds step-0000000001.ckpt, which is not a usable checkpoint"),
            std::string::npos)
      << damaged.status().message();
}

// --keep deletes only the run's own checkpoints, and a checkpoint of
// another run is never replaced by one of the same step.
TEST(CheckpointDir, KeepAndSameStepNamesNeverTouchAnotherRunsFiles) {
  TempDir dir;
  TrainedNet a = MakeRun(1);
  const std::string ck = dir.Sub("ck");
  CheckpointHeader other = Header(2);
  other.run = "0000000000000bbb";
  ASSERT_TRUE(WriteCheckpoint(ck, other, *a.net, *a.optimizer, 5).ok());
  for (int64_t step : {3, 4, 5}) {
    CheckpointHeader h = Header(step);
    h.run = "0000000000000aaa";
    ASSERT_TRUE(WriteCheckpoint(ck, h, *a.net, *a.optimizer, 1).ok());
  }
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(ck)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"step-0000000002.ckpt", "step-0000000005.ckpt"}));
  CheckpointHeader same_step = Header(2);
  same_step.run = "0000000000000aaa";
  Status replaced = WriteCheckpoint(ck, same_step, *a.net, *a.optimizer, 1);
  EXPECT_EQ(replaced.code(), Status::Code::kFailedPrecondition) << replaced.ToString();
  EXPECT_NE(replaced.message().find("step-0000000002.ckpt: a checkpoint of another run is there"), std::string::npos)
      << replaced.message();
  EXPECT_EQ(ReadCheckpoint(ck + "/step-0000000002.ckpt").value().header.run, "0000000000000bbb");
  EXPECT_FALSE(fs::exists(ck + "/step-0000000002.ckpt.tmp"));
}

TEST(Checkpoint, OnlyTheLayoutEpochsAndOutputsMayChangeOnResume) {
  TrainConfig saved;
  saved.data.db = "a.db";
  TrainConfig layout = saved;
  layout.dist.ranks = 4;
  layout.dist.threads = 1;
  layout.optim.epochs = 20;
  layout.data.db = "/elsewhere/a.db";
  layout.output.metrics = "run.jsonl";
  layout.checkpoint.resume = "latest";
  EXPECT_TRUE(CheckResumable(saved, layout).ok());
  TrainConfig lr = saved;
  lr.optim.lr = 0.5;
  auto s = CheckResumable(saved, lr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("differs in optim.lr"), std::string::npos) << s.message();
  TrainConfig model = saved;
  model.model.name = "resnet";
  EXPECT_NE(CheckResumable(saved, model).message().find("model.name"), std::string::npos);
  // A value the saved run did not use (--powersgd-rank without powersgd) is no difference.
  TrainConfig unused = saved;
  unused.sync.powersgd_rank = 8;
  EXPECT_TRUE(CheckResumable(unused, saved).ok()) << CheckResumable(unused, saved).message();
}

}  // namespace
}  // namespace granary
