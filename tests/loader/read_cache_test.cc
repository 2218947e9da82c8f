// The loader's use of the page cache under block shuffling (ReadCache); the
// memory limit it decides by is tested in tests/base/machine_test.cc.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loader/loader.h"
#include "loader/window_stager.h"
#include "store/db.h"
#include "tests/loader/image_db.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// The fraction of `path`'s pages in the page cache (mincore of a mapping,
// which reads nothing in).
double ResidentFraction(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  struct stat st;
  ::fstat(fd, &st);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = (static_cast<size_t>(st.st_size) + page - 1) / page;
  void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return -1;
  std::vector<unsigned char> in(pages);
  const int rc = ::mincore(map, static_cast<size_t>(st.st_size), in.data());
  ::munmap(map, static_cast<size_t>(st.st_size));
  if (rc != 0) return -1;
  size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  return static_cast<double>(resident) / static_cast<double>(pages);
}

// Drops `path` from the page cache (synced first: only clean pages leave).
// Each epoch below starts with the db out of the cache, as one larger than
// memory is: pages another read brought in may sit in folios larger than
// what the loader drops, which the kernel keeps.
void DropFromCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << path;
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Block shuffling with windows of 64 samples (2,000 samples make 32), as
// rank 0 of `world`.
LoaderOptions BlockShuffled(ReadCache read_cache, int world = 1) {
  LoaderOptions o;
  o.sampler.world = world;
  o.batch_size = 16;
  o.threads = 2;
  o.prefetch = 2;
  o.scale = 1.0f;
  o.sampler.mode = ShuffleMode::kBlock;
  o.sampler.block_samples = 16;
  o.sampler.block_window = 4;
  o.read_cache = read_cache;
  return o;
}

struct EpochRead {
  bool released = false;  // Loader::releases_read_pages
  bool around = false;    // Loader::reads_around_page_cache
};

// One epoch of a block-shuffled loader over `db` (rank 0 of `world`),
// checked against the sampler's order.
EpochRead BlockShuffledEpoch(const DbReader& db, ReadCache read_cache, int world = 1) {
  auto loader = Loader::Create(db, BlockShuffled(read_cache, world));
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  if (!loader.ok()) return {};
  const std::vector<uint64_t> expected = loader.value()->sampler().EpochIndices(0);
  loader.value()->StartEpoch(0);
  Batch batch;
  size_t at = 0;
  for (;;) {
    auto more = loader.value()->Next(&batch);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !more.value()) break;
    for (size_t i = 0; i < batch.size; ++i, ++at) {
      EXPECT_EQ(batch.input[i * 4096], static_cast<float>(expected.at(at) % 200)) << "position " << at;
      EXPECT_EQ(batch.target[i], static_cast<int64_t>(expected.at(at) % 10)) << "position " << at;
    }
  }
  EXPECT_EQ(at, expected.size());
  return {loader.value()->releases_read_pages(), loader.value()->reads_around_page_cache()};
}

