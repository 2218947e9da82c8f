#include "trainer/eval/inference_rates.h"

#include <algorithm>
#include <chrono>

#include "trainer/clock.h"
#include "trainer/launch/heartbeat.h"

namespace granary {

std::vector<double> InferenceRates(const std::vector<ForwardFn>& models, const torch::Tensor& batch) {
  constexpr int kTimed = 5;
  torch::NoGradGuard no_grad;
  std::vector<std::vector<double>> seconds(models.size());
  for (int round = -1; round < kTimed; ++round) {  // round -1: the warm-up
    for (size_t m = 0; m < models.size(); ++m) {
      const auto start = std::chrono::steady_clock::now();
      models[m](batch);
      const double took = SecondsSince(start);
      if (round >= 0) seconds[m].push_back(took);
    }
    HeartbeatBeat();
  }
  std::vector<double> rates;
  for (std::vector<double>& s : seconds) {
    std::sort(s.begin(), s.end());
    rates.push_back(static_cast<double>(batch.size(0)) / std::max(s[s.size() / 2], 1e-9));
  }
  return rates;
}

}  // namespace granary
