// The MPI backend (comm_backend.h). OpenMPI's collectives progress only
// inside MPI calls, and a non-blocking one started by the training thread
// would move only when that thread next called MPI, i.e. after backward. So
// every MPI call of the process is made by one thread of its own, the MPI
// thread (as horovod's background loop does): the training thread queues a
// collective and goes on (a bucket's all-reduce then runs during the rest of
// backward) or waits for it. The thread starts non-blocking collectives
// and tests them (MpiThread::Complete) rather than call blocking ones: a
// blocking collective spins from its start until the slower peer's part
// arrives, and with a rank per core that spinning took the core from the
// rank's own backward. MPI is started on that thread (MPI_Init_thread,
// FUNNELED: only it calls MPI) when the first backend is created, and
// finalized when the backend is destroyed; once per process. Errors return
// (MPI_ERRORS_RETURN) instead of aborting the job; a collective that a lost
// or hung peer never completes ends after --timeout, said in one line.
// Built as a plugin of its own (mpi_plugin.cc opens it) that links OpenMPI.
#include <mpi.h>
#include <pthread.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include "base/mutex.h"
#include "trainer/comm/comm_backend.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// Runs queued operations, in order, on the one thread that calls MPI. Never
// destroyed and never joined: a thread blocked in a collective a lost peer
// never completes must not keep the process from exiting.
class MpiThread {
 public:
  static MpiThread& Get() {
    static MpiThread* const thread = new MpiThread();
    return *thread;
  }

  // `op` runs after every operation queued before it; what it returns (an
  // MPI error code, MPI_SUCCESS) comes back through the future.
  std::shared_future<int> Post(std::function<int()> op) {
    std::promise<int> done;
    std::shared_future<int> result = done.get_future().share();
    {
      MutexLock lock(&mutex_);
      queue_.emplace_back(std::move(op), std::move(done));
    }
    wake_.NotifyOne();
    return result;
  }