TEST(ReadCache, ReleasedWindowsLeaveThePageCacheOrAreReadAroundItAndTheBatchesAreTheSame) {
  TempDir dir;
  struct statfs fs;
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << dir.path() << " is on tmpfs, whose pages never leave memory";
  testing::ImageDbSpec spec;
  spec.image_shape = {1, 64, 64};  // 4 KiB a sample, one record each, in pages of its own (LMDB's overflow pages)
  spec.shards = 2;
  spec.manifest.label_field = "label";
  spec.manifest.num_classes = 10;
  testing::WriteImageDb(dir.Sub("db"), 2000, spec, [](uint64_t i, std::string* image, int64_t* label) {
    uint64_t x = i + 1;  // noise, which zstd leaves as large as it is
    for (char& c : *image) c = static_cast<char>((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
    (*image)[0] = static_cast<char>(i % 200);
    *label = static_cast<int64_t>(i % 10);
  });
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  const std::vector<std::string> shards = {dir.Sub("db/train/shard-00000.mdb"), dir.Sub("db/train/shard-00001.mdb")};

  const auto resident = [&] {
    double fraction = 0;
    for (const std::string& shard : shards) fraction += ResidentFraction(shard) / 2;
    return fraction;
  };
  for (const std::string& shard : shards) DropFromCache(shard);
  EpochRead read = BlockShuffledEpoch(*db.value(), ReadCache::kKeep);
  EXPECT_FALSE(read.released || read.around);
  for (const std::string& shard : shards) EXPECT_GT(ResidentFraction(shard), 0.9) << shard;

  // Released, by one of two ranks: all but the last few windows (of 32)
  // leave once read.
  for (const std::string& shard : shards) DropFromCache(shard);
  read = BlockShuffledEpoch(*db.value(), ReadCache::kRelease, 2);
  EXPECT_TRUE(read.released);
  EXPECT_FALSE(read.around);  // the other rank of the node may read the same pages
  EXPECT_LT(resident(), 0.35);

  // Released by the only rank: windows are read around the page cache, and
  // hardly a page of them (a window's first records, read before it is
  // staged) is ever in it.
  for (const std::string& shard : shards) DropFromCache(shard);
  read = BlockShuffledEpoch(*db.value(), ReadCache::kRelease);
  EXPECT_TRUE(read.released);
  EXPECT_TRUE(read.around);
  EXPECT_LT(resident(), 0.1);

  // kAuto keeps the pages of a split this much smaller than memory.
  for (const std::string& shard : shards) DropFromCache(shard);
  read = BlockShuffledEpoch(*db.value(), ReadCache::kAuto);
  EXPECT_FALSE(read.released || read.around);
  for (const std::string& shard : shards) EXPECT_GT(ResidentFraction(shard), 0.9) << shard;
}

// A window waited for is in memory (read while its file is cut short); a
// read that fails stops the stager, and waiting never hangs.
TEST(WindowStager, AWindowWaitedForIsStagedAndAFailedReadStopsIt) {
  TempDir dir;
  testing::WriteTinyDb(dir.Sub("db"), 300);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  auto stager = WindowStager::Create(*db.value(), "train", 1 << 20);
  ASSERT_TRUE(stager.ok()) << stager.status().ToString();
  auto reader = SplitReader::Create(*db.value(), "train");
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(stager.value()->working());
  stager.value()->Request(1, {{0, 150}, {150, 300}});
  stager.value()->Wait(1);
  const std::string shard = dir.Sub("db/train/shard-00000.mdb");
  std::filesystem::resize_file(shard, 8192);  // its records gone (the index was read at Create)
  const FieldView* fields = nullptr;
  for (uint64_t i = 0; i < 300; ++i) {
    ASSERT_TRUE(reader.value()->Read(i, &fields).ok()) << i;
    EXPECT_EQ(fields[0].data[0], static_cast<uint8_t>(i % 200)) << i;
  }

  stager.value()->Request(2, {{0, 300}});
  stager.value()->Wait(2);
  EXPECT_FALSE(stager.value()->working());
  const Status failure = stager.value()->failure();
  EXPECT_EQ(failure.code(), Status::Code::kCorruption) << failure.ToString();
  EXPECT_NE(failure.message().find(shard + ": ends before byte"), std::string::npos) << failure.message();
  stager.value()->Request(3, {{0, 10}});  // ignored from now on
  stager.value()->Wait(3);
}

// Direct reads of a shard cut short fail: the loader goes on reading as
// usual, names the damage as it always did, and keeps the failure for a note.
TEST(ReadCache, AFailedDirectReadIsKeptAndTheDamageNamedAsEver) {
  TempDir dir;
  testing::WriteTinyDb(dir.Sub("db"), 300);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  auto loader = Loader::Create(*db.value(), BlockShuffled(ReadCache::kRelease));
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_TRUE(loader.value()->reads_around_page_cache());
  EXPECT_TRUE(loader.value()->direct_read_failure().ok());
  const std::string shard = dir.Sub("db/train/shard-0000");  // both of them
  for (const char* n : {"0", "1"}) std::filesystem::resize_file(shard + n + ".mdb", 8192);  // records gone
  loader.value()->StartEpoch(0);
  Batch batch;
  auto more = loader.value()->Next(&batch);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), Status::Code::kCorruption) << more.status().ToString();
  EXPECT_NE(more.status().message().find(shard), std::string::npos) << more.status().message();
  EXPECT_FALSE(loader.value()->reads_around_page_cache());
  const Status failure = loader.value()->direct_read_failure();
  EXPECT_FALSE(failure.ok());
  EXPECT_NE(failure.message().find(shard), std::string::npos) << failure.ToString();
}

TEST(ReadCache, ReleaseIsForBlockShufflingOnly) {
  TempDir dir;
  testing::WriteTinyDb(dir.Sub("db"), 100);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  LoaderOptions o;
  o.read_cache = ReadCache::kRelease;
  o.sampler.mode = ShuffleMode::kFull;  // reads from the whole split at once: nothing is done with
  auto loader = Loader::Create(*db.value(), o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_FALSE(loader.value()->releases_read_pages());
}

}  // namespace
}  // namespace granary
