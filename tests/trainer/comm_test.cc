#include "trainer/comm.h"

#include <gtest/gtest.h>

#include <thread>

#include "trainer/after_backward_sync.h"
#include "trainer/launch.h"

namespace granary {
namespace {

// Runs `body(comm)` on two ranks (threads of this process) joined over Gloo.
template <typename F>
void OnTwoRanks(F body) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  std::vector<std::thread> ranks;
  std::vector<Status> results(2);
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      CommOptions o;
      o.rank = r;
      o.world = 2;
      o.port = port.value();
      o.timeout_s = 30;
      auto comm = Comm::Create(o);
      if (!comm.ok()) {
        results[r] = comm.status();
        return;
      }
      results[r] = body(*comm.value());
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].ToString();
}

TEST(Comm, AllReduceMeanAveragesEveryTensorOverRanks) {
  std::vector<torch::Tensor> out(2);
  OnTwoRanks([&](Comm& comm) {
    const float r = static_cast<float>(comm.rank());
    // Two tensors of different shapes, packed into one all-reduce.
    std::vector<torch::Tensor> t = {torch::full({3, 2}, 1.0f + r), torch::arange(5, torch::kFloat32) * (r + 1)};
    Status s = comm.AllReduceMean(t);
    if (comm.rank() == 1) out = t;
    return s;
  });
  EXPECT_TRUE(torch::allclose(out[0], torch::full({3, 2}, 1.5f)));
  EXPECT_TRUE(torch::allclose(out[1], torch::arange(5, torch::kFloat32) * 1.5f));
}

TEST(Comm, BroadcastCopiesRankZerosValuesAndSumAdds) {
  std::vector<torch::Tensor> got(2);
  std::vector<torch::Tensor> sums(2);
  OnTwoRanks([&](Comm& comm) {
    std::vector<torch::Tensor> t = {torch::full({4}, static_cast<float>(10 + comm.rank()))};
    GRANARY_RETURN_IF_ERROR(comm.Broadcast(t));
    torch::Tensor s = torch::tensor({1.0 + comm.rank(), 2.0}, torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(s));
    got[comm.rank()] = t[0];
    sums[comm.rank()] = s;
    return comm.Barrier();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(got[r], torch::full({4}, 10.0f))) << r;
    EXPECT_TRUE(torch::equal(sums[r], torch::tensor({3.0, 4.0}, torch::kFloat64))) << r;
  }
}

TEST(AfterBackwardSync, EveryGradientBecomesTheMeanOverRanks) {
  std::vector<torch::Tensor> grads(2);
  OnTwoRanks([&](Comm& comm) {
    // Each rank sees other data, so its gradients differ: w.grad = x.
    torch::Tensor w = torch::zeros({3}, torch::requires_grad());
    torch::Tensor b = torch::zeros({1}, torch::requires_grad());
    AfterBackwardSync sync(comm);
    GRANARY_RETURN_IF_ERROR(sync.Attach({w, b}));
    const float r = static_cast<float>(comm.rank());
    torch::Tensor x = torch::tensor({1.0f + r, 2.0f * (1 + r), -r});
    sync.BeginStep();
    ((w * x).sum() + b.sum() * (r + 1)).backward();
    GRANARY_RETURN_IF_ERROR(sync.FinishStep());
    grads[comm.rank()] = torch::cat({w.grad(), b.grad()});
    return Status::OK();
  });
  const torch::Tensor want = torch::tensor({1.5f, 3.0f, -0.5f, 1.5f});
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(torch::allclose(grads[r], want)) << r << ": " << grads[r];
}

TEST(Comm, RejectsBadRanks) {
  CommOptions o;
  o.rank = 2;
  o.world = 2;
  EXPECT_EQ(Comm::Create(o).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace granary
