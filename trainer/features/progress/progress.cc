#include "trainer/features/progress/progress.h"

#include <xxhash.h>

#include <algorithm>

#include "store/manifest.h"
#include "trainer/clock.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"

namespace granary {
namespace {

class ProgressHook : public RunHook {
 public:
  StatusOr<Flow> AfterStep(RankState& state, const StepEvent& step) override;
  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport* report) override;
};

StatusOr<Flow> ProgressHook::AfterStep(RankState& state, const StepEvent& e) {
  const EpochTally& t = *e.tally;
  StepReport s;
  s.epoch = e.epoch + 1;
  s.step = e.step;
  s.steps = e.steps;
  s.global_step = state.global_step;
  s.loss = e.result.loss_sum / std::max(1.0, e.result.samples);
  s.epoch_loss = t.loss_sum / std::max(1.0, t.samples);
  s.lr = e.lr;
  s.seconds = SecondsSince(t.start);
  s.samples_per_s = (t.samples - t.samples_before) * state.run.config.World() / std::max(1e-9, s.seconds);
  state.observer.Step(s);
  return Flow::kGoOn;
}

StatusOr<Flow> ProgressHook::AfterEpoch(RankState& state, const EpochEvent&, EpochReport* report) {
  report->Set("weights_hash", WeightsHash(state.model.net->parameters()));
  return Flow::kGoOn;
}

class ProgressFeature : public Feature {
 public:
  bool InMeasurement() const override { return true; }
  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    if (state.rank != 0) return std::unique_ptr<RunHook>();
    return std::unique_ptr<RunHook>(std::make_unique<ProgressHook>());
  }
};

}  // namespace

std::unique_ptr<Feature> MakeProgressFeature() { return std::make_unique<ProgressFeature>(); }

std::string WeightsHash(const std::vector<torch::Tensor>& params) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  for (const torch::Tensor& p : params) {
    const torch::Tensor values = p.detach().contiguous();
    XXH64_update(state, values.data_ptr(), values.numel() * values.element_size());
  }
  const uint64_t hash = XXH64_digest(state);
  XXH64_freeState(state);
  return FormatHash(hash);
}

}  // namespace granary
