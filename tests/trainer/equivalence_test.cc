// Data parallelism changes nothing but speed: two ranks each taking half of
// every batch, gradients averaged, move the parameters as one rank taking the
// whole batch does (to float rounding) for every sync method and optimizer,
// with gradient accumulation (only the last micro-batch synchronised) and
// with channels-last weights.
#include <gtest/gtest.h>

#include <string>

#include "tests/trainer/two_ranks.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/loop/step.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"
#include "trainer/optim/optimizer.h"

namespace granary {
namespace {

constexpr int kSteps = 4;
constexpr int64_t kBatch = 8;  // global, per step

struct SyncCase {
  std::string sync;
  std::string optimizer;
  int accum = 1;
  bool channels_last = false;
};

std::string Name(const SyncCase& c) {
  return c.sync + " " + c.optimizer + " accum " + std::to_string(c.accum) + (c.channels_last ? " channels-last" : "");
}

void PrintTo(const SyncCase& c, std::ostream* os) { *os << Name(c); }

OptimConfig Optim(const std::string& name) {
  TrainConfig t;
  t.optim.optimizer = name;
  t.optim.lr = name == "sgd" ? 0.05 : 0.01;
  t.optim.momentum = name == "sgd" ? 0.9 : 0;
  t.optim.nesterov = name == "sgd";
  t.optim.weight_decay = 0.01;
  t.ResolveDefaults();
  return t.optim;
}

// Step `step`'s global batch, deterministic (the ranks are threads sharing one
// RNG, so nothing here draws from it).
torch::Tensor Inputs(int step) {
  return torch::sin(torch::arange(kBatch * 64, torch::kFloat32) * (0.013 * (step + 1))).view({kBatch, 1, 8, 8});
}
torch::Tensor Targets(int step) { return (torch::arange(kBatch, torch::kInt64) * 7 + step) % 10; }

torch::Tensor Loss(Classifier& net, const torch::Tensor& x, const torch::Tensor& y) {
  return torch::nll_loss(torch::log_softmax(net.forward(x), 1), y);
}

std::shared_ptr<Classifier> Net() {
  torch::manual_seed(7);
  return CreateModel({"convnet", {1, 8, 8}, 10, /*dropout=*/0.0}).value();
}

std::vector<torch::Tensor> Cloned(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().contiguous());
  return out;
}

// One rank, the whole batch, plain LibTorch.
std::vector<torch::Tensor> OneRank(const SyncCase& c) {
  std::shared_ptr<Classifier> net = Net();
  auto optimizer = CreateOptimizer(Optim(c.optimizer), net->parameters()).value();
  for (int step = 0; step < kSteps; ++step) {
    optimizer->zero_grad();
    Loss(*net, Inputs(step), Targets(step)).backward();
    optimizer->step();
  }
  return Cloned(net->parameters());
}

// Rank `comm.rank()` of two: rows [rank * half, (rank + 1) * half) of each
// batch, in `c.accum` micro-batches, each step the rank loop's own Step.
Status TwoRanks(Comm& comm, Classifier& net, const SyncCase& c, std::vector<torch::Tensor>* out) {
  ModelConfig mc;
  mc.channels_last = c.channels_last;
  Precision precision = Precision::Create(mc);
  precision.Prepare(net);
  SyncMethod method = SyncMethod::kBucketed;
  EXPECT_TRUE(ParseChoice(c.sync, &method)) << c.sync;
  auto sync = CreateGradientSync(method, /*bucket_bytes=*/64 << 10, comm);
  GRANARY_RETURN_IF_ERROR(sync.status());
  GRANARY_RETURN_IF_ERROR(sync.value()->Attach(net.parameters()));
  const OptimConfig optim = Optim(c.optimizer);
  auto optimizer = CreateOptimizer(optim, net.parameters());
  GRANARY_RETURN_IF_ERROR(optimizer.status());
  StepParts parts;
  parts.net = &net;
  parts.precision = &precision;
  parts.optimizer = optimizer.value().get();
  parts.sync = sync.value().get();
  parts.comm = &comm;
  parts.buffers = net.buffers();
  parts.rank = comm.rank();
  const int64_t half = kBatch / 2, micro = half / c.accum;
  for (int step = 0; step < kSteps; ++step) {
    int64_t m = 0;
    const NextMicroBatch next = [&](MicroBatch* batch) -> StatusOr<bool> {
      const int64_t from = comm.rank() * half + m++ * micro;
      batch->input = Inputs(step).narrow(0, from, micro);
      if (c.channels_last) batch->input = batch->input.contiguous(torch::MemoryFormat::ChannelsLast);
      batch->target = Targets(step).narrow(0, from, micro);
      return true;
    };
    GRANARY_RETURN_IF_ERROR(Step(parts, step, c.accum, optim.lr, next).status());
  }
  *out = Cloned(net.parameters());
  return Status::OK();
}

class Equivalence : public ::testing::TestWithParam<SyncCase> {};

TEST_P(Equivalence, TwoRanksOfHalfBatchesMoveTheParametersAsOneRankOfWholeBatches) {
  const SyncCase& c = GetParam();
  const std::vector<torch::Tensor> want = OneRank(c);
  std::vector<std::shared_ptr<Classifier>> nets = {Net(), Net()};  // made here: the RNG is not shared in flight
  const std::vector<torch::Tensor> initial = Cloned(Net()->parameters());
  std::vector<std::vector<torch::Tensor>> got(2);
  // Adam divides each gradient by its running size, so float rounding in a
  // near-zero gradient moves a weight by up to ~lr x 1e-3; SGD is exact to
  // rounding. Either bound is far below a step (lr), which a wrong average
  // or a rank's wrong rows would show.
  const double atol = c.optimizer == "sgd" ? 1e-5 : 2e-4;
  OnTwoRanks([&](Comm& comm) { return TwoRanks(comm, *nets[comm.rank()], c, &got[comm.rank()]); });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), want.size()) << Name(c);
    for (size_t k = 0; k < want.size(); ++k) {
      // The parameters moved, and to where one rank took them.
      EXPECT_FALSE(torch::allclose(want[k], initial[k])) << Name(c) << " param " << k;
      EXPECT_TRUE(torch::allclose(got[r][k], want[k], /*rtol=*/1e-4, atol))
          << Name(c) << ", rank " << r << ", param " << k << ": max difference "
          << (got[r][k] - want[k]).abs().max().item<float>();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SyncOptimizerAccumLayout, Equivalence,
                         ::testing::Values(SyncCase{"after-backward", "sgd"}, SyncCase{"bucketed", "sgd"},
                                         SyncCase{"bucketed", "adam"}, SyncCase{"after-backward", "adamw"},
                                         SyncCase{"bucketed", "adamw", 2}, SyncCase{"after-backward", "sgd", 2},
                                         SyncCase{"bucketed", "sgd", 1, true}, SyncCase{"bucketed", "adam", 2, true}),
                         [](const ::testing::TestParamInfo<SyncCase>& info) {
                           std::string name = Name(info.param);
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace granary