  // On the MPI thread: completes a non-blocking collective. While the
  // training thread computes, a test every kNap and a sleep in between, so
  // that waiting for a slower peer leaves the core to backward; once a
  // training thread waits for a result (Waiter), tests without pause.
  int Complete(MPI_Request* request) {
    for (;;) {
      int done = 0;
      if (int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
      if (done) return MPI_SUCCESS;
      if (waiters_.load(std::memory_order_relaxed) > 0) continue;
      MutexLock lock(&mutex_);
      nap_.WaitFor(mutex_, kNap, [&] { return waiters_.load(std::memory_order_relaxed) > 0; });
    }
  }

  // Held by a training thread while it waits for a collective.
  class Waiter {
   public:
    Waiter() : thread_(Get()) {
      thread_.waiters_.fetch_add(1);
      MutexLock lock(&thread_.mutex_);  // not between Complete's test and its sleep
      thread_.nap_.NotifyOne();
    }
    ~Waiter() { thread_.waiters_.fetch_sub(1); }

   private:
    MpiThread& thread_;
  };

 private:
  // The sleep between tests while no one waits: shorter or longer sleeps,
  // or spinning through a collective's first milliseconds, trained no
  // faster (docs/BENCHMARKS.md).
  static constexpr std::chrono::microseconds kNap{200};

  MpiThread() { std::thread([this] { Loop(); }).detach(); }

  void Loop() {
    pthread_setname_np(pthread_self(), "granary-mpi");  // as top -H and gdb show it
    for (;;) {
      std::pair<std::function<int()>, std::promise<int>> next;
      {
        MutexLock lock(&mutex_);
        wake_.Wait(mutex_, [&] {
          mutex_.AssertHeld();
          return !queue_.empty();
        });
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      next.second.set_value(next.first());
    }
  }

  Mutex mutex_;
  CondVar wake_;
  CondVar nap_;
  std::atomic<int> waiters_{0};
  std::deque<std::pair<std::function<int()>, std::promise<int>>> queue_ GRANARY_GUARDED_BY(mutex_);
};

// On the MPI thread: a non-blocking collective that `start` begins, then
// completed by the thread (MpiThread::Complete).
int NonBlocking(const std::function<int(MPI_Request*)>& start) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (int rc = start(&request); rc != MPI_SUCCESS) return rc;
  return MpiThread::Get().Complete(&request);
}

// Element-wise sums of 16-bit floats, which MPI has no type for: the values
// travel as MPI_UINT16_T and these ops add them in float.
template <typename T>
void SumAs(void* in, void* inout, int* length, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

// Made by MpiInit on the MPI thread before any collective is queued (the
// training thread reads them after waiting for the join).
MPI_Op half_sum = MPI_OP_NULL, bf16_sum = MPI_OP_NULL;

int MpiInit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return MPI_ERR_OTHER;
  if (!initialized) {
    // The ring, unless the user set an algorithm: OpenMPI 4.1's blocking
    // all-reduce of large buffers is Rabenseifner's, and its non-blocking one
    // (libnbc, the one used) defaults to a binomial tree, both far slower
    // than the ring between ranks on one machine (docs/BENCHMARKS.md,
    // "Backends", measured with tools/bench_comm).
    ::setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", /*overwrite=*/0);
    ::setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4", /*overwrite=*/0);
    ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return rc;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (half_sum == MPI_OP_NULL) MPI_Op_create(&SumAs<c10::Half>, /*commute=*/1, &half_sum);
  if (bf16_sum == MPI_OP_NULL) MPI_Op_create(&SumAs<c10::BFloat16>, /*commute=*/1, &bf16_sum);
  return MPI_SUCCESS;
}

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

// How a tensor of `dtype` travels, and the op that sums it.
struct Wire {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op sum = MPI_SUM;
};

StatusOr<Wire> WireOf(const torch::Tensor& t, const char* what) {
  if (!t.is_contiguous()) return Status::InvalidArgument(std::string(what) + ": the tensor is not contiguous");
  if (t.numel() > INT_MAX) return Status::InvalidArgument(std::string(what) + ": more than INT_MAX values at once");
  switch (t.scalar_type()) {
    case torch::kFloat: return Wire{MPI_FLOAT, MPI_SUM};
    case torch::kDouble: return Wire{MPI_DOUBLE, MPI_SUM};
    case torch::kLong: return Wire{MPI_INT64_T, MPI_SUM};
    case torch::kInt: return Wire{MPI_INT32_T, MPI_SUM};
    case torch::kByte: return Wire{MPI_UINT8_T, MPI_SUM};
    case torch::kHalf: return Wire{MPI_UINT16_T, half_sum};
    case torch::kBFloat16: return Wire{MPI_UINT16_T, bf16_sum};
    default:
      return Status::InvalidArgument(std::string(what) + ": no MPI type for " +
                                     std::string(c10::toString(t.scalar_type())));
  }
}

// A collective queued on the MPI thread. Wait gives up after `timeout`:
// MPI itself never does, and cannot say which peer is missing.
class MpiPending : public PendingCollective {
 public:
  MpiPending(std::shared_future<int> done, const char* what, std::chrono::seconds timeout)
      : done_(std::move(done)), what_(what), timeout_(timeout) {}

  Status Wait() override {
    if (!done_.valid()) return Status::OK();
    WaitingForPeers waiting;
    MpiThread::Waiter waiter;
    if (done_.wait_for(timeout_) != std::future_status::ready) {
      // Under the user's mpirun no launcher watches the ranks: the peers on
      // this machine say which of them stopped (heartbeat.h).
      const std::string stuck = StuckPeers(static_cast<double>(timeout_.count()));
      return Status::FailedPrecondition(
          std::string(what_) + ": the other ranks did not complete it within --timeout " +
          std::to_string(timeout_.count()) + " s" +
          (!stuck.empty()       ? ": " + stuck + EndStoppedPeersAtExit()
           : HasPeerBoard()     ? " (MPI: no rank on this machine is stuck: one on another machine is lost or hung, "
                                  "or a link is down)"
                                : " (MPI: a rank is lost or hung, or a link is down)"));
    }
    const int rc = done_.get();
    done_ = {};
    if (rc == MPI_SUCCESS) return Status::OK();
    return Status::FailedPrecondition(std::string(what_) + ": " + MpiError(rc));
  }

 private:
  std::shared_future<int> done_;
  const char* what_;
  std::chrono::seconds timeout_;
};

class MpiBackend : public CommBackend {
 public:
  static constexpr int64_t kSliceBytes = int64_t{16} << 20;

  explicit MpiBackend(const CommOptions& o) : options_(o), timeout_(o.timeout_s) {}

  ~MpiBackend() override {
    // Every rank finalizes at the end of a run; after a failure a peer may
    // never come, so the wait is bounded and the process then exits anyway.
    std::shared_future<int> done = MpiThread::Get().Post([] { return MPI_Finalize(); });
    done.wait_for(std::chrono::seconds(5));
  }

  // MPI's job has this run's shape, and every rank's recipe is rank 0's.
  // The op owns what it reads and writes: after a --timeout it may still
  // run, when this backend is gone.
  Status Join() {
    auto why = std::make_shared<std::string>();
    std::shared_future<int> joined = MpiThread::Get().Post([o = options_, why]() -> int {
      if (int rc = MpiInit(); rc != MPI_SUCCESS) return rc;
      int rank = -1, size = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      if (rank != o.rank || size != o.world) {
        *why = "the MPI job has " + std::to_string(size) + " processes and this is its rank " + std::to_string(rank) +
               ", but the run counts rank " + std::to_string(o.rank) + " of " + std::to_string(o.world) +
               " (--ranks x --nnodes)";
        return MPI_SUCCESS;
      }
      std::string first = o.recipe;
      int length = static_cast<int>(first.size());
      if (int rc = MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD); rc != MPI_SUCCESS) return rc;
      first.resize(static_cast<size_t>(length));
      if (int rc = MPI_Bcast(first.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD); rc != MPI_SUCCESS) return rc;
      *why = RecipeDifference(o.recipe, first, o);
      // The lowest rank that disagrees tells every rank why.
      int mine = why->empty() ? INT_MAX : rank, lowest = INT_MAX;
      if (int rc = MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); rc != MPI_SUCCESS) return rc;
      if (lowest == INT_MAX) return MPI_SUCCESS;
      length = static_cast<int>(why->size());
      if (int rc = MPI_Bcast(&length, 1, MPI_INT, lowest, MPI_COMM_WORLD); rc != MPI_SUCCESS) return rc;
      why->resize(static_cast<size_t>(length));
      return MPI_Bcast(why->data(), length, MPI_CHAR, lowest, MPI_COMM_WORLD);
    });
    WaitingForPeers waiting;
    if (joined.wait_for(timeout_) != std::future_status::ready) {
      return Status::FailedPrecondition("MPI rendezvous: not every one of the " + std::to_string(options_.world) +
                                        " ranks joined within --timeout " + std::to_string(timeout_.count()) + " s");
    }
    if (const int rc = joined.get(); rc != MPI_SUCCESS) {
      return Status::FailedPrecondition("MPI rendezvous: " + MpiError(rc));
    }
    if (!why->empty()) return Status::FailedPrecondition("MPI rendezvous: " + *why);
    return Status::OK();
  }

