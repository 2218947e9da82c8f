#include "store/disk_room.h"

#include <algorithm>
#include <utility>

#include "base/file.h"

namespace granary {
namespace {

// Samples written before the disk's room is first projected from them (or a
// hundredth of the expected ones, if more): enough for a steady size a sample.
constexpr uint64_t kRoomSampleFloor = 1000;

}  // namespace

DiskRoomWatch::DiskRoomWatch(std::string partial, uint64_t expected, std::string resume_with)
    : partial_(std::move(partial)), resume_with_(std::move(resume_with)), expected_(expected) {}

void DiskRoomWatch::Appended(uint64_t samples, uint64_t stored, uint64_t written, uint64_t pending) {
  appended_samples_ += samples;
  appended_stored_ += stored;
  if (said_ || expected_ == 0 || appended_samples_ == 0) return;
  const uint64_t step = std::max<uint64_t>(expected_ / 100, 1);
  const uint64_t first = std::max(step, std::min(expected_, kRoomSampleFloor));
  if (written < first || written < next_check_ || written >= expected_) return;
  next_check_ = written + step;
  const int64_t free_bytes = FreeDiskBytes(partial_);
  if (free_bytes < 0) return;
  const double per_sample = static_cast<double>(appended_stored_) / static_cast<double>(appended_samples_);
  const double needed = per_sample * static_cast<double>(expected_ - written) + static_cast<double>(pending);
  if (needed <= static_cast<double>(free_bytes)) return;
  said_ = true;
  warning_ = partial_ + ": the db will need about " + ApproxBytes(needed) + " more (" +
             std::to_string(expected_ - written) + " samples still to come, at the " + ApproxBytes(per_sample) +
             " a sample of the " + std::to_string(written) + " written), but its disk has " +
             ApproxBytes(static_cast<double>(free_bytes)) +
             " free: it will fill before the db is complete. Make room, or write the db to another disk; "
             "a stop now (Ctrl-C) keeps what is written, and " + resume_with_ + " continues it";
}

std::string DiskRoomWatch::TakeWarning() { return std::exchange(warning_, std::string()); }

}  // namespace granary
