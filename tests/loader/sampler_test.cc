#include "loader/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

namespace granary {
namespace {

struct Case {
  uint64_t n;
  int world;
  bool drop_last;
};

class SamplerProperties : public ::testing::TestWithParam<Case> {};

// Over all ranks of one epoch: equal counts, disjoint up to the reported
// padding, covering all but the reported dropped samples.
TEST_P(SamplerProperties, RanksShareAnEpochExactly) {
  const Case c = GetParam();
  for (uint64_t epoch : {0, 1, 7}) {
    std::map<uint64_t, int> seen;
    uint64_t per_rank = 0, padded = 0, dropped = 0;
    for (int rank = 0; rank < c.world; ++rank) {
      auto s = Sampler::Create(c.n, {42, c.drop_last, rank, c.world});
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      std::vector<uint64_t> mine = s->EpochIndices(epoch);
      if (rank == 0) {
        per_rank = mine.size();
        padded = s->padded();
        dropped = s->dropped();
      }
      ASSERT_EQ(mine.size(), per_rank) << "rank " << rank;
      EXPECT_EQ(s->samples_per_rank(), per_rank);
      for (uint64_t i : mine) {
        ASSERT_LT(i, c.n);
        ++seen[i];
      }
    }
    uint64_t duplicates = 0;
    for (auto& [index, count] : seen) duplicates += count - 1;
    EXPECT_EQ(duplicates, padded);
    EXPECT_EQ(c.n - seen.size(), dropped);
    EXPECT_EQ(per_rank * c.world, c.n + padded - dropped);
    if (c.drop_last) {
      EXPECT_EQ(padded, 0u);
      EXPECT_LT(dropped, static_cast<uint64_t>(c.world));
    } else {
      EXPECT_EQ(dropped, 0u);
      EXPECT_LT(padded, static_cast<uint64_t>(c.world));
    }
  }
}

TEST_P(SamplerProperties, OrderIsAPureFunctionOfSeedAndEpoch) {
  const Case c = GetParam();
  auto a = Sampler::Create(c.n, {7, c.drop_last, 0, c.world});
  auto b = Sampler::Create(c.n, {7, c.drop_last, 0, c.world});
  auto other_seed = Sampler::Create(c.n, {8, c.drop_last, 0, c.world});
  ASSERT_TRUE(a.ok() && b.ok() && other_seed.ok());
  EXPECT_EQ(a->EpochIndices(3), b->EpochIndices(3));
  if (c.n >= 20) {
    EXPECT_NE(a->EpochIndices(3), a->EpochIndices(4));
    EXPECT_NE(a->EpochIndices(3), other_seed->EpochIndices(3));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SamplerProperties,
                         ::testing::Values(Case{1, 1, false}, Case{10, 1, false}, Case{10, 3, false},
                                           Case{10, 3, true}, Case{100, 4, false}, Case{101, 4, false},
                                           Case{101, 4, true}, Case{997, 7, false}, Case{997, 7, true},
                                           Case{5, 8, false}, Case{60000, 2, false}, Case{1000, 16, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {  // e.g. n997_world7_drop
                           const Case& c = info.param;
                           return "n" + std::to_string(c.n) + "_world" + std::to_string(c.world) +
                                  (c.drop_last ? "_drop" : "_pad");
                         });

TEST(Sampler, PermutationIsAPermutation) {
  for (uint64_t n : {0, 1, 2, 3, 1000}) {
    std::vector<uint64_t> p = EpochPermutation(n, 1, 2);
    std::sort(p.begin(), p.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], i);
  }
}

TEST(Sampler, NoShuffleReadsInIndexOrder) {
  auto s = Sampler::Create(10, {1, false, 1, 2, ShuffleMode::kNone});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->EpochIndices(5), (std::vector<uint64_t>{1, 3, 5, 7, 9}));
}

TEST(Sampler, ParsesShuffleModeNames) {
  EXPECT_EQ(ParseShuffleMode("full").value(), ShuffleMode::kFull);
  EXPECT_EQ(ParseShuffleMode("block").value(), ShuffleMode::kBlock);
  EXPECT_EQ(ParseShuffleMode("none").value(), ShuffleMode::kNone);
  EXPECT_EQ(ParseShuffleMode("random").status().code(), Status::Code::kInvalidArgument);
}

TEST(Sampler, RejectsBadWorldAndRank) {
  EXPECT_EQ(Sampler::Create(10, {0, false, 0, 0}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Sampler::Create(10, {0, false, 2, 2}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Sampler::Create(10, {0, false, -1, 2}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Sampler::Create(0, {0, false, 0, 1}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Sampler::Create(3, {0, true, 0, 4}).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// Stop an epoch after c samples per rank with world W, continue it from the
// global position c * W with world W2: together every sample is read exactly
// once, apart from the padding the continuation reports.
TEST(Sampler, ResumingMidEpochWithAnotherWorldSizeReadsEachSampleOnce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const uint64_t n = 1 + rng() % 500;
    const int w1 = 1 + static_cast<int>(rng() % 6), w2 = 1 + static_cast<int>(rng() % 6);
    auto first = Sampler::Create(n, {3, false, 0, w1});
    ASSERT_TRUE(first.ok());
    const uint64_t per_rank = first->samples_per_rank();
    const uint64_t c = rng() % (per_rank + 1);  // samples each rank consumed
    const uint64_t position = std::min(n, c * static_cast<uint64_t>(w1));
    std::map<uint64_t, int> seen;
    for (int r = 0; r < w1; ++r) {
      auto s = Sampler::Create(n, {3, false, r, w1});
      std::vector<uint64_t> mine = s->EpochIndices(5);
      for (uint64_t k = 0; k < c && r + k * w1 < n; ++k) ++seen[mine[k]];  // positions past n were padding
    }
    uint64_t padded = 0;
    for (int r = 0; r < w2; ++r) {
      auto s = Sampler::Create(n, {3, false, r, w2});
      ASSERT_TRUE(s.ok());
      padded = s->padded(position);
      for (uint64_t i : s->EpochIndices(5, position)) ++seen[i];
    }
    uint64_t extra = 0;
    for (auto& [index, count] : seen) extra += count - 1;
    ASSERT_EQ(seen.size(), n) << "n " << n << " w1 " << w1 << " w2 " << w2 << " c " << c;
    ASSERT_EQ(extra, padded) << "n " << n << " w1 " << w1 << " w2 " << w2 << " c " << c;
  }
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

TEST(Sampler, BlockShuffleIsAPermutationThatKeepsReadsLocal) {
  for (uint64_t n : {1, 10, 1000, 1024, 4097}) {
    std::vector<uint64_t> p = BlockPermutation(n, 3, 1, 64, 4);
    std::vector<uint64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
    // Reads stay local: with whole chunks, each window of 256 positions draws
    // from exactly 4 chunks of 64 consecutive keys.
    for (uint64_t lo = 0; n % 64 == 0 && lo < n; lo += 256) {
      std::set<uint64_t> chunks;
      for (uint64_t i = lo; i < lo + 256; ++i) chunks.insert(p[i] / 64);
      EXPECT_EQ(chunks.size(), 4u);
    }
    if (n >= 1000) {
      EXPECT_NE(p, BlockPermutation(n, 3, 2, 64, 4));  // another epoch
      EXPECT_EQ(p, BlockPermutation(n, 3, 1, 64, 4));
    }
  }
  SamplerOptions o;
  o.mode = ShuffleMode::kBlock;
  o.block_samples = 0;
  EXPECT_EQ(Sampler::Create(10, o).status().code(), Status::Code::kInvalidArgument);
  o.block_samples = 4;
  o.world = 3;
  o.rank = 2;
  auto s = Sampler::Create(100, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->EpochIndices(0).size(), 34u);
}

// The padded samples are each rank's last ones; unpadded_samples counts the
// others, so over all ranks they are the split (or its undropped part) exactly.
TEST(Sampler, UnpaddedSamplesOverAllRanksAreEverySampleOnce) {
  for (uint64_t n : {7u, 999u, 1000u}) {
    for (int world : {1, 2, 3, 4}) {
      for (bool drop_last : {false, true}) {
        for (uint64_t start : {0u, 5u}) {
          uint64_t total = 0;
          for (int rank = 0; rank < world; ++rank) {
            SamplerOptions o;
            o.world = world;
            o.rank = rank;
            o.drop_last = drop_last;
            auto sampler = Sampler::Create(n, o);
            ASSERT_TRUE(sampler.ok());
            const uint64_t mine = sampler->unpadded_samples(start);
            EXPECT_LE(mine, sampler->samples_per_rank(start));
            total += mine;
          }
          const uint64_t left = n > start ? n - start : 0;
          SamplerOptions o;
          o.world = world;
          o.drop_last = drop_last;
          EXPECT_EQ(total, left - Sampler::Create(n, o)->dropped(start))
              << "n " << n << " world " << world << " drop_last " << drop_last << " start " << start;
        }
      }
    }
  }
}

}  // namespace
}  // namespace granary
