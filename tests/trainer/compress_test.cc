// Gradient compression on two ranks: fp16 and bf16 give the mean to their
// rounding, powersgd sends a low-rank matrix exactly and, through error
// feedback, what it misses in one step arrives in later ones; the vectors of
// a bucket go uncompressed.
#include "trainer/comm/compress.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <mutex>

#include "tests/test_util.h"
#include "tests/trainer/two_ranks.h"

namespace granary {
namespace {

// Rank r's bucket: a 16 x 12 matrix and a vector of 5, end to end.
const std::vector<std::vector<int64_t>> kShapes = {{16, 12}, {5}};

torch::Tensor Bucket(int rank, int step, bool low_rank) {
  // A generator of its own: the two ranks are threads of this process.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(100 * step + rank);
  torch::Tensor m = low_rank ? torch::outer(torch::randn({16}, gen), torch::randn({12}, gen))
                             : torch::randn({16, 12}, gen);
  return torch::cat({m.flatten(), torch::randn({5}, gen)});
}

// The bucket's mean over the two ranks, at `step`.
torch::Tensor Mean(int step, bool low_rank) { return (Bucket(0, step, low_rank) + Bucket(1, step, low_rank)) / 2; }

// Runs `steps` steps of `method` on two ranks; rank 0's results. With
// `restart_at` > 0, the compression is made anew before that step and, if
// `carry`, given the old one's state, as a resumed run's is.
std::vector<torch::Tensor> RunSteps(const GradientCompressionOptions& options, int steps, bool low_rank,
                                    int restart_at = 0, bool carry = true) {
  std::vector<torch::Tensor> out;
  std::mutex mutex;
  OnTwoRanks([&](Comm& comm) -> Status {
    StatusOr<std::unique_ptr<BucketCompression>> c = CreateBucketCompression(options, comm);
    if (!c.ok()) return c.status();
    for (int step = 0; step < steps; ++step) {
      if (step == restart_at && step > 0) {
        const CompressionState state = c.value()->SaveState();
        c = CreateBucketCompression(options, comm);
        if (!c.ok()) return c.status();
        if (carry) GRANARY_RETURN_IF_ERROR(c.value()->LoadState(state));
      }
      torch::Tensor flat = Bucket(comm.rank(), step, low_rank);
      StatusOr<std::unique_ptr<PendingCollective>> reduce = c.value()->Start(0, flat, kShapes);
      if (!reduce.ok()) return reduce.status();
      GRANARY_RETURN_IF_ERROR(reduce.value()->Wait());
      if (comm.rank() == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        out.push_back(flat);
      }
    }
    return Status::OK();
  });
  return out;
}

double RelativeError(const torch::Tensor& got, const torch::Tensor& want) {
  return ((got - want).norm() / want.norm()).item<double>();
}

TEST(Compression, NoneIsExactAndFp16AndBf16SumToTheirRounding) {
  GradientCompressionOptions o;
  const torch::Tensor want = Mean(0, false);
  for (const auto& [method, bound] : {std::pair{Compression::kNone, 1e-7}, std::pair{Compression::kFp16, 2e-3},
                                      std::pair{Compression::kBf16, 1e-2}}) {
    o.method = method;
    std::vector<torch::Tensor> got = RunSteps(o, 1, false);
    ASSERT_EQ(got.size(), 1u) << NameOf(method);
    EXPECT_LT(RelativeError(got[0], want), bound) << NameOf(method);
    if (method != Compression::kNone) {
      EXPECT_GT(RelativeError(got[0], want), 0) << NameOf(method) << " rounds";
    }
  }
}

TEST(Compression, PowerSgdSendsALowRankMatrixAndTheVectorsExactly) {
  GradientCompressionOptions o;
  o.method = Compression::kPowerSgd;
  o.matrix_rank = 2;
  o.warmup_steps = 0;
  // The mean of two rank-1 matrices has rank 2: rank-2 factors carry it (to float rounding).
  std::vector<torch::Tensor> got = RunSteps(o, 1, true);
  ASSERT_EQ(got.size(), 1u);
  const torch::Tensor want = Mean(0, true);
  EXPECT_LT(RelativeError(got[0].narrow(0, 0, 192), want.narrow(0, 0, 192)), 1e-4);
  EXPECT_TRUE(torch::allclose(got[0].narrow(0, 192, 5), want.narrow(0, 192, 5), 1e-6, 1e-6));
}

TEST(Compression, PowerSgdWarmsUpUncompressedThenErrorFeedbackCatchesUp) {
  GradientCompressionOptions o;
  o.method = Compression::kPowerSgd;
  o.matrix_rank = 1;
  o.warmup_steps = 2;
  const int steps = 40;
  std::vector<torch::Tensor> got = RunSteps(o, steps, false);
  ASSERT_EQ(got.size(), static_cast<size_t>(steps));
  for (int s = 0; s < 2; ++s) EXPECT_LT(RelativeError(got[s], Mean(s, false)), 1e-6) << "warm-up step " << s;
  // A full-rank 16 x 12 matrix in rank 1: one step is far off...
  EXPECT_GT(RelativeError(got[2].narrow(0, 0, 192), Mean(2, false).narrow(0, 0, 192)), 0.3);
  // ...but what is missed is sent later: over the run the applied mean tracks the true one.
  torch::Tensor applied = torch::zeros({197}), truth = torch::zeros({197});
  for (int s = 0; s < steps; ++s) {
    applied += got[s];
    truth += Mean(s, false);
  }
  EXPECT_LT(RelativeError(applied, truth), 0.5 * RelativeError(got[2], Mean(2, false)));
}

// What a checkpoint carries (SaveState, LoadState) lets a new PowerSGD go on
// exactly as the old one would have, in warm-up and after; without it the
// next step differs (the test would catch a state that is not restored).
TEST(Compression, PowerSgdStateCarriedOverContinuesExactly) {
  GradientCompressionOptions o;
  o.method = Compression::kPowerSgd;
  o.matrix_rank = 1;
  o.warmup_steps = 2;
  const std::vector<torch::Tensor> whole = RunSteps(o, 6, false);
  ASSERT_EQ(whole.size(), 6u);
  for (int restart : {1, 4}) {
    std::vector<torch::Tensor> resumed = RunSteps(o, 6, false, restart);
    ASSERT_EQ(resumed.size(), 6u);
    for (int s = 0; s < 6; ++s) {
      EXPECT_TRUE(torch::equal(whole[s], resumed[s])) << "restart " << restart << ", step " << s;
    }
  }
  // A fresh compression at step 4 (warm-up restarted, error and Q forgotten) does not.
  const std::vector<torch::Tensor> fresh = RunSteps(o, 6, false, 4, /*carry=*/false);
  ASSERT_EQ(fresh.size(), 6u);
  EXPECT_TRUE(torch::equal(fresh[3], whole[3]));
  EXPECT_FALSE(torch::equal(fresh[5], whole[5]));
}

TEST(Compression, StateThatDoesNotFitIsRefused) {
  GradientCompressionOptions o;
  o.method = Compression::kPowerSgd;
  o.warmup_steps = 0;
  CompressionState wrong;
  wrong.shared["bucket0_steps"] = torch::tensor(int64_t{3});
  wrong.own["bucket0_error"] = torch::zeros({7});
  OnTwoRanks([&](Comm& comm) -> Status {
    auto c = CreateBucketCompression(o, comm);
    if (!c.ok()) return c.status();
    EXPECT_TRUE(c.value()->LoadState(wrong).ok());  // taken up when bucket 0 first needs it
    torch::Tensor flat = Bucket(comm.rank(), 0, false);
    auto reduce = c.value()->Start(0, flat, kShapes);
    EXPECT_FALSE(reduce.ok());
    EXPECT_NE(reduce.status().ToString().find("does not fit"), std::string::npos) << reduce.status().ToString();
    GradientCompressionOptions fp16_options;
    fp16_options.method = Compression::kFp16;
    auto fp16 = CreateBucketCompression(fp16_options, comm);
    if (!fp16.ok()) return fp16.status();
    EXPECT_FALSE(fp16.value()->LoadState(wrong).ok()) << "fp16 keeps no state";
    return Status::OK();
  });
}

TEST(Compression, MethodsAreParsedByNameAndUnknownOnesRefused) {
  Compression method = Compression::kNone;
  EXPECT_FALSE(ParseChoice("int8", &method));
  EXPECT_EQ(method, Compression::kNone);  // untouched
  EXPECT_TRUE(ParseChoice("powersgd", &method));
  EXPECT_EQ(method, Compression::kPowerSgd);
  EXPECT_STREQ(NameOf(Compression::kBf16), "bf16");
  EXPECT_EQ(ChoiceNames(method), "none, fp16, bf16 or powersgd");
}

}  // namespace
}  // namespace granary
