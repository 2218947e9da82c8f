#include "trainer/models/prune.h"

#include "trainer/models/registry.h"

namespace granary {
namespace {

// `t` replaced, in place, by its entries `keep` along `dim`.
void Shrink(const torch::Tensor& t, int64_t dim, const torch::Tensor& keep) {
  if (t.defined()) t.set_data(KeptEntries(t, dim, keep));
}

void ShrinkParameter(const torch::Tensor& p, int64_t dim, const torch::Tensor& keep, const ShrinkHook& hook) {
  if (!p.defined()) return;
  hook(p, dim, keep);
  Shrink(p, dim, keep);
}

// Columns of a flattened C x H x W input that channels `keep` cover.
torch::Tensor Columns(const torch::Tensor& keep, int64_t span) {
  if (span == 1) return keep;
  return (keep.unsqueeze(1) * span + torch::arange(span, keep.options()).unsqueeze(0)).flatten();
}

}  // namespace

torch::Tensor KeptEntries(const torch::Tensor& t, int64_t dim, const torch::Tensor& keep) {
  if (!t.defined() || t.dim() <= dim) return t;
  const auto format = t.dim() == 4 ? t.suggest_memory_format() : at::MemoryFormat::Contiguous;
  return t.index_select(dim, keep).contiguous(format);
}

int64_t ChannelGroup::channels() const {
  if (!conv_producers.empty()) return conv_producers.front()->weight.size(0);
  if (!linear_producers.empty()) return linear_producers.front()->weight.size(0);
  if (!depthwise.empty()) return depthwise.front()->weight.size(0);
  return 0;
}

torch::Tensor ChannelImportance(const ChannelGroup& g) {
  torch::NoGradGuard no_grad;
  torch::Tensor importance = torch::zeros({g.channels()}, torch::kFloat64);
  if (!g.norms.empty()) {
    for (const auto& bn : g.norms) {
      importance += (bn->weight.to(torch::kFloat64).abs() /
                     (bn->running_var.to(torch::kFloat64) + bn->options.eps()).sqrt());
    }
    return importance;
  }
  for (const auto& conv : g.conv_producers) importance += conv->weight.to(torch::kFloat64).abs().flatten(1).sum(1);
  for (const auto& fc : g.linear_producers) importance += fc->weight.to(torch::kFloat64).abs().sum(1);
  return importance;
}

void KeepChannels(ChannelGroup& g, const torch::Tensor& keep, const ShrinkHook& on_parameter) {
  torch::NoGradGuard no_grad;
  for (auto& conv : g.conv_producers) {
    ShrinkParameter(conv->weight, 0, keep, on_parameter);
    ShrinkParameter(conv->bias, 0, keep, on_parameter);
  }
  for (auto& fc : g.linear_producers) {
    ShrinkParameter(fc->weight, 0, keep, on_parameter);
    ShrinkParameter(fc->bias, 0, keep, on_parameter);
  }
  for (auto& bn : g.norms) {
    ShrinkParameter(bn->weight, 0, keep, on_parameter);
    ShrinkParameter(bn->bias, 0, keep, on_parameter);
    Shrink(bn->running_mean, 0, keep);
    Shrink(bn->running_var, 0, keep);
  }
  for (auto& conv : g.depthwise) {
    ShrinkParameter(conv->weight, 0, keep, on_parameter);
    ShrinkParameter(conv->bias, 0, keep, on_parameter);
  }
  for (auto& conv : g.conv_consumers) ShrinkParameter(conv->weight, 1, keep, on_parameter);
  for (auto& [fc, span] : g.linear_consumers) ShrinkParameter(fc->weight, 1, Columns(keep, span), on_parameter);
  MatchOptionsToTensors(g);
}

void MatchOptionsToTensors(ChannelGroup& g) {
  for (auto& conv : g.conv_producers) conv->options.out_channels(conv->weight.size(0));
  for (auto& fc : g.linear_producers) fc->options.out_features(fc->weight.size(0));
  for (auto& bn : g.norms) bn->options.num_features(bn->running_mean.size(0));
  for (auto& conv : g.depthwise) {
    const int64_t n = conv->weight.size(0);
    conv->options.in_channels(n).out_channels(n).groups(n);
  }
  for (auto& conv : g.conv_consumers) conv->options.in_channels(conv->weight.size(1));
  for (auto& [fc, span] : g.linear_consumers) fc->options.in_features(fc->weight.size(1));
}

std::vector<int64_t> ChannelCounts(Classifier& net) {
  std::vector<int64_t> out;
  if (auto* prunable = dynamic_cast<Prunable*>(&net)) {
    for (const ChannelGroup& g : prunable->ChannelGroups()) out.push_back(g.channels());
  }
  return out;
}

void MatchLayersToTensors(Classifier& net) {
  if (auto* prunable = dynamic_cast<Prunable*>(&net)) {
    for (ChannelGroup& g : prunable->ChannelGroups()) MatchOptionsToTensors(g);
  }
}

}  // namespace granary
