// The trainer's one way of timing an interval.
#pragma once

#include <time.h>

#include <chrono>

namespace granary {

// Seconds of the steady clock from `start` to `end`.
inline double SecondsBetween(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Seconds of the steady clock since `start`.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return SecondsBetween(start, std::chrono::steady_clock::now());
}

// CPU seconds this process has spent so far, over all its threads.
inline double ProcessCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

}  // namespace granary
