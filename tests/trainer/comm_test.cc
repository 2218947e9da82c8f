#include "trainer/comm/comm.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tests/trainer/two_ranks.h"
#include "trainer/comm/after_backward_sync.h"
#include "trainer/comm/bucketed_sync.h"
#include "trainer/comm/stopped.h"
#include "trainer/launch/job_place.h"

namespace granary {
namespace {

// Whether MPI_Init would join a job is the environment's question alone: a
// test gives the environment, no setenv.
TEST(Comm, AnMpiJobIsKnownByItsLaunchersVariables) {
  EXPECT_FALSE(StartedByMpiLauncher(Environment()));
  EXPECT_FALSE(StartedByMpiLauncher(Environment().With("SLURM_PROCID", "0")));  // a batch script, not a task
  EXPECT_TRUE(StartedByMpiLauncher(Environment().With("OMPI_COMM_WORLD_SIZE", "2")));
  EXPECT_TRUE(StartedByMpiLauncher(Environment().With("PMIX_RANK", "1")));
  EXPECT_TRUE(StartedByMpiLauncher(Environment().With("PMI_RANK", "0")));
  // srun's tasks are ranks of one job with PMI or without it (srun --mpi=none: no MPI job);
  // a batch script and a step of one task (srun --pty bash) are not.
  const Environment task = Environment().With("SLURM_PROCID", "1").With("SLURM_STEP_NUM_TASKS", "2");
  EXPECT_TRUE(StartedBySrun(task));
  EXPECT_TRUE(StartedAsJobRank(task));
  EXPECT_FALSE(StartedByMpiLauncher(task));
  EXPECT_FALSE(StartedAsJobRank(Environment().With("SLURM_PROCID", "0").With("SLURM_NTASKS", "2")));
  EXPECT_FALSE(StartedAsJobRank(Environment().With("SLURM_PROCID", "0").With("SLURM_STEP_NUM_TASKS", "1")));
  EXPECT_TRUE(StartedAsJobRank(Environment().With("PMIX_RANK", "1")));
}

// A rank bound by its launcher: OpenMPI's word, or srun's when the rank got
// fewer CPUs than the node has (a cluster without task/affinity binds none).
TEST(Comm, ARankIsBoundOnlyWhereItsLauncherBoundIt) {
  EXPECT_FALSE(BoundByJobLauncher(Environment(), 2));
  EXPECT_TRUE(BoundByJobLauncher(Environment().With("OMPI_MCA_orte_bound_at_launch", "1"), 1));
  const Environment cores = Environment().With("SLURM_CPU_BIND_TYPE", "cores").With("SLURM_CPUS_ON_NODE", "4");
  EXPECT_TRUE(BoundByJobLauncher(cores, 2));
  EXPECT_FALSE(BoundByJobLauncher(cores, 4));
  EXPECT_FALSE(BoundByJobLauncher(Environment().With("SLURM_CPU_BIND_TYPE", "none"), 1));
}

// Across nodes, rank 0's node comes from the job when no --master-addr is
// given: MASTER_ADDR as a batch script exports it, else the first node of
// srun's step in Slurm's hostlist form; a MASTER_PORT that is no port is named.
TEST(Comm, TheRendezvousNodeAndPortComeFromTheJobsVariables) {
  EXPECT_EQ(FirstHostOf("node[03-05,9],gpu1"), "node03");
  EXPECT_EQ(FirstHostOf("rack[2-3]-n[01-04]"), "rack2-n01");
  EXPECT_EQ(FirstHostOf("login1,login2"), "login1");
  EXPECT_EQ(FirstHostOf("c[7,2]"), "c7");
  EXPECT_EQ(FirstHostOf("c[1-4"), "");
  EXPECT_EQ(FirstHostOf("c[]"), "");
  EXPECT_EQ(FirstHostOf(""), "");

  const Environment task = Environment()
                               .With("SLURM_PROCID", "1")
                               .With("SLURM_STEP_NUM_TASKS", "4")
                               .With("SLURM_JOB_ID", "4711")
                               .With("SLURM_STEP_ID", "0")
                               .With("SLURM_JOB_NODELIST", "cn[01-08]")
                               .With("SLURM_STEP_NODELIST", "cn[05-06]");
  std::string from;
  EXPECT_EQ(JobMasterAddr(task, &from), "cn05");
  EXPECT_EQ(from, "the first node of SLURM_STEP_NODELIST");
  EXPECT_EQ(JobMasterAddr(task.With("MASTER_ADDR", "10.0.0.7"), &from), "10.0.0.7");
  EXPECT_EQ(from, "MASTER_ADDR");
  // A batch script's environment (no step of several tasks) names no rendezvous.
  from.clear();
  EXPECT_EQ(JobMasterAddr(Environment().With("SLURM_PROCID", "0").With("SLURM_JOB_NODELIST", "cn[01-02]"), &from), "");
  EXPECT_EQ(from, "");

  EXPECT_EQ(JobMasterPort(task).value(), PortFromJobId(task));
  EXPECT_GE(PortFromJobId(task), 20000);
  EXPECT_EQ(JobMasterPort(task.With("MASTER_PORT", "29500")).value(), 29500);
  for (const char* bad : {"abc", "0", "70000", ""}) {
    StatusOr<int> port = JobMasterPort(task.With("MASTER_PORT", bad));
    ASSERT_FALSE(port.ok()) << bad;
    EXPECT_EQ(port.status().message(), std::string("MASTER_PORT=") + bad + ": not a port (1..65535)");
  }
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

// BatchNorm's buffers: float statistics of several shapes and an int64
// count, broadcast together (packed per dtype), each back in its own tensor.
TEST(Comm, BroadcastOfMixedDtypesAndShapesRestoresEachTensor) {
  std::vector<std::vector<torch::Tensor>> got(2);
  OnTwoRanks([&](Comm& comm) {
    const float r = static_cast<float>(comm.rank());
    std::vector<torch::Tensor> t = {torch::arange(6, torch::kFloat32).view({2, 3}) + r * 100,
                                    torch::full({}, 5 + comm.rank(), torch::kInt64),
                                    torch::full({4}, 1 + r)};
    GRANARY_RETURN_IF_ERROR(comm.Broadcast(t));
    got[comm.rank()] = t;
    return comm.Barrier();
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), 3u);
    EXPECT_TRUE(torch::equal(got[r][0], torch::arange(6, torch::kFloat32).view({2, 3}))) << r;
    EXPECT_TRUE(torch::equal(got[r][1], torch::full({}, 5, torch::kInt64))) << r;
    EXPECT_TRUE(torch::equal(got[r][2], torch::full({4}, 1.0f))) << r;
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

// Rank 1's gradients over three steps of `make_net()` on two ranks (each its
// own data), synced after backward (bucket_bytes 0) or in buckets of
// `bucket_bytes` after a first of `first_bucket_bytes`; `check(sync, net)`,
// if given, looks at the BucketedSync once attached.
using BucketCheck = std::function<void(BucketedSync&, torch::nn::Sequential&)>;
template <typename MakeNet>
std::vector<torch::Tensor> RankOneGradients(MakeNet make_net, size_t bucket_bytes = 0, size_t first_bucket_bytes = 0,
                                            const BucketCheck& check = nullptr) {
  std::vector<torch::Tensor> got;
  OnTwoRanks([&](Comm& comm) {
    // The ranks are threads sharing one RNG: weights and data are made
    // without it, so both methods see the same numbers.
    torch::nn::Sequential net = make_net();
    {
      torch::NoGradGuard no_grad;
      double k = 1;
      for (auto& p : net->parameters()) {
        p.copy_(torch::sin(torch::arange(p.numel(), torch::kFloat32) * (0.37 * k++)).view(p.sizes()) * 0.3);
      }
    }
    std::unique_ptr<GradientSync> sync;
    if (bucket_bytes == 0) {
      sync = std::make_unique<AfterBackwardSync>(comm);
    } else {
      sync = std::make_unique<BucketedSync>(comm, bucket_bytes, first_bucket_bytes);
    }
    GRANARY_RETURN_IF_ERROR(sync->Attach(net->parameters()));
    if (check) check(static_cast<BucketedSync&>(*sync), net);
    const int64_t inputs = net->parameters().front().size(1);
    for (int step = 0; step < 3; ++step) {
      for (auto& p : net->parameters()) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
      torch::Tensor x = torch::cos(torch::arange(5 * inputs, torch::kFloat32).view({5, inputs}) *
                                   (0.1 + 0.05 * comm.rank() + 0.01 * step));
      sync->BeginStep();
      net->forward(x).pow(2).sum().backward();
      GRANARY_RETURN_IF_ERROR(sync->FinishStep());
      if (comm.rank() == 1) {
        for (auto& p : net->parameters()) got.push_back(p.grad().clone());
      }
    }
    return Status::OK();
  });
  return got;
}

void ExpectEqualTensors(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
}

// The same model and data on each rank, through both methods: the bucketed,
// overlapped sync gives exactly the gradients of the flat one, over several
// steps (buckets reused), with buckets small enough to make several.
TEST(BucketedSync, GivesExactlyTheFlatAllReducesMeans) {
  auto make_net = [] {
    return torch::nn::Sequential(torch::nn::Linear(8, 64), torch::nn::ReLU(), torch::nn::Linear(64, 32),
                                 torch::nn::ReLU(), torch::nn::Linear(32, 3));
  };
  const std::vector<torch::Tensor> flat = RankOneGradients(make_net);
  const std::vector<torch::Tensor> bucketed = RankOneGradients(
      make_net, /*bucket_bytes=*/4096, /*first_bucket_bytes=*/512, [](BucketedSync& sync, torch::nn::Sequential& net) {
        EXPECT_GT(sync.bucket_params().size(), 2u);
        EXPECT_EQ(sync.bucket_params().front().front(), net->parameters().size() - 1);  // last first
      });
  ExpectEqualTensors(flat, bucketed);
}

// The kernel's transparent-huge-page mode ("always", "madvise" or
// "never"), from the bracketed word of its settings file; empty if unknown.
std::string HugePageMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

// Whether the kernel may back the mapping holding `address` with huge pages
// (/proc/self/smaps' THPeligible), or -1 if that mapping is not found.
int HugePageEligible(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &start, &end) == 2) {  // a mapping's first line
      inside = start <= at && at < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

// A bucket of at least 2 MiB lies on memory the kernel may back with huge
// pages (the MPI transport's single-copy reads pin it page by page), and
// still sums exactly; the small first bucket is ordinary memory.
TEST(BucketedSync, LargeBucketsAskForHugePagesAndStayExact) {
  auto make_net = [] {
    return torch::nn::Sequential(torch::nn::Linear(1024, 768), torch::nn::ReLU(), torch::nn::Linear(768, 4));
  };
  const std::vector<torch::Tensor> flat = RankOneGradients(make_net);
  const std::string mode = HugePageMode();
  const std::vector<torch::Tensor> bucketed = RankOneGradients(
      make_net, /*bucket_bytes=*/size_t{25} << 20, /*first_bucket_bytes=*/size_t{1} << 10,
      [&](BucketedSync& sync, torch::nn::Sequential& net) {
        ASSERT_EQ(sync.bucket_params().size(), 2u);  // the last layer, then the 3 MiB first one
        const void* large = net->parameters().front().grad().data_ptr();
        const void* small = net->parameters().back().grad().data_ptr();
        if (mode == "always" || mode == "madvise") {
          EXPECT_EQ(HugePageEligible(large), 1);
        }
        if (mode == "madvise") {
          EXPECT_EQ(HugePageEligible(small), 0);
        }
      });
  ExpectEqualTensors(flat, bucketed);
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "huge pages are off here (" << mode << "): sums checked";
}

// One machine's rendezvous (trainer/launch/launch.h): a FileStore on a memfd the
// ranks reach as /proc/self/fd/N, no port.
TEST(Comm, RanksMeetThroughAFileStoreOnAMemfd) {
  const int fd = ::memfd_create("comm-test-rendezvous", 0);
  ASSERT_GE(fd, 0);
  OnTwoRanks(
      [](Comm& comm) {
        std::vector<torch::Tensor> t{torch::full({3}, static_cast<float>(comm.rank() + 1))};
        GRANARY_RETURN_IF_ERROR(comm.AllReduceMean(t));
        EXPECT_TRUE(torch::allclose(t[0], torch::full({3}, 1.5f))) << t[0];
        return Status::OK();
      },
      "/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
}

// A timeout soon after this process went on from a stop is said to be the
// stop's. The SIGCONT may not have been handled yet when the thread that
// waited finds its wait over (the thread the kernel gave it to waits for a
// CPU on a busy machine): a SIGCONT still pending counts as going on now.
TEST(Comm, ATimeoutJustAfterAStopIsSaidToBeTheStops) {
  const Status timeout = Status::IOError("all-reduce", "Timed out waiting 5000ms for recv operation", 0);
  const Status closed = Status::IOError("all-reduce", "Connection closed by peer", 0);
  EXPECT_EQ(ExplainStopped(timeout, 5).message(), timeout.message());  // never stopped
  NoteContinues();
  sigset_t cont, saved;
  sigemptyset(&cont);
  sigaddset(&cont, SIGCONT);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &cont, &saved), 0);
  ASSERT_EQ(::raise(SIGCONT), 0);  // pending, its handler not run
  const Status pending = ExplainStopped(timeout, 5);
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &saved, nullptr), 0);  // now handled
  const Status handled = ExplainStopped(timeout, 5);
  const std::string said = ": this process was stopped (Ctrl-Z, SIGSTOP, a suspended job) and has just gone on, and a "
                           "stop longer than --timeout 5 s ends the run's collectives: go on from its last checkpoint "
                           "(--resume latest), or give a larger --timeout";
  EXPECT_EQ(pending.message(), timeout.message() + said);
  EXPECT_EQ(pending.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(handled.message(), timeout.message() + said);
  EXPECT_EQ(ExplainStopped(closed, 5).message(), closed.message());  // not a timeout: as it is
  EXPECT_TRUE(ExplainStopped(Status::OK(), 5).ok());
}

TEST(Comm, RejectsBadRanks) {
  CommOptions o;
  o.rank = 2;
  o.world = 2;
  EXPECT_EQ(Comm::Create(o).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace granary
