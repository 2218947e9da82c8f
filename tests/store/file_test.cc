#include "store/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
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

// A FIFO would block an open for ever and a device never end: both are
// refused at once, naming the file.
TEST(ReadOnlyFile, AFifoOrADeviceIsRefusedWithoutBlocking) {
  testing::TempDir dir;
  const std::string fifo = dir.Sub("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  ReadOnlyFile file;
  Status s = file.Open(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find(fifo + ": is a FIFO, not a regular file"), std::string::npos) << s.message();
  s = file.Open("/dev/zero");
  EXPECT_NE(s.message().find("/dev/zero: is a character device"), std::string::npos) << s.message();
}

// A symlink is written through: the file it names is replaced, the link
// stays; a write that fails leaves no .tmp behind.
TEST(WriteFileAtomically, WritesThroughASymlinkAndLeavesNoTemporaryOnFailure) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("target"), "old");
  std::filesystem::create_symlink("target", dir.Sub("link"));
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("link"), "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(dir.Sub("link")));
  EXPECT_EQ(testing::ReadFile(dir.Sub("target")), "new");
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("target.tmp")));

  std::filesystem::create_directory(dir.Sub("a-directory"));  // rename of a file over it fails
  Status s = WriteFileAtomically(dir.Sub("a-directory"), "x");
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("a-directory.tmp")));
}

}  // namespace
}  // namespace granary
