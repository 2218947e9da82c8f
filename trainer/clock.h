// The trainer's one way of timing an interval.
#pragma once

#include <chrono>

namespace granary {

// Seconds of the steady clock since `start`.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace granary
