#include "trainer/clock.h"
#include "trainer/loop/step.h"

#include <chrono>
#include <cmath>
#include <string>

#include "store/splitmix64.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"
#include "trainer/number_text.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

using Clock = std::chrono::steady_clock;

// A loss that is no longer finite ends the run: nothing trained after it means anything.
Status DivergedAt(double loss, int64_t step, double lr) {
  return Status::FailedPrecondition("the training loss became " + std::string(std::isnan(loss) ? "nan" : "infinite") +
                                    " at step " + std::to_string(step + 1) +
                                    ": the run diverged; try a lower --lr (now " + NumberText(lr) +
                                    "), --precision fp32 or a smaller --batch-size");
}

}  // namespace

uint64_t StepSeed(uint64_t seed, int rank, int64_t step) {
  return SplitMix64Mix(seed * kSplitMix64Gamma + static_cast<uint64_t>(rank) * 0xBF58476D1CE4E5B9ull +
                       static_cast<uint64_t>(step) * 0x94D049BB133111EBull) >>
         1;
}

torch::Tensor TrainingLoss(const torch::Tensor& output, const torch::Tensor& target, const Objective& objective) {
  if (objective.target_std > 0) {
    const torch::Tensor value = output.reshape({-1}).to(target.scalar_type());
    return torch::mse_loss(value, target) / (objective.target_std * objective.target_std);
  }
  torch::Tensor log_p = torch::log_softmax(output, 1);
  const torch::Tensor& weights = objective.class_weights;
  torch::Tensor nll = torch::nll_loss(log_p, target, weights);  // weighted: the mean over the batch's weights
  const double smoothing = objective.label_smoothing;
  if (smoothing == 0) return nll;
  if (!weights.defined()) return (1 - smoothing) * nll - smoothing * log_p.mean(1).mean();
  const torch::Tensor w = weights.index_select(0, target);  // as CrossEntropyLoss(weight, label_smoothing) weighs
  return (1 - smoothing) * nll - smoothing * (w * log_p.mean(1)).sum() / w.sum();
}

StatusOr<StepResult> Step(const StepParts& parts, int64_t step, int micro_batches, double lr,
                          const NextMicroBatch& next) {
  const Clock::time_point start = Clock::now();
  const double blocked_before = parts.sync != nullptr ? parts.sync->blocked_seconds() : 0;
  double waited_for_data = 0;
  StepResult result;
  for (int m = 0; m < micro_batches; ++m) {
    const Clock::time_point asked = Clock::now();
    MicroBatch batch;
    StatusOr<bool> more = next(&batch);
    waited_for_data += SecondsSince(asked);
    if (!more.ok()) return more.status();
    if (!more.value()) {
      return Status::FailedPrecondition("step " + std::to_string(step + 1) + ": the data ended after " +
                                        std::to_string(m) + " of its " + std::to_string(micro_batches) +
                                        " micro-batches");
    }
    if (m == 0) {
      torch::manual_seed(StepSeed(parts.seed, parts.rank, step));  // dropout: a function of where the run is
      if (parts.comm != nullptr && !parts.buffers.empty()) {
        torch::NoGradGuard no_grad;
        GRANARY_RETURN_IF_ERROR(parts.comm->Broadcast(parts.buffers));
      }
    }
    double batch_loss = 0;
    GRANARY_RETURN_IF_ERROR(CatchTorch("training step", [&] {
      if (m == 0) parts.optimizer->zero_grad();
      torch::Tensor logits = parts.precision->Forward(*parts.net, batch.input);
      torch::Tensor loss = TrainingLoss(logits, batch.target, parts.objective);
      if (m + 1 == micro_batches && parts.sync != nullptr) parts.sync->BeginStep();
      (micro_batches > 1 ? loss / static_cast<double>(micro_batches) : loss).backward();
      batch_loss = loss.item<double>() * static_cast<double>(batch.input.size(0));
    }));
    if (!std::isfinite(batch_loss)) return DivergedAt(batch_loss, step, lr);
    result.loss_sum += batch_loss;
    result.samples += static_cast<double>(batch.input.size(0));
  }
  if (parts.sync != nullptr) GRANARY_RETURN_IF_ERROR(parts.sync->FinishStep());
  GRANARY_RETURN_IF_ERROR(CatchTorch("optimizer step", [&] {
    for (torch::optim::OptimizerParamGroup& g : parts.optimizer->param_groups()) g.options().set_lr(lr);
    parts.optimizer->step();
  }));
  const double blocked = parts.sync != nullptr ? parts.sync->blocked_seconds() - blocked_before : 0;
  result.compute_seconds = SecondsSince(start) - waited_for_data - blocked;
  return result;
}

}  // namespace granary
