// A progress line on stderr (count, rate, ETA), redrawn from a background
// thread while work runs. Add() is thread-safe and cheap (one atomic add).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "base/mutex.h"

namespace granary {

// What a ProgressLine counts: items (with their bytes beside), bytes alone
// (a file read or decompressed), shown in MB, or files of a count not known
// ahead (a folder walked), shown with their rate alone.
enum class ProgressUnit { kItems, kBytes, kFiles };

class ProgressLine {
 public:
  // Draws nothing unless `enabled`. With ProgressUnit::kBytes, `total` and
  // Add's `items` are bytes; with kFiles, `total` is the count below which
  // nothing is drawn in the first second (a small folder's walk adds no line).
  ProgressLine(std::string label, uint64_t total, bool enabled, ProgressUnit unit = ProgressUnit::kItems);
  ~ProgressLine();  // Stops and draws the final line.
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void Add(uint64_t items, uint64_t bytes) {
    items_.fetch_add(items, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }

 private:
  void Draw(bool final);

  std::string label_;
  uint64_t total_;
  bool enabled_;
  ProgressUnit unit_;
  std::atomic<uint64_t> items_{0};
  std::atomic<uint64_t> bytes_{0};
  std::chrono::steady_clock::time_point start_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GRANARY_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace granary
