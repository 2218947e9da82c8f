#include "trainer/features/prune/pruner.h"

#include <algorithm>
#include <cmath>

#include "trainer/loop/data_parallel.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/models/prune.h"
#include "trainer/number_text.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// The optimizer's per-parameter state (momentum, Adam's moments) of `p`,
// each tensor reduced to `keep` along `dim` as `p` is about to be.
void ShrinkOptimizerState(torch::optim::Optimizer& optimizer, const torch::Tensor& p, int64_t dim,
                          const torch::Tensor& keep) {
  auto it = optimizer.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
  if (it == optimizer.state().end()) return;
  const auto select = [&](const torch::Tensor& t) { return KeptEntries(t, dim, keep); };
  // Adam's and AdamW's states are distinct types with the same moments.
  const auto moments = [&](auto* adam) {
    adam->exp_avg(select(adam->exp_avg()));
    adam->exp_avg_sq(select(adam->exp_avg_sq()));
    adam->max_exp_avg_sq(select(adam->max_exp_avg_sq()));
  };
  torch::optim::OptimizerParamState* state = it->second.get();
  if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state)) {
    moments(adam);
  } else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state)) {
    moments(adamw);
  } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state)) {
    sgd->momentum_buffer(select(sgd->momentum_buffer()));
  }
}

// The `count` most important channels, in index order (ties: the lower index).
torch::Tensor MostImportant(const torch::Tensor& importance, int64_t count) {
  const torch::Tensor order = std::get<1>(torch::sort(importance, /*stable=*/true, /*dim=*/0, /*descending=*/true));
  return std::get<0>(torch::sort(order.narrow(0, 0, count)));
}

}  // namespace

StatusOr<std::unique_ptr<Pruner>> Pruner::Create(const TrainConfig& c, Classifier& net,
                                                 std::vector<int64_t> channels_at_build) {
  if (c.shrink.prune == 0) return std::unique_ptr<Pruner>();
  GRANARY_RETURN_IF_ERROR(CheckPrunable(c, net));
  return std::unique_ptr<Pruner>(new Pruner(net, std::move(channels_at_build), c.shrink.prune,
                                            PruneEpochs(c.shrink, c.optim.epochs)));
}

std::vector<int64_t> Pruner::TargetAfter(int epoch) const {
  const auto [first, last] = epochs_;
  const double progress = std::clamp(static_cast<double>(epoch - first + 1) / (last - first + 1), 0.0, 1.0);
  std::vector<int64_t> out;
  for (int64_t n : at_build_) {
    const double kept = static_cast<double>(n) * (1 - fraction_ * progress) / kChannelMultiple;
    out.push_back(std::min(n, std::max<int64_t>(1, std::llround(kept)) * kChannelMultiple));
  }
  return out;
}

StatusOr<bool> Pruner::AfterEpoch(int epoch, Comm* comm, torch::optim::Optimizer& optimizer) {
  last_change_.clear();
  if (epoch < epochs_.first || epoch > epochs_.second) return false;
  std::vector<ChannelGroup> groups = dynamic_cast<Prunable&>(net_).ChannelGroups();
  const std::vector<int64_t> target = TargetAfter(epoch);
  // Rank 0's importance, so that float differences between ranks cannot
  // make them remove different channels.
  std::vector<torch::Tensor> importance;
  GRANARY_RETURN_IF_ERROR(CatchTorch("--prune: channel importance", [&] {
    for (const ChannelGroup& g : groups) importance.push_back(ChannelImportance(g));
  }));
  if (comm != nullptr) GRANARY_RETURN_IF_ERROR(comm->Broadcast(importance));
  const ShrinkHook follow = [&](const torch::Tensor& p, int64_t dim, const torch::Tensor& keep) {
    ShrinkOptimizerState(optimizer, p, dim, keep);
    p.mutable_grad() = torch::Tensor();  // the sync gives it a new home
  };
  bool changed = false;
  GRANARY_RETURN_IF_ERROR(CatchTorch("--prune", [&] {
    for (size_t i = 0; i < groups.size(); ++i) {
      const int64_t now = groups[i].channels();
      if (target[i] >= now) continue;
      KeepChannels(groups[i], MostImportant(importance[i], target[i]), follow);
      last_change_ += (changed ? ", " : "") + groups[i].name + " " + std::to_string(now) + "->" +
                      std::to_string(target[i]);
      changed = true;
    }
  }));
  return changed;
}