  Status AllReduceSum(torch::Tensor& tensor) override {
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> pending, AllReduceSumAsync(tensor));
    return pending->Wait();
  }

  StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(const torch::Tensor& tensor) override {
    GRANARY_ASSIGN_OR_RETURN(Wire wire, WireOf(tensor, "all-reduce"));
    // In slices of at most kSliceBytes: libnbc's ring is slower on one piece
    // of 50 MiB or more than on 16 MiB slices (docs/BENCHMARKS.md, the
    // libnbc table; tools/bench_comm_rank).
    const int64_t slice = std::max<int64_t>(1, kSliceBytes / static_cast<int64_t>(tensor.element_size()));
    const int64_t count = tensor.numel();
    // The op holds the tensor: its storage lives until the MPI thread is done with it.
    return Pending(MpiThread::Get().Post([tensor, count, slice, type = wire.type, op = wire.sum] {
      char* data = static_cast<char*>(tensor.data_ptr());
      for (int64_t first = 0; first < count; first += slice) {
        const int n = static_cast<int>(std::min(slice, count - first));
        const int rc = NonBlocking([&](MPI_Request* request) {
          return MPI_Iallreduce(MPI_IN_PLACE, data + first * tensor.element_size(), n, type, op, MPI_COMM_WORLD,
                                request);
        });
        if (rc != MPI_SUCCESS) return rc;
      }
      return MPI_SUCCESS;
    }), "all-reduce");
  }

  StatusOr<std::unique_ptr<PendingCollective>> AllGatherAsync(const torch::Tensor& input,
                                                              std::vector<torch::Tensor>* outputs) override {
    GRANARY_ASSIGN_OR_RETURN(Wire wire, WireOf(input, "all-gather"));
    torch::Tensor all;
    GRANARY_RETURN_IF_ERROR(CatchTorch("all-gather", [&] {
      all = torch::empty({options_.world, input.numel()}, input.options());
      for (int r = 0; r < options_.world; ++r) outputs->push_back(all[r].view(input.sizes()));
    }));
    const int count = static_cast<int>(input.numel());
    return Pending(MpiThread::Get().Post([input, all, count, type = wire.type] {
      return NonBlocking([&](MPI_Request* request) {
        return MPI_Iallgather(input.data_ptr(), count, type, all.data_ptr(), count, type, MPI_COMM_WORLD, request);
      });
    }), "all-gather");
  }

  Status Broadcast(torch::Tensor& tensor) override {
    GRANARY_ASSIGN_OR_RETURN(Wire wire, WireOf(tensor, "broadcast"));
    const int count = static_cast<int>(tensor.numel());
    return Pending(MpiThread::Get().Post([tensor, count, type = wire.type] {
      return NonBlocking([&](MPI_Request* request) {
        return MPI_Ibcast(tensor.data_ptr(), count, type, 0, MPI_COMM_WORLD, request);
      });
    }), "broadcast")->Wait();
  }

  Status Barrier() override {
    return Pending(MpiThread::Get().Post([] {
      return NonBlocking([](MPI_Request* request) { return MPI_Ibarrier(MPI_COMM_WORLD, request); });
    }), "barrier")->Wait();
  }

 private:
  std::unique_ptr<PendingCollective> Pending(std::shared_future<int> done, const char* what) const {
    return std::unique_ptr<PendingCollective>(new MpiPending(std::move(done), what, timeout_));
  }

  const CommOptions options_;
  const std::chrono::seconds timeout_;
};

StatusOr<std::unique_ptr<CommBackend>> CreateBackend(const CommOptions& options) {
  if (!options.mpi_job) {
    return Status::FailedPrecondition("--backend mpi: this process was not started by mpirun or srun (" +
                                      std::to_string(options.world) + " ranks in all)");
  }
  auto backend = std::make_unique<MpiBackend>(options);
  GRANARY_RETURN_IF_ERROR(backend->Join());
  return std::unique_ptr<CommBackend>(std::move(backend));
}

}  // namespace
}  // namespace granary

// The plugin's one entry (mpi_plugin.cc opens it): CreateMpiBackend's.
extern "C" __attribute__((visibility("default"))) void granary_create_mpi_backend(
    const granary::CommOptions* options, granary::StatusOr<std::unique_ptr<granary::CommBackend>>* out) {
  *out = granary::CreateBackend(*options);
}
