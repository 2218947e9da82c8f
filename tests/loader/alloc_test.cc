// The loader's steady state allocates nothing per sample: every heap
// allocation of this test binary is counted (operator new is replaced below).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "loader/loader.h"
#include "store/db.h"
#include "tests/loader/image_db.h"
#include "tests/test_util.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace granary {
namespace {

// n samples of an 8x8 RGB (HWC) image and a label, `per_record` to a record.
void WriteRgbDb(const std::string& path, uint64_t n, uint64_t per_record) {
  testing::ImageDbSpec spec;
  spec.image_shape = {8, 8, 3};
  spec.layout = "HWC";
  spec.per_record = per_record;
  testing::WriteImageDb(path, n, spec, [](uint64_t i, std::string* image, int64_t* label) {
    image->assign(8 * 8 * 3, static_cast<char>(i % 251));
    *label = static_cast<int64_t>(i % 10);
  });
}

// Heap allocations made while `loader` delivers epoch `epoch` into `batch`
// (one Batch for the whole run, as a training loop keeps one); adds the
// samples delivered to *samples.
uint64_t AllocationsInAnEpoch(Loader* loader, uint64_t epoch, Batch& batch, uint64_t* samples) {
  const uint64_t before = g_allocations.load();
  loader->StartEpoch(epoch);
  for (;;) {
    StatusOr<bool> more = loader->Next(&batch);
    if (!more.ok() || !more.value()) break;
    *samples += batch.size;
  }
  return g_allocations.load() - before;
}

TEST(LoaderAllocations, NoneForEachSampleOrBatchOnceWarm) {
  testing::TempDir dir;
  const uint64_t n = 2048;
  WriteRgbDb(dir.Sub("db"), n, 3);  // records of 3 samples: batches cross records
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  // Float batches with crop, flip and per-channel normalisation; uint8
  // channels-last batches with crop and flip.
  for (bool uint8_batches : {false, true}) {
    LoaderOptions o;
    o.batch_size = 32;
    o.threads = 2;
    o.prefetch = 3;
    o.sampler.world = 1;
    o.augment.flip = true;
    o.augment.crop_padding = 2;
    o.uint8_batches = uint8_batches;
    o.channels_last = uint8_batches;
    if (!uint8_batches) {
      o.channel_mean = {0.5f, 0.4f, 0.3f};
      o.channel_std = {0.2f, 0.2f, 0.2f};
    }
    auto loader = Loader::Create(*db.value(), o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    uint64_t samples = 0;
    Batch batch;
    const uint64_t first = AllocationsInAnEpoch(loader.value().get(), 0, batch, &samples);
    EXPECT_GT(first, 0u) << "the count works: the first epoch allocates the batch buffers";
    samples = 0;
    const uint64_t warm = AllocationsInAnEpoch(loader.value().get(), 1, batch, &samples);
    EXPECT_EQ(samples, n);
    // What the loader may allocate in an epoch: the orders of this epoch and
    // the next (the permutation, this rank's part, a shared_ptr and a map
    // node: 4 each). Nothing per batch (64 of them) or sample.
    EXPECT_LE(warm, 2u * 4u) << (uint8_batches ? "uint8 batches" : "float batches") << ", first epoch " << first;
  }
}

}  // namespace
}  // namespace granary