std::string Pruner::ScheduleNote(int epochs_done, const TrainConfig& c) const {
  const std::string prune = "--prune " + NumberText(c.shrink.prune);
  if (!RemovesAny()) {
    return prune + " removes no channel: every layer of " + c.model.name + " keeps all its channels (kept in "
           "multiples of " + std::to_string(kChannelMultiple) + ")";
  }
  if (epochs_done >= last_epoch()) {
    return prune + ": resumed after epoch " + std::to_string(epochs_done) + ", past --prune-epochs " +
           std::to_string(first_epoch()) + "-" + std::to_string(last_epoch()) + ": this run prunes nothing more";
  }
  if (last_epoch() == c.optim.epochs) {
    return "--prune: the last prune follows the last epoch (" + std::to_string(c.optim.epochs) +
           "): the saved model has no epoch to recover its accuracy in, and the last test_acc is the pruned "
           "model's; end --prune-epochs before --epochs to fine-tune it";
  }
  return "";
}

namespace {

class PruneHook : public RunHook {
 public:
  explicit PruneHook(std::unique_ptr<Pruner> pruner) : pruner_(std::move(pruner)) {}

  Status BeforeRun(RankState& state) override {
    if (state.rank != 0) return Status::OK();
    const std::string note = pruner_->ScheduleNote(static_cast<int>(state.start.epoch), state.run.config);
    if (!note.empty()) state.observer.Note(note);
    return Status::OK();
  }

  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport* report) override {
    GRANARY_ASSIGN_OR_RETURN(bool changed, pruner_->AfterEpoch(epoch.epoch + 1, state.dp.comm.get(), state.optimizer));
    if (!changed) return Flow::kGoOn;
    const TrainConfig& c = state.run.config;
    GRANARY_RETURN_IF_ERROR(state.dp.Reattach(c, *state.model.net));
    state.dp.Parts(/*apart=*/c.data.synthetic, &state.parts);
    report->Set("pruned", pruner_->last_change());
    // After the epoch's line; its evaluation, if the run evaluates, follows this hook.
    report->lines_after.push_back("epoch " + std::to_string(report->epoch) + "/" + std::to_string(c.optim.epochs) +
                                  "  pruned " + pruner_->last_change() + ": " + std::to_string(report->parameters) +
                                  " -> " + std::to_string(ParameterCount(*state.model.net)) + " parameters" +
                                  (c.data.eval_split.empty() ? "" : " (test_acc is after the prune)"));
    return Flow::kGoOn;
  }

 private:
  std::unique_ptr<Pruner> pruner_;
};

class PruneFeature : public Feature {
 public:
  Status Validate(const TrainConfig& c) const override {
    const ShrinkConfig& shrink = c.shrink;
    if (shrink.prune != 0 && !(shrink.prune > 0 && shrink.prune < 1)) {
      return OutOfRange("--prune", NumberText(shrink.prune), "the fraction of channels removed, must be in (0, 1)");
    }
    if (shrink.prune != 0 && IsModelFile(c.model.name)) {
      return Status::InvalidArgument("--prune: --model " + c.model.name +
                                     " cannot be pruned: granary prunes its built-in models (mlp, convnet, resnet, "
                                     "mobilenet), whose channels and residual joins it knows");
    }
    if (!shrink.prune_epochs.empty()) {
      if (shrink.prune == 0) return Status::InvalidArgument("--prune-epochs needs --prune");
      const auto [first, last] = PruneEpochs(shrink, c.optim.epochs);
      if (first < 1 || last < first || last > c.optim.epochs) {
        return OutOfRange("--prune-epochs", shrink.prune_epochs,
                          "must be A-B with 1 <= A <= B <= --epochs " + std::to_string(c.optim.epochs));
      }
    }
    return Status::OK();
  }

  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    const TrainConfig& c = state.run.config;
    if (c.shrink.prune == 0) return std::unique_ptr<RunHook>();
    // The schedule counts from the model as --model builds it: the rank's
    // own model, unless a resumed checkpoint may have pruned it already (then
    // one is built from the spec, only to count its channels).
    std::vector<int64_t> at_build;
    if (state.start.resumed) {
      GRANARY_ASSIGN_OR_RETURN(const std::shared_ptr<Classifier> built, CreateModel(state.model.spec));
      at_build = ChannelCounts(*built);
    } else {
      at_build = ChannelCounts(*state.model.net);
    }
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<Pruner> pruner, Pruner::Create(c, *state.model.net, std::move(at_build)));
    return std::unique_ptr<RunHook>(std::make_unique<PruneHook>(std::move(pruner)));
  }
};

}  // namespace

std::unique_ptr<Feature> MakePruneFeature() { return std::make_unique<PruneFeature>(); }

Status CheckPrunable(const TrainConfig& c, const Classifier& net) {
  if (c.shrink.prune == 0 || dynamic_cast<const Prunable*>(&net) != nullptr) return Status::OK();
  return Status::InvalidArgument("--prune: model " + c.model.name +
                                 " cannot be pruned (granary prunes its built-in mlp, convnet, resnet and mobilenet; "
                                 "a TorchScript model's channels and joins are not known to it)");
}

}  // namespace granary
