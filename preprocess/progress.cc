#include "preprocess/progress.h"

#include <cstdio>

namespace granary {
namespace {

// A walk of fewer files than its ProgressLine's total is drawn once it has taken this long (a slow disk, a
// network file system).
constexpr double kFilesLineAfter_s = 1.0;

}  // namespace

ProgressLine::ProgressLine(std::string label, uint64_t total, bool enabled, ProgressUnit unit)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      unit_(unit),
      start_(std::chrono::steady_clock::now()) {
  if (!enabled_) return;
  thread_ = std::thread([this] {
    MutexLock lock(&mu_);
    while (!cv_.WaitFor(mu_, std::chrono::milliseconds(250), [this] {
      mu_.AssertHeld();
      return stop_;
    })) {
      Draw(false);
    }
  });
}

ProgressLine::~ProgressLine() {
  if (!enabled_) return;
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
  Draw(true);
}

void ProgressLine::Draw(bool final) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const uint64_t items = items_.load(std::memory_order_relaxed);
  if (unit_ == ProgressUnit::kFiles) {
    if (items < total_ && seconds < kFilesLineAfter_s) return;
    std::fprintf(stderr, "\r\033[K%s: %llu files  %.0f files/s%s", label_.c_str(),
                 static_cast<unsigned long long>(items), seconds > 0 ? items / seconds : 0.0, final ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  const double mb = static_cast<double>(bytes_.load(std::memory_order_relaxed)) / 1e6;
  const double rate = seconds > 0 ? items / seconds : 0;
  const double pct = total_ > 0 ? 100.0 * items / total_ : 100.0;
  char eta[32] = "";
  if (!final && rate > 0 && items < total_) std::snprintf(eta, sizeof(eta), "  ETA %.0fs", (total_ - items) / rate);
  constexpr int kBarWidth = 24;
  char bar[kBarWidth + 1];
  const int filled = static_cast<int>(pct / 100.0 * kBarWidth);
  for (int i = 0; i < kBarWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kBarWidth] = '\0';
  if (unit_ == ProgressUnit::kBytes) {
    std::fprintf(stderr, "\r\033[K%s [%s] %.0f/%.0f MB (%.1f%%)  %.1f MB/s%s%s", label_.c_str(), bar, items / 1e6,
                 total_ / 1e6, pct, rate / 1e6, eta, final ? "\n" : "");
  } else {
    std::fprintf(stderr, "\r\033[K%s [%s] %llu/%llu (%.1f%%)  %.0f items/s  %.1f MB/s%s%s", label_.c_str(), bar,
                 static_cast<unsigned long long>(items), static_cast<unsigned long long>(total_), pct, rate,
                 seconds > 0 ? mb / seconds : 0.0, eta, final ? "\n" : "");
  }
  std::fflush(stderr);
}

}  // namespace granary
