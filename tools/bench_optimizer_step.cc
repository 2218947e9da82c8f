// The optimizer step alone, on the parameters of a model: LibTorch's C++
// optimizers against granary's fused ones (trainer/optim/fused_optimizer.h), each
// the median of --steps timed steps after warm-up, with --threads intra-op
// threads. Prints one JSON object; tools/bench_optimizer runs it beside
// Python's torch.optim on the same shapes.
//   bench_optimizer_step [--model convnet] [--threads 1] [--steps 50]
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

#include "trainer/models/registry.h"
#include "trainer/optim/fused_optimizer.h"

namespace {

using Make = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<torch::Tensor>&)>;

double MedianStepMs(const std::vector<torch::Tensor>& params, const Make& make, int steps) {
  auto optimizer = make(params);
  std::vector<double> ms;
  for (int i = 0; i < steps + 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    optimizer->step();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= 5) ms.push_back(t);  // the first steps allocate state
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "convnet";
  int threads = 1, steps = 50;
  CLI::App app{"Times optimizer steps: LibTorch's against granary's fused ones."};
  app.add_option("--model", model)->capture_default_str();
  app.add_option("--threads", threads)->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--steps", steps)->check(CLI::Range(1, 100000))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(threads);
  auto net = granary::CreateModel({model, {1, 28, 28}, 10, 0.0});
  if (!net.ok()) {
    std::fprintf(stderr, "bench_optimizer_step: %s\n", net.status().ToString().c_str());
    return 1;
  }
  std::vector<torch::Tensor> params = net.value()->parameters();
  int64_t numel = 0;
  for (auto& p : params) {
    p.mutable_grad() = torch::randn_like(p) * 1e-2;
    numel += p.numel();
  }
  using namespace torch::optim;
  const SGDOptions sgd = SGDOptions(0.02).momentum(0.9);
  const AdamOptions adam(1e-3);
  const AdamWOptions adamw(1e-3);
  struct Row {
    const char* name;
    Make libtorch, fused;
  };
  const Row rows[] = {
      {"sgd_momentum", [&](const auto& p) { return std::make_unique<SGD>(p, sgd); },
       [&](const auto& p) { return std::make_unique<granary::FusedSGD>(p, sgd); }},
      {"adam", [&](const auto& p) { return std::make_unique<Adam>(p, adam); },
       [&](const auto& p) { return std::make_unique<granary::FusedAdam>(p, adam); }},
      {"adamw", [&](const auto& p) { return std::make_unique<AdamW>(p, adamw); },
       [&](const auto& p) { return std::make_unique<granary::FusedAdamW>(p, adamw); }},
  };
  std::printf("{\"model\": \"%s\", \"parameters\": %lld, \"threads\": %d, \"steps\": %d", model.c_str(),
              static_cast<long long>(numel), threads, steps);
  for (const Row& r : rows) {
    // Alternated, so drift on a noisy machine hits both alike.
    const double lib = MedianStepMs(params, r.libtorch, steps), fused = MedianStepMs(params, r.fused, steps);
    std::printf(", \"%s\": {\"libtorch_ms\": %.3f, \"fused_ms\": %.3f}", r.name, lib, fused);
  }
  std::printf("}\n");
  return 0;
}
