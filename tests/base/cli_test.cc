#include "base/cli.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

// A flag typed as PyTorch scripts spell theirs, or with a typo, is named
// with the one meant; anything else, and values, are not.
TEST(UnknownFlagAdvice, NamesTheFlagMeant) {
  const std::vector<std::string> known = {"--batch-size", "--epochs", "--loader-threads", "--lr", "--db"};
  const std::map<std::string, std::string> aliases = {{"--num-workers", "--loader-threads"},
                                                      {"--device", "train runs on CPUs"}};
  EXPECT_EQ(UnknownFlagAdvice({"32", "--batch_size"}, known, aliases), "; --batch_size: did you mean --batch-size?");
  EXPECT_EQ(UnknownFlagAdvice({"--Batch-Size=32"}, known, aliases), "; --Batch-Size: did you mean --batch-size?");
  EXPECT_EQ(UnknownFlagAdvice({"--epoch", "3"}, known, aliases), "; --epoch: did you mean --epochs?");
  EXPECT_EQ(UnknownFlagAdvice({"--num_workers", "4"}, known, aliases), "; --num_workers: did you mean --loader-threads?");
  EXPECT_EQ(UnknownFlagAdvice({"--device", "cpu"}, known, aliases), "; --device: train runs on CPUs");
  EXPECT_EQ(UnknownFlagAdvice({"--foo", "1", "-x", "--"}, known, aliases), "");
}

}  // namespace
}  // namespace granary
