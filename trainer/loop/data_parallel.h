// Data parallelism, DDP's "when" (its "how" is comm/gradient_sync.h):
// Join meets the other ranks, makes rank 0's parameters everyone's and
// attaches the gradient sync (again after a prune: Reattach); Parts says what each step synchronises: rank
// 0's buffers (BatchNorm statistics) before it, the gradients after its
// last backward; nothing with --synthetic, where the ranks train apart, or
// for one rank alone (unless its gradients are compressed).
// Training thread only.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/config/config.h"
#include "trainer/loop/step.h"
#include "trainer/models/registry.h"

namespace granary {

struct DataParallel {
  std::unique_ptr<Comm> comm;
  std::unique_ptr<GradientSync> sync;
  std::vector<torch::Tensor> buffers;
  bool compressed = false;  // --sync-compress other than none

  // `recipe`: what every rank must agree on (RecipeJson), checked at
  // rendezvous; `env`: the process's environment (an MPI job's, torchrun's).
  static StatusOr<DataParallel> Join(const TrainConfig& c, const Environment& env, int rank, Classifier& net,
                                     const std::string& recipe);
  // After the model's parameters changed shape (a prune): a new gradient
  // sync attached to them, their gradients cleared. Parts again after it.
  Status Reattach(const TrainConfig& c, Classifier& net);
  void Parts(bool apart, StepParts* parts) const;
};

}  // namespace granary
