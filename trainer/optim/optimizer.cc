#include "trainer/optim/optimizer.h"

#include "trainer/named_table.h"
#include "trainer/optim/fused_optimizer.h"

namespace granary {
namespace {

struct OptimizerEntry {
  const char* name;
  OptimizerDefaults defaults;
  int state_slots;  // tensors of a parameter's size kept per parameter (SGD's: with momentum)
  std::unique_ptr<torch::optim::Optimizer> (*create)(const OptimConfig& c, const std::vector<torch::Tensor>& params);
};

// Every optimizer, in the order --help lists them, with PyTorch's defaults
// (SGD's lr, which PyTorch leaves to the user, is the usual 0.01).
const OptimizerEntry kOptimizers[] = {
    {"sgd", {0.01, 0.0}, 1,
     [](const OptimConfig& c, const std::vector<torch::Tensor>& params) -> std::unique_ptr<torch::optim::Optimizer> {
       return std::make_unique<FusedSGD>(params, torch::optim::SGDOptions(c.lr)
                                                              .momentum(c.momentum)
                                                              .nesterov(c.nesterov)
                                                              .weight_decay(c.weight_decay));
     }},
    {"adam", {1e-3, 0.0}, 2,
     [](const OptimConfig& c, const std::vector<torch::Tensor>& params) -> std::unique_ptr<torch::optim::Optimizer> {
       return std::make_unique<FusedAdam>(params, torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
     }},
    {"adamw", {1e-3, 1e-2}, 2,
     [](const OptimConfig& c, const std::vector<torch::Tensor>& params) -> std::unique_ptr<torch::optim::Optimizer> {
       return std::make_unique<FusedAdamW>(params, torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
     }},
};

}  // namespace

bool IsKnownOptimizer(const std::string& name) { return FindByName(kOptimizers, name) != nullptr; }

std::string KnownOptimizerNames() { return JoinNames(kOptimizers); }

OptimizerDefaults DefaultsOf(const std::string& name) { return FindByName(kOptimizers, name)->defaults; }

int OptimizerStateSlots(const OptimConfig& config) {
  const OptimizerEntry* e = FindByName(kOptimizers, config.optimizer);
  if (e == nullptr || (config.optimizer == "sgd" && config.momentum == 0)) return 0;
  return e->state_slots;
}

StatusOr<std::unique_ptr<torch::optim::Optimizer>> CreateOptimizer(const OptimConfig& config,
                                                                   const std::vector<torch::Tensor>& params) {
  const OptimizerEntry* e = FindByName(kOptimizers, config.optimizer);
  if (e == nullptr) {
    return Status::InvalidArgument("--optimizer " + config.optimizer + ": unknown (known: " + KnownOptimizerNames() +
                                   ")");
  }
  return e->create(config, params);
}

}  // namespace granary
