// WindowStager: a thread that reads ranges of a split ahead of the loader's
// workers, around the page cache (SplitReader::Stage), for block shuffling of
// a split larger than memory. Any thread may Request; the destructor stops
// the thread (after the read in progress) and unstages what it staged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "store/db.h"

namespace granary {

class WindowStager {
 public:
  // Its own SplitReader of `split` (NotFound if db has none); at most
  // `max_staged_bytes` staged at once (SplitReader::Stage). `db` must
  // outlive it.
  static StatusOr<std::unique_ptr<WindowStager>> Create(const DbReader& db, const std::string& split,
                                                        uint64_t max_staged_bytes);
  ~WindowStager();
  WindowStager(const WindowStager&) = delete;
  WindowStager& operator=(const WindowStager&) = delete;

  // Stages window `key`'s ranges of samples [first, end), after the windows
  // asked before.
  void Request(uint64_t key, std::vector<std::pair<uint64_t, uint64_t>> ranges);
  // Waits until window `key`, asked for, is staged (or a read failed), so
  // that its records come from memory rather than each from a read of its
  // own through the page cache, which would read them twice where the disk
  // is slower than the stager. Returns at once for a key never asked for or
  // staged already.
  void Wait(uint64_t key);
  // False once a read failed (a file system without direct I/O, a read
  // error): nothing more is staged, and readers read as usual (reporting
  // a real read error themselves).
  bool working() const;
  // The first failure, for a note; OK while working.
  Status failure() const;

 private:
  struct Impl;
  explicit WindowStager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary
