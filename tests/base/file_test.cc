#include "base/file.h"

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

TEST(ReadOnlyFile, ReadsDirectlyWholePagesOfTheFileItOpenedIntoOneReusedBuffer) {
  testing::TempDir dir;
  const std::string path = dir.Sub("f");
  std::string bytes(10000, '\0');
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<char>(k * 7 % 251);
  testing::WriteFile(path, bytes);
  ReadOnlyFile file;
  ASSERT_TRUE(file.Open(path).ok());
  // Replaced by a rename after the open: the direct reads still read the file opened.
  testing::WriteFile(dir.Sub("g"), std::string(10000, 'x'));
  std::filesystem::rename(dir.Sub("g"), path);

  DirectRead read;
  ASSERT_TRUE(file.ReadDirect(5000, 100, &read).ok());
  EXPECT_EQ(read.first(), 4096u);  // whole pages around the range
  EXPECT_EQ(read.size(), 4096u);
  EXPECT_TRUE(read.Holds(5000, 100));
  EXPECT_EQ(std::string(read.data() + (5000 - read.first()), 100), bytes.substr(5000, 100));
  const char* buffer = read.data();
  ASSERT_TRUE(file.ReadDirect(9990, 10, &read).ok());  // the last, partial page
  EXPECT_EQ(read.data(), buffer);                      // read into the same buffer
  EXPECT_EQ(read.first() + read.size(), 10000u);
  EXPECT_EQ(std::string(read.data() + (9990 - read.first()), 10), bytes.substr(9990, 10));
  ASSERT_TRUE(file.ReadDirect(0, 10000, &read).ok());  // larger: a new buffer
  EXPECT_EQ(std::string(read.data(), read.size()), bytes);

  Status past = file.ReadDirect(9995, 10, &read);
  EXPECT_EQ(past.code(), Status::Code::kCorruption);
  EXPECT_NE(past.message().find(path + ": ends before byte 10005"), std::string::npos) << past.message();
  EXPECT_FALSE(read.Holds(9995, 1));
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
// stays; a write that fails leaves no temporary file behind.
TEST(WriteFileAtomically, WritesThroughASymlinkAndLeavesNoTemporaryOnFailure) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("target"), "old");
  std::filesystem::create_symlink("target", dir.Sub("link"));
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("link"), "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(dir.Sub("link")));
  EXPECT_EQ(testing::ReadFile(dir.Sub("target")), "new");
  EXPECT_EQ(testing::FileNames(dir.path()), (std::set<std::string>{"target", "link"}));

  std::filesystem::create_directory(dir.Sub("a-directory"));  // rename of a file over it fails
  Status s = WriteFileAtomically(dir.Sub("a-directory"), "x");
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(testing::FileNames(dir.path()), (std::set<std::string>{"target", "link", "a-directory"}));
}

// What sits where a temporary file used to go (a link to the user's file,
// a directory) is neither written through nor in the way; the temporary
// file has a name of its own and the mode a new file would have.
TEST(WriteFileAtomically, NeverWritesThroughWhatIsAtATemporaryName) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("users-file"), "the user's");
  std::filesystem::create_symlink(dir.Sub("users-file"), dir.Sub("m.pt.tmp"));
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("m.pt"), "model").ok());
  EXPECT_EQ(testing::ReadFile(dir.Sub("users-file")), "the user's");
  EXPECT_FALSE(std::filesystem::is_symlink(dir.Sub("m.pt")));
  EXPECT_EQ(testing::ReadFile(dir.Sub("m.pt")), "model");
  struct stat st;
  ASSERT_EQ(::stat(dir.Sub("m.pt").c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);

  std::filesystem::create_directory(dir.Sub("c.ckpt.tmp"));
  AtomicWriteOptions durable;
  durable.sync = true;
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("c.ckpt"), "checkpoint", durable).ok());
  EXPECT_EQ(testing::ReadFile(dir.Sub("c.ckpt")), "checkpoint");
  EXPECT_EQ(testing::FileNames(dir.path()), (std::set<std::string>{"users-file", "m.pt.tmp", "m.pt", "c.ckpt.tmp", "c.ckpt"}));
}

// A file granary owns is never written through a link: refused, naming it,
// and the file the link names is untouched.
TEST(WriteFileAtomically, RefusesALinkWhereItWritesItsOwnFile) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("outside"), "not granary's");
  std::filesystem::create_symlink(dir.Sub("outside"), dir.Sub("granary-run.json"));
  AtomicWriteOptions own;
  own.through_links = false;
  Status s = WriteFileAtomically(dir.Sub("granary-run.json"), "{}", own);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find(dir.Sub("granary-run.json") + ": is a symlink"), std::string::npos) << s.message();
  EXPECT_EQ(testing::ReadFile(dir.Sub("outside")), "not granary's");
  s = WriteFileSynced(dir.Sub("granary-run.json"), "{}");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(testing::ReadFile(dir.Sub("outside")), "not granary's");
}

TEST(TemporaryNameBase, NamesTheFileATemporaryFileWasFor) {
  EXPECT_EQ(TemporaryNameBase("step-0000000002.ckpt.tmp-Ab12Cd"), "step-0000000002.ckpt");
  EXPECT_EQ(TemporaryNameBase("step-0000000002.ckpt.tmp"), "step-0000000002.ckpt");
  EXPECT_EQ(TemporaryNameBase("step-0000000002.ckpt"), "");
  EXPECT_EQ(TemporaryNameBase("a.tmp-toolong"), "");
  EXPECT_EQ(TemporaryNameBase(".tmp"), "");
}

}  // namespace
}  // namespace granary
