#include "trainer/config/config.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/features/features.h"

namespace granary {
namespace {

TrainConfig Good() {
  TrainConfig c;
  c.data.db = "some.db";
  c.ResolveDefaults();
  return c;
}

TEST(TrainConfig, DefaultsAreValidOnTwoCores) { EXPECT_TRUE(Good().Validate(2).ok()); }

// Each bad value is refused before any work, in one message naming its flag.
TEST(TrainConfig, EveryOutOfRangeFieldIsNamedByItsFlag) {
  const std::vector<std::pair<std::string, std::function<void(TrainConfig&)>>> cases = {
      {"--db", [](TrainConfig& c) { c.data.db = ""; }},
      {"--train-split", [](TrainConfig& c) { c.data.train_split = ""; }},
      {"--loader-threads 0", [](TrainConfig& c) { c.data.loader_threads = 0; }},
      {"--loader-threads 100000", [](TrainConfig& c) { c.data.loader_threads = 100000; }},
      {"--prefetch 1000000000", [](TrainConfig& c) { c.data.prefetch = 1000000000; }},
      {"--prefetch 0", [](TrainConfig& c) { c.data.prefetch = 0; }},
      {"--shuffle", [](TrainConfig& c) { c.data.shuffle = "sideways"; }},
      {"--augment", [](TrainConfig& c) { c.data.augment = "flip,spin"; }},
      {"--std 0", [](TrainConfig& c) { c.data.stddev = 0; }},
      {"--model tiny", [](TrainConfig& c) { c.model.name = "tiny"; }},
      {"--dropout 1", [](TrainConfig& c) { c.model.dropout = 1; }},
      {"--width 0", [](TrainConfig& c) { c.model.width = 0; }},
      {"--width 100", [](TrainConfig& c) { c.model.width = 100; }},
      {"--schedule linear", [](TrainConfig& c) { c.optim.schedule = "linear"; }},
      {"--warmup-epochs 6", [](TrainConfig& c) { c.optim.warmup_epochs = 6; }},  // of 5 epochs
      {"--warmup-epochs -", [](TrainConfig& c) { c.optim.warmup_epochs = -1; }},
      {"--base-batch 0", [](TrainConfig& c) { c.optim.base_batch = 0; }},
      {"--label-smoothing 1", [](TrainConfig& c) { c.optim.label_smoothing = 1; }},
      {"--stop-at-accuracy 1.5", [](TrainConfig& c) { c.optim.stop_at_accuracy = 1.5; }},
      {"--stop-at-accuracy 0.9 needs an evaluation",
       [](TrainConfig& c) { c.optim.stop_at_accuracy = 0.9, c.data.synthetic = true; }},
      {"--optimizer lbfgs", [](TrainConfig& c) { c.optim.optimizer = "lbfgs"; }},
      {"--momentum 1", [](TrainConfig& c) { c.optim.optimizer = "sgd", c.optim.momentum = 1; }},
      {"--momentum is for --optimizer sgd", [](TrainConfig& c) { c.optim.momentum = 0.9; }},  // adam
      {"--nesterov needs", [](TrainConfig& c) { c.optim.optimizer = "sgd", c.optim.nesterov = true; }},
      {"--weight-decay", [](TrainConfig& c) { c.optim.weight_decay = -0.5; }},
      {"--lr -", [](TrainConfig& c) { c.optim.lr = -0.1; }},
      {"--epochs 0", [](TrainConfig& c) { c.optim.epochs = 0; }},
      {"--batch-size -1", [](TrainConfig& c) { c.optim.batch_size = -1; }},
      {"--batch-size 65", [](TrainConfig& c) { c.optim.batch_size = 65; }},  // not a multiple of 2 ranks
      {"--accum 0", [](TrainConfig& c) { c.optim.accum = 0; }},
      {"--accum 3", [](TrainConfig& c) { c.optim.accum = 3; }},  // 64 is no multiple of 2 ranks x 3
      {"--bucket-mb 0", [](TrainConfig& c) { c.sync.bucket_mb = 0; }},
      {"--ranks 1000", [](TrainConfig& c) { c.dist.ranks = 1000; }},
      {"--ranks 0", [](TrainConfig& c) { c.dist.ranks = 0; }},
      {"--threads 100000", [](TrainConfig& c) { c.dist.threads = 100000; }},
      {"--oversubscribe", [](TrainConfig& c) { c.dist.threads = 2; }},  // 2 ranks x 2 threads on 2 cores
      {"--master-port 70000", [](TrainConfig& c) { c.dist.port = 70000; }},
      // Round 3: a flag set for a feature that is off.
      {"--powersgd-rank 8: only used with --sync-compress powersgd", [](TrainConfig& c) { c.sync.powersgd_rank = 8; }},
      {"--powersgd-warmup 3: only used", [](TrainConfig& c) { c.sync.powersgd_warmup = 3; }},
      {"--bucket-mb 4: only used with --sync bucketed",
       [](TrainConfig& c) { c.sync.method = SyncMethod::kAfterBackward, c.sync.bucket_mb = 4; }},
      {"--calibration-batches 8: only used with --quantize int8",
       [](TrainConfig& c) { c.shrink.calibration_batches = 8; }},
      {"--base-batch 64: only used with --lr-scaling linear", [](TrainConfig& c) { c.optim.base_batch = 64; }},
      {"--keep 5: only used with --checkpoint-dir", [](TrainConfig& c) { c.checkpoint.keep = 5; }},
      {"--quantize int8 calibrates on training batches: not with --synthetic",
       [](TrainConfig& c) { c.shrink.quantize = Quantize::kInt8, c.data.synthetic = true; }},
  };
  for (const auto& [flag, spoil] : cases) {
    TrainConfig c = Good();
    spoil(c);
    Status s = ValidateRun(c, 2);  // the config's flags and the features' own
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(flag), std::string::npos) << flag << ": " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
}

// --eval-only is one process that reads the data flags, the model, --threads
// and --timeout: a training layout (2 ranks x 2 threads, a batch for 2
// ranks) is not its business; --threads above the cores is.
TEST(TrainConfig, AnEvaluationChecksOnlyWhatItUses) {
  TrainConfig c = Good();
  c.model.name = "m.pt";
  c.dist.threads = 2;
  c.optim.batch_size = 63;
  EXPECT_FALSE(c.Validate(2).ok());
  EXPECT_TRUE(c.ValidateEvaluation(2).ok());
  c.dist.threads = 3;
  EXPECT_NE(c.ValidateEvaluation(2).message().find("--threads 3: must be in 0..2"), std::string::npos);
  c.dist.threads = 0;
  c.data.stddev = 0;
  EXPECT_NE(c.ValidateEvaluation(2).message().find("--std 0"), std::string::npos);
}

// What a run does not use goes back to its default, so a resume compares
// only what runs (a checkpoint may predate the refusal above).
TEST(TrainConfig, ClearUnusedLeavesOnlyWhatRuns) {
  TrainConfig c = Good();
  c.sync.powersgd_rank = 8;
  c.shrink.calibration_batches = 8;
  c.checkpoint.keep = 9;
  c.ClearUnused();
  EXPECT_EQ(c, Good());
  TrainConfig used = Good();
  used.sync.compress = Compression::kPowerSgd;
  used.sync.powersgd_rank = 8;
  TrainConfig cleared = used;
  cleared.ClearUnused();
  EXPECT_EQ(cleared, used);
}

TEST(TrainConfig, EachOptimizerGetsItsOwnDefaultsUnlessGiven) {
  TrainConfig c;
  c.optim.optimizer = "sgd";
  c.ResolveDefaults();
  EXPECT_EQ(c.optim.lr, 0.01);
  EXPECT_EQ(c.optim.weight_decay, 0.0);
  c = TrainConfig{};
  c.optim.optimizer = "adamw";
  c.ResolveDefaults();
  EXPECT_EQ(c.optim.lr, 1e-3);
  EXPECT_EQ(c.optim.weight_decay, 1e-2);
  c = TrainConfig{};
  c.optim.lr = 0.5;
  c.ResolveDefaults();
  EXPECT_EQ(c.optim.lr, 0.5);  // given: kept
}

TEST(TrainConfig, OversubscriptionIsAllowedWhenAskedForUpToAHardCap) {
  TrainConfig c = Good();
  c.dist.ranks = 4;  // on 2 cores
  EXPECT_FALSE(c.Validate(2).ok());
  c.dist.oversubscribe = true;
  EXPECT_TRUE(c.Validate(2).ok());
  c.dist.ranks = 16;
  c.dist.threads = 2;  // 32 threads: beyond 8 x 2 cores even when asked
  EXPECT_EQ(c.Validate(2).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c.ThreadsPerRank(2), 2);
  c.dist.threads = 0;
  EXPECT_EQ(c.ThreadsPerRank(2), 1);
  c.dist.ranks = 1;
  EXPECT_EQ(c.ThreadsPerRank(8), 8);
}

// A pinned rank's loader workers share its CPUs: --loader-threads is bounded
// by the rank's share, which the launcher and the rank count alike (before,
// 1 x 1 with 6 loader threads on 2 cores passed here and failed in the rank).
TEST(TrainConfig, LoaderThreadsAreBoundedByTheCpusOfOneRank) {
  TrainConfig c = Good();
  c.dist.ranks = 1;
  c.dist.threads = 1;
  c.data.loader_threads = 6;
  EXPECT_TRUE(c.PinsRanks(2));
  EXPECT_EQ(c.CpusPerRank(2), 1);
  const Status pinned = c.Validate(2);
  ASSERT_FALSE(pinned.ok());
  EXPECT_NE(pinned.message().find("--loader-threads 6"), std::string::npos) << pinned.message();
  EXPECT_NE(pinned.message().find("1 CPU a rank may use"), std::string::npos) << pinned.message();
  c.data.loader_threads = 4;
  EXPECT_TRUE(c.Validate(2).ok());
  c.data.loader_threads = 6;
  c.dist.pin = false;  // not pinned: the rank may use every CPU
  EXPECT_EQ(c.CpusPerRank(2), 2);
  EXPECT_TRUE(c.Validate(2).ok());
}

TEST(TrainConfig, JsonRoundTripsEveryFieldAndDifferencesNameThem) {
  TrainConfig c = Good();
  c.data.train_split = "val";
  c.data.eval_split = "";
  c.data.loader_threads = 3;
  c.data.prefetch = 7;
  c.data.shuffle = "block";
  c.data.drop_last = true;
  c.data.skip_corrupt = true;
  c.data.augment = "flip,crop";
  c.data.mean = 0.25f;
  c.data.stddev = 0.5f;
  c.data.synthetic = true;
  c.model.dropout = 0.1;
  c.model.precision = ComputeType::kBf16;
  c.model.channels_last = true;
  c.optim.lr = 0.01;
  c.optim.epochs = 9;
  c.optim.batch_size = 128;
  c.optim.seed = 42;
  c.optim.accum = 2;
  c.optim.optimizer = "sgd";
  c.optim.momentum = 0.9;
  c.optim.nesterov = true;
  c.optim.weight_decay = 1e-4;
  c.sync.method = SyncMethod::kAfterBackward;
  c.sync.bucket_mb = 4;
  c.dist.ranks = 4;
  c.dist.threads = 2;
  c.dist.host = "10.0.0.1";
  c.dist.port = 29500;
  c.dist.oversubscribe = true;
  c.dist.pin = false;

  auto back = TrainConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back.value(), c);
  EXPECT_EQ(back->ToJson(), c.ToJson());
  // Every field above differs from the default, and each difference is named.
  const std::vector<std::string> diff = TrainConfig{}.Differences(c);
  EXPECT_EQ(diff.size(), 32u) << ::testing::PrintToString(diff);
  EXPECT_NE(std::find(diff.begin(), diff.end(), "optim.seed: 0 -> 42"), diff.end());
  EXPECT_NE(TrainConfig{}, c);
}

TEST(TrainConfig, FromJsonRefusesUnknownMembersAndWrongTypes) {
  EXPECT_EQ(TrainConfig::FromJson(R"({"optim": {"lr": 0.1, "dampening": 0.9}})").status().message(),
            "train config: unknown member optim.dampening");
  EXPECT_EQ(TrainConfig::FromJson(R"({"optim": {"epochs": "many"}})").status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_FALSE(TrainConfig::FromJson("[1, 2]").ok());
  // Numbers that do not fit their member are refused, not cast (a float out
  // of an int's range is undefined behaviour): found by fuzzing the manifest.
  for (const char* bad : {R"({"optim": {"epochs": 1e300}})", R"({"optim": {"epochs": 5.5}})",
                          R"({"dist": {"ranks": 4294967296}})", R"({"optim": {"seed": -1}})",
                          R"({"data": {"mean": 1e300}})", R"({"checkpoint": {"every": -1e20}})"}) {
    auto c = TrainConfig::FromJson(bad);
    EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(c.status().message().find("out of its member's range"), std::string::npos) << c.status().message();
  }
  auto big_seed = TrainConfig::FromJson(R"({"optim": {"seed": 18446744073709551615, "lr": 1}})");
  ASSERT_TRUE(big_seed.ok()) << big_seed.status().ToString();
  EXPECT_EQ(big_seed->optim.seed, 18446744073709551615u);
  auto partial = TrainConfig::FromJson(R"({"optim": {"lr": 0.5}})");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->optim.lr, 0.5);
  EXPECT_EQ(partial->optim.epochs, TrainConfig{}.optim.epochs);
}

// The closed choices are parsed once from their flags' text, each unknown
// value refused naming its flag and the choices; in JSON they are their
// names, and a name that is none of them is refused (not taken for the
// first, as nlohmann's own enum mapping would).
TEST(TrainConfig, ChoicesAreParsedOnceFromTheirNames) {
  TrainConfig c;
  ChoiceFlags flags(c);
  EXPECT_EQ(flags.precision, "fp32");
  EXPECT_EQ(flags.sync, "bucketed");
  EXPECT_EQ(flags.backend, "auto");
  flags.precision = "bf16", flags.lr_scaling = "linear", flags.sync = "after-backward", flags.backend = "mpi";
  flags.quantize = "int8";
  ASSERT_TRUE(flags.ParseInto(&c).ok());
  EXPECT_EQ(c.model.precision, ComputeType::kBf16);
  EXPECT_EQ(c.optim.lr_scaling, LrScaling::kLinear);
  EXPECT_EQ(c.sync.method, SyncMethod::kAfterBackward);
  EXPECT_EQ(c.dist.backend, Backend::kMpi);
  EXPECT_EQ(c.shrink.quantize, Quantize::kInt8);
  const std::pair<std::string ChoiceFlags::*, std::string> bad[] = {
      {&ChoiceFlags::precision, "--precision fp16: expected fp32 or bf16"},
      {&ChoiceFlags::lr_scaling, "--lr-scaling fp16: expected none or linear"},
      {&ChoiceFlags::sync, "--sync fp16: expected bucketed or after-backward"},
      {&ChoiceFlags::sync_compress, "--sync-compress fp16x: expected none, fp16, bf16 or powersgd"},
      {&ChoiceFlags::backend, "--backend fp16: expected auto, gloo or mpi"},
      {&ChoiceFlags::quantize, "--quantize fp16: expected none or int8"}};
  for (const auto& [member, message] : bad) {
    ChoiceFlags spoilt{TrainConfig{}};
    spoilt.*member = member == &ChoiceFlags::sync_compress ? "fp16x" : "fp16";
    TrainConfig d;
    const Status s = spoilt.ParseInto(&d);
    EXPECT_EQ(s.message(), message);
  }
  const std::string json = c.ToJson();
  EXPECT_NE(json.find("\"precision\":\"bf16\""), std::string::npos) << json;
  EXPECT_EQ(TrainConfig::FromJson(json).value(), c);
  auto lying = TrainConfig::FromJson(R"({"model": {"precision": "fp64"}})");
  ASSERT_FALSE(lying.ok());
  EXPECT_NE(lying.status().message().find("'fp64' is not one of fp32 or bf16"), std::string::npos)
      << lying.status().message();
}

// A checkpoint written before "compress" (quantize, prune) became "shrink"
// still resumes; gradient compression was always sync.compress.
TEST(TrainConfig, FromJsonReadsTheOldNameOfShrink) {
  auto old = TrainConfig::FromJson(R"({"compress": {"prune": 0.25, "prune_epochs": "1-2"}})");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->shrink.prune, 0.25);
  EXPECT_EQ(old->shrink.prune_epochs, "1-2");
  EXPECT_NE(TrainConfig{}.ToJson().find("\"shrink\""), std::string::npos);
  EXPECT_EQ(TrainConfig{}.ToJson().find("\"compress\": {"), std::string::npos);
}

}  // namespace
}  // namespace granary
