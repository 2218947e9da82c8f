// train --prune F --prune-epochs A-B: at the end of each epoch e of A..B,
// every channel group of the model (trainer/models/prune.h) shrinks to
// n x (1 - F x (e - A + 1) / (B - A + 1)) of its n channels at build, rounded
// to a multiple of kChannelMultiple (16; a group of fewer is left whole),
// the least important going (ChannelImportance of rank 0's
// model, broadcast: every rank removes the same channels). The optimizer's
// state shrinks with its parameters; the caller re-attaches the gradient
// sync (DataParallel::Reattach). Training thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/comm/comm.h"
#include "trainer/config/config.h"
#include "trainer/features/feature.h"
#include "trainer/models/registry.h"

namespace granary {

// oneDNN's convolution kernels on this project's CPUs run 8- and 12-channel
// layers slower than 16-channel ones (bf16 and channels-last most), and
// Debian's oneDNN 2.6 crashes in the backward of a stride-2 1x1 conv in
// channels-last fp32 that reads fewer than 12 channels of 64 x 64 maps
// (docs/CPU_TRAINING.md, section 8): pruned layers keep multiples of 16.
inline constexpr int64_t kChannelMultiple = 16;

class Pruner {
 public:
  // Null without --prune. `channels_at_build`: each group's channels before
  // any pruning (a resumed model may already be smaller).
  static StatusOr<std::unique_ptr<Pruner>> Create(const TrainConfig& config, Classifier& net,
                                                  std::vector<int64_t> channels_at_build);

  // Channels each group keeps after epoch `epoch` (1-based) by the schedule.
  std::vector<int64_t> TargetAfter(int epoch) const;

  // The end of epoch `epoch`: prunes what the schedule asks for. True if the
  // model changed (the sync must be re-attached). `comm` null: one rank.
  StatusOr<bool> AfterEpoch(int epoch, Comm* comm, torch::optim::Optimizer& optimizer);

  // "conv1 32->16, conv2 64->32": what the last AfterEpoch removed.
  const std::string& last_change() const { return last_change_; }
  // The schedule's last epoch (1-based): no prune follows a later one.
  int first_epoch() const { return epochs_.first; }
  int last_epoch() const { return epochs_.second; }
  // Whether the whole schedule removes any channel (a tiny --prune rounds
  // every layer back to its own count).
  bool RemovesAny() const { return TargetAfter(epochs_.second) != at_build_; }
  // What of the schedule will not happen as asked, for a run that has done
  // `epochs_done` of config's epochs, as a note; "" if it will. A last prune
  // after the last epoch leaves the model no epoch to recover in (the run's
  // figures are still the pruned model's); a fraction too small for any
  // layer, or a resume past the schedule, removes nothing.
  std::string ScheduleNote(int epochs_done, const TrainConfig& config) const;

 private:
  Pruner(Classifier& net, std::vector<int64_t> at_build, double fraction, std::pair<int, int> epochs)
      : net_(net), at_build_(std::move(at_build)), fraction_(fraction), epochs_(epochs) {}

  Classifier& net_;
  std::vector<int64_t> at_build_;
  double fraction_;
  std::pair<int, int> epochs_;
  std::string last_change_;
};

// The feature: the pruner as a hook of every rank. Before the run, rank 0
// notes what of the schedule will not happen as asked; after each epoch
// (before its evaluation and checkpoint, so every figure is the pruned
// model's) it prunes, re-attaches the gradient sync to the new shapes and
// tells the epoch's report what went (a collective).
std::unique_ptr<Feature> MakePruneFeature();

// OK if `config` prunes nothing or its model can be pruned; InvalidArgument
// naming the model otherwise (a TorchScript model: its layers' channels are
// not known to granary). Checked before any rank starts.
Status CheckPrunable(const TrainConfig& config, const Classifier& net);

}  // namespace granary
