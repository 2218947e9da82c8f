// Structured pruning of the built-in models (train --prune): whole channels
// (conv filters, hidden units) removed, the layers physically shrunk so the
// pruned model computes less. A model says which channels go together
// (ChannelGroup: the layers that make a channel and the ones that read it,
// across BatchNorms, depthwise convs and residual joins); KeepChannels
// shrinks every tensor of a group alike. Training thread only.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace granary {

class Classifier;

// Channels that are pruned together: removing channel c removes filter c of
// every producer (and its BatchNorm entries) and input channel c of every
// consumer. A depthwise conv passes its channels through: it shrinks along
// both. Module handles share their module, so a group edits the model.
struct ChannelGroup {
  std::string name;                               // the first producer's path, for reports
  std::vector<torch::nn::Conv2d> conv_producers;  // weight and bias along dimension 0
  std::vector<torch::nn::Linear> linear_producers;
  std::vector<torch::nn::BatchNorm2d> norms;  // after a producer: weight, bias, running mean and variance
  std::vector<torch::nn::Conv2d> depthwise;   // groups == channels: weight along dimension 0
  std::vector<torch::nn::Conv2d> conv_consumers;  // weight along dimension 1
  // Linear layers reading the channels flattened (C x H x W): `span`
  // columns per channel (H x W; 1 for a vector).
  std::vector<std::pair<torch::nn::Linear, int64_t>> linear_consumers;

  int64_t channels() const;
};

// A model that can be pruned lists its groups, in a fixed order (the same
// on every rank and after a resume).
class Prunable {
 public:
  virtual ~Prunable() = default;
  virtual std::vector<ChannelGroup> ChannelGroups() = 0;
};

// A block of a StagedNet (trainer/models/staged.h) says how its channels
// join the net's: which of its layers read its input channels, the groups
// inside it, and whether its output channels are its input's (an identity
// residual join) or made by its own producers.
class PrunableBlock {
 public:
  virtual ~PrunableBlock() = default;
  virtual void AddInputReaders(ChannelGroup* input) = 0;
  virtual std::vector<ChannelGroup> InnerGroups(const std::string& path) = 0;
  virtual bool KeepsInputChannels() const = 0;                   // identity join: output = input channels
  virtual void AddOutputMakers(ChannelGroup* output) = 0;        // also when it keeps them (they add in)
};

// How much each channel of `g` matters (float64, one value per channel):
// where BatchNorms follow the producers, the sum of their |scale| (gamma /
// sqrt(running var + eps), as network slimming ranks channels: the filter's
// own scale is normalised away); otherwise the L1 norm of each producer's
// filter or unit weights, summed.
torch::Tensor ChannelImportance(const ChannelGroup& g);

// `t`'s entries `keep` along `dim`, in `t`'s memory format (channels-last
// weights stay channels-last); `t` itself if undefined or without `dim`.
torch::Tensor KeptEntries(const torch::Tensor& t, int64_t dim, const torch::Tensor& keep);

// Called for each tensor a pruning shrinks, with the indices kept along
// `dim`, before it is replaced (the optimizer's state follows it there).
using ShrinkHook = std::function<void(const torch::Tensor& param, int64_t dim, const torch::Tensor& keep)>;

// Keeps channels `keep` (sorted int64 indices) of `g`: every tensor is
// replaced in place (Tensor::set_data: the same parameter objects, so an
// optimizer's and the sync's references stay), layer options follow.
// `on_parameter` is called for each trainable tensor before it shrinks.
void KeepChannels(ChannelGroup& g, const torch::Tensor& keep, const ShrinkHook& on_parameter);

// Sets the layer options of `g` (channel counts, a depthwise conv's groups)
// to what its tensors hold: after a checkpoint of a pruned model was loaded
// into a full-size one (loading takes the saved shapes).
void MatchOptionsToTensors(ChannelGroup& g);

// Each group's channels of `net` now; empty if it cannot be pruned.
std::vector<int64_t> ChannelCounts(Classifier& net);

// After saved weights of a pruned model were loaded into a full-size one
// (loading takes the saved shapes): every group's options follow its
// tensors (MatchOptionsToTensors); nothing for a model that cannot be pruned.
void MatchLayersToTensors(Classifier& net);

}  // namespace granary
