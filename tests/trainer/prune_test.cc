// Structured pruning: removing channels whose output is exactly zero leaves
// every built-in model's logits unchanged (so each group's producers,
// BatchNorms, depthwise convs, residual joins and consumers, flattened ones
// included, are cut at the same indices); the pruned model is smaller, trains
// (the optimizer's state follows the shapes) and is written as TorchScript.
#include "trainer/models/prune.h"

#include <gtest/gtest.h>

#include "tests/trainer/models_util.h"
#include "trainer/features/prune/pruner.h"
#include "trainer/models/script.h"

namespace granary {
namespace {

using testing::Batched;
using testing::ParameterCount;

// Makes channel `c` of `g` output exactly zero: its BatchNorms' scale and
// shift (a channel then is zero after them, whatever the filters), or else
// its producers' filter and bias.
void Silence(ChannelGroup& g, int64_t c) {
  torch::NoGradGuard no_grad;
  if (!g.norms.empty()) {
    for (auto& bn : g.norms) {
      bn->weight[c].zero_();
      bn->bias[c].zero_();
    }
    return;
  }
  for (auto& conv : g.conv_producers) {
    conv->weight[c].zero_();
    if (conv->bias.defined()) conv->bias[c].zero_();
  }
  for (auto& fc : g.linear_producers) {
    fc->weight[c].zero_();
    if (fc->bias.defined()) fc->bias[c].zero_();
  }
}

TEST(Prune, RemovingSilencedChannelsLeavesEveryModelsLogitsUnchanged) {
  const std::pair<const char*, Shape> cases[] = {
      {"mlp", {6}}, {"convnet", {1, 12, 12}}, {"resnet", {3, 16, 16}}, {"mobilenet", {3, 16, 16}}};
  for (const auto& [name, input] : cases) {
    SCOPED_TRACE(name);
    torch::manual_seed(5);
    ModelSpec spec{name, input, 5, 0.0};
    std::shared_ptr<Classifier> net = CreateModel(spec).value();
    net->train();  // BatchNorm statistics away from 0 and 1
    for (int i = 0; i < 3; ++i) net->forward(torch::randn(Batched(8, input)) * 2 + 0.5);
    net->eval();
    auto& prunable = dynamic_cast<Prunable&>(*net);
    std::vector<ChannelGroup> groups = prunable.ChannelGroups();
    ASSERT_FALSE(groups.empty());
    // Silence channels 0 and 2 of every group: the logits already are the pruned model's.
    for (ChannelGroup& g : groups) {
      Silence(g, 0);
      Silence(g, 2);
    }
    const torch::Tensor x = torch::randn(Batched(4, input));
    torch::NoGradGuard no_grad;
    const torch::Tensor want = net->forward(x);
    const int64_t before = ParameterCount(*net);
    int shrunk_tensors = 0;
    for (ChannelGroup& g : groups) {
      std::vector<int64_t> keep;
      for (int64_t c = 0; c < g.channels(); ++c) {
        if (c != 0 && c != 2) keep.push_back(c);
      }
      KeepChannels(g, torch::tensor(keep),
                   [&](const torch::Tensor&, int64_t, const torch::Tensor&) { ++shrunk_tensors; });
    }
    EXPECT_GT(shrunk_tensors, 0);
    EXPECT_LT(ParameterCount(*net), before);
    // Every group is 2 channels smaller, as the model now lists them.
    std::vector<ChannelGroup> after = prunable.ChannelGroups();
    ASSERT_EQ(after.size(), groups.size());
    const torch::Tensor got = net->forward(x);
    EXPECT_TRUE(torch::allclose(got, want, 1e-4, 1e-5)) << got << want;
    // And written as TorchScript (options follow the tensors: a depthwise conv's groups) with the same logits.
    StatusOr<torch::jit::Module> script = ToTorchScript(*net);
    ASSERT_TRUE(script.ok()) << script.status().ToString();
    EXPECT_TRUE(torch::allclose(script->forward({x}).toTensor(), want, 1e-4, 1e-5));
  }
}

TEST(Prune, TheScheduleRemovesTheFractionGraduallyAndTheOptimizerFollows) {
  TrainConfig c;
  c.optim.epochs = 6;
  c.shrink.prune = 0.5;
  c.shrink.prune_epochs = "2-3";
  torch::manual_seed(1);
  std::shared_ptr<Classifier> net = CreateModel({"convnet", {1, 8, 8}, 3, 0.0}).value();
  const std::vector<int64_t> full = ChannelCounts(*net);
  ASSERT_EQ(full, (std::vector<int64_t>{32, 64, 1024}));
  StatusOr<std::unique_ptr<Pruner>> pruner = Pruner::Create(c, *net, full);
  ASSERT_TRUE(pruner.ok() && pruner.value());
  EXPECT_EQ(pruner.value()->TargetAfter(1), full);
  // Multiples of 16 (kChannelMultiple): 24 rounds to 32.
  EXPECT_EQ(pruner.value()->TargetAfter(2), (std::vector<int64_t>{32, 48, 768}));
  EXPECT_EQ(pruner.value()->TargetAfter(3), (std::vector<int64_t>{16, 32, 512}));
  EXPECT_EQ(pruner.value()->TargetAfter(6), (std::vector<int64_t>{16, 32, 512}));

  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  const auto step = [&] {
    adam.zero_grad();
    torch::nll_loss(torch::log_softmax(net->forward(torch::randn({4, 1, 8, 8})), 1), torch::tensor({0, 1, 2, 0}))
        .backward();
    adam.step();
  };
  step();
  for (int epoch = 1; epoch <= 4; ++epoch) {
    StatusOr<bool> changed = pruner.value()->AfterEpoch(epoch, nullptr, adam);
    ASSERT_TRUE(changed.ok()) << changed.status().ToString();
    EXPECT_EQ(changed.value(), epoch == 2 || epoch == 3) << epoch;
    EXPECT_EQ(pruner.value()->last_change(), epoch == 2   ? "conv2 64->48, fc1 1024->768"
                                             : epoch == 3 ? "conv1 32->16, conv2 48->32, fc1 768->512"
                                                          : "");
    EXPECT_EQ(ChannelCounts(*net), pruner.value()->TargetAfter(epoch));
    for (const auto& p : net->parameters()) {  // the state has the parameters' shapes; a step runs
      const auto& s = static_cast<torch::optim::AdamParamState&>(
          *adam.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
      EXPECT_EQ(s.exp_avg().sizes(), p.sizes());
      EXPECT_EQ(s.exp_avg_sq().sizes(), p.sizes());
    }
    step();
  }
  EXPECT_EQ(pruner.value()->last_change(), "");
}

}  // namespace
}  // namespace granary
