#include "store/file.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"

namespace granary {
namespace {

TEST(ReadOnlyFile, ReadsAtOffsetsAndNamesTheFileWhenItEndsFirst) {
  testing::TempDir dir;
  const std::string path = dir.Sub("f");
  testing::WriteFile(path, "0123456789");
  ReadOnlyFile file;
  ASSERT_TRUE(file.Open(path).ok());
  char buf[4] = {};
  ASSERT_TRUE(file.ReadAt(3, 4, buf).ok());
  EXPECT_EQ(std::string(buf, 4), "3456");
  file.WillNeed(0, 10);  // a hint: nothing to observe but that it is harmless
  Status past = file.ReadAt(8, 4, buf);
  EXPECT_EQ(past.code(), Status::Code::kCorruption);
  EXPECT_NE(past.message().find(path + ": ends before byte 12"), std::string::npos) << past.message();
  ReadOnlyFile moved = std::move(file);
  ASSERT_TRUE(moved.ReadAt(0, 2, buf).ok());
  EXPECT_EQ(std::string(buf, 2), "01");
}

TEST(ReadOnlyFile, AMissingFileIsAnIOErrorNamingIt) {
  testing::TempDir dir;
  ReadOnlyFile file;
  Status s = file.Open(dir.Sub("absent"));
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find(dir.Sub("absent")), std::string::npos) << s.message();
}

}  // namespace
}  // namespace granary
