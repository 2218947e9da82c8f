// Whether a db being written will fit on its disk (DbWriterOptions::
// expected_samples): from a hundredth of the expected samples (at least
// 1,000) on, every hundredth, the rest projected at the bytes a sample so far
// against the disk's free bytes; a warning, once, where they do not fit. Only
// a projection: the build goes on, and a full disk still ends it with its
// partial directory kept for resuming. One thread at a time (the writer's).
#pragma once

#include <cstdint>
#include <string>

namespace granary {

class DiskRoomWatch {
 public:
  DiskRoomWatch() = default;  // expects nothing: never warns
  // `partial`: the directory written; `expected`: the db's samples (0: not
  // known); `resume_with`: what continues the build, as the warning says it.
  DiskRoomWatch(std::string partial, uint64_t expected, std::string resume_with);

  // After a record of `samples` samples that takes `stored` bytes of its shard
  // is appended: `written`, the db's samples so far (a resumed build's
  // included); `pending`, the bytes appended and not yet committed.
  void Appended(uint64_t samples, uint64_t stored, uint64_t written, uint64_t pending);
  // The warning, once it is made; "" before, and after it was taken.
  std::string TakeWarning();

 private:
  std::string partial_, resume_with_;
  uint64_t expected_ = 0;
  uint64_t appended_samples_ = 0;  // by this writer (not those of the build it resumes)
  uint64_t appended_stored_ = 0;   // what their records take in the shard files
  uint64_t next_check_ = 0;        // the samples written at which the disk is looked at next
  bool said_ = false;
  std::string warning_;
};

}  // namespace granary
