#include "trainer/loop/rank.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "loader/loader.h"
#include "store/db.h"
#include "trainer/clock.h"
#include "trainer/comm/comm.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/epoch_figures.h"
#include "trainer/loop/rank_model.h"
#include "trainer/loop/same_flow.h"
#include "trainer/loop/step.h"
#include "trainer/loop/train_batches.h"
#include "trainer/models/script.h"
#include "trainer/optim/schedule.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// This process's thread pools: `threads` intra-op threads; the inter-op pool
// (which nothing in a step uses) kept to one thread. LibTorch sizes the
// inter-op pool once per process, before first use; later calls keep it.
void SizeThreadPools(int threads) {
  torch::set_num_threads(threads);
  static std::once_flag interop;
  std::call_once(interop,
                 [] { CatchTorch("inter-op pool", [] { at::set_num_interop_threads(1); }).PermitUncheckedError(); });
}

// glibc's allocator, left to itself, hands the step's large tensors back to
// the kernel as they are freed (mmap above a threshold that adapts, heap trim
// below it) and takes them again next step: every step then pays page faults
// and page clearing for tens of MiB, a large share of a bf16 step on
// the standard machine (docs/BENCHMARKS.md). Kept instead: allocations up to
// 32 MiB (glibc's largest threshold) come from the heap, which is not
// trimmed, so RSS stays at the step's peak. A MALLOC_* setting in the
// environment is the user's choice and wins.
void KeepFreedMemory(const Environment& env) {
  if (env.Has("MALLOC_MMAP_THRESHOLD_") || env.Has("MALLOC_TRIM_THRESHOLD_")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

// A rank's run, epoch by epoch: train its steps, close the epoch (the
// ranks' sums), and call the run's hooks (loop/hook.h) at each point. It
// knows no feature: what follows a step, an epoch or the run is a hook's.
class RankLoop {
 public:
  RankLoop(RankState& state, TrainBatches& batches, RunHooks hooks)
      : state_(state),
        c_(state.run.config),
        batches_(batches),
        hooks_(std::move(hooks)),
        end_epoch_(EndEpoch(hooks_, c_.optim.epochs)),
        schedule_(c_.optim,
                  static_cast<int64_t>((state.train.batches_per_epoch() + c_.optim.accum - 1) / c_.optim.accum)) {}

  StatusOr<std::vector<EpochReport>> Run() {
    TellPlan();
    for (const std::unique_ptr<RunHook>& hook : hooks_) GRANARY_RETURN_IF_ERROR(hook->BeforeRun(state_));
    std::vector<EpochReport> reports;
    for (int64_t epoch = static_cast<int64_t>(state_.start.epoch); epoch < end_epoch_; ++epoch) {
      EpochTally tally;
      const StatusOr<Flow> trained = TrainEpoch(static_cast<int>(epoch), &tally);
      if (!trained.ok()) return trained.status();
      if (trained.value() == Flow::kStop) break;  // mid-epoch: no report of a part
      GRANARY_ASSIGN_OR_RETURN(EpochReport report, CloseEpoch(static_cast<int>(epoch), tally));
      const EpochEvent event{static_cast<int>(epoch), epoch + 1 == c_.optim.epochs};
      GRANARY_ASSIGN_OR_RETURN(const Flow flow,
                               EveryHook("after epoch ", epoch + 1,
                                         [&](RunHook& hook) { return hook.AfterEpoch(state_, event, &report); }));
      report.parameters_after = ParameterCount(*state_.model.net);  // a hook may have changed the model
      if (event.last || flow == Flow::kStop) {
        report.lines_after.insert(report.lines_after.end(), report.lines_if_last.begin(), report.lines_if_last.end());
      }
      GRANARY_RETURN_IF_ERROR(state_.dp.comm->Barrier());
      reports.push_back(report);
      state_.observer.Epoch(report);
      if (flow == Flow::kStop) break;
    }
    for (const std::unique_ptr<RunHook>& hook : hooks_) GRANARY_RETURN_IF_ERROR(hook->AfterRun(state_, &reports));
    return reports;
  }

 private:
  // `call` on every hook, in order: kStop if any returned it (the others
  // still run, hook.h); the first error ends the run. Where asked, every
  // rank's flow at this call (`point` `number`: "after step " 12) is checked
  // to be the same.
  template <typename Call>
  StatusOr<Flow> EveryHook(const char* point, int64_t number, Call call) {
    Flow flow = Flow::kGoOn;
    for (const std::unique_ptr<RunHook>& hook : hooks_) {
      GRANARY_ASSIGN_OR_RETURN(const Flow after, call(*hook));
      if (after == Flow::kStop) flow = Flow::kStop;
    }
    if (state_.check_flow) {
      GRANARY_RETURN_IF_ERROR(CheckSameFlow(*state_.dp.comm, flow, point + std::to_string(number)));
    }
    return flow;
  }

  // The loop trains epochs [start, end): --epochs, or until a hook that ends
  // the run stops it.
  static int64_t EndEpoch(const RunHooks& hooks, int64_t epochs) {
    const bool until_stopped =
        std::any_of(hooks.begin(), hooks.end(), [](const std::unique_ptr<RunHook>& h) { return h->EndsTheRun(); });
    return until_stopped ? std::numeric_limits<int64_t>::max() : epochs;
  }

  // What every rank reads per epoch, told before training starts.
  void TellPlan() {
    const Sampler& sampler = state_.train.sampler();
    EpochPlanReport plan;
    plan.samples_per_rank = sampler.samples_per_rank();
    plan.padded = sampler.padded();
    plan.dropped = sampler.dropped();
    plan.threads_per_rank = c_.ThreadsPerRank(UsableCpuCount());
    plan.model = c_.model.name;
    const auto* script = dynamic_cast<const ScriptModel*>(state_.model.net.get());
    if (script != nullptr) {
      for (const std::string* change : {&script->changes().new_head, &script->changes().frozen}) {
        if (!change->empty()) plan.model += " (" + *change + ")";
      }
    }
    plan.parameters = ParameterCount(*state_.model.net);
    plan.peak_lr = schedule_.peak();
    state_.observer.Plan(plan);
  }

  // The epoch's optimizer steps, each an accumulation group, each followed
  // by the heartbeat and the hooks; kStop if a hook stopped training.
  StatusOr<Flow> TrainEpoch(int epoch, EpochTally* t) {
    t->start = std::chrono::steady_clock::now();
    epoch_start_ = ReadCounters(state_);
    parameters_ = ParameterCount(*state_.model.net);
    // A resumed epoch goes on where the run started, with this rank's loss so far.
    const RankStart& start = state_.start;
    const bool resumed_epoch = static_cast<uint64_t>(epoch) == start.epoch;
    batches_.StartEpoch(static_cast<uint64_t>(epoch), resumed_epoch ? start.position : 0);
    if (resumed_epoch) {
      t->loss_sum = start.loss_sum;
      t->samples = start.samples;
    }
    t->samples_before = t->samples;
    const uint64_t batches = state_.train.batches_per_epoch(), accum = static_cast<uint64_t>(c_.optim.accum);
    const NextMicroBatch next = [this](MicroBatch* b) { return batches_.Next(b); };
    for (uint64_t done = 0; done < batches;) {
      const int group = static_cast<int>(std::min(accum, batches - done));
      StepEvent event;
      event.lr = schedule_.At(state_.global_step);
      GRANARY_ASSIGN_OR_RETURN(StepResult stepped, Step(state_.parts, state_.global_step, group, event.lr, next));
      ++state_.global_step;
      done += static_cast<uint64_t>(group);
      t->loss_sum += stepped.loss_sum;
      t->samples += stepped.samples;
      state_.samples_trained += stepped.samples;
      state_.compute_seconds += stepped.compute_seconds;
      HeartbeatStep(state_.global_step);
      event.epoch = epoch;
      event.step = (done + accum - 1) / accum;
      event.steps = (batches + accum - 1) / accum;
      event.epoch_end = done == batches;
      event.result = stepped;
      event.tally = t;
      GRANARY_ASSIGN_OR_RETURN(const Flow flow,
                               EveryHook("after step ", state_.global_step,
                                         [&](RunHook& hook) { return hook.AfterStep(state_, event); }));
      if (flow == Flow::kStop) return flow;
    }
    return Flow::kGoOn;
  }

  // The epoch's report: its figures (loop/epoch_figures.h) and the ranks'
  // summed training loss.
  StatusOr<EpochReport> CloseEpoch(int epoch, const EpochTally& t) {
    EpochReport r;
    std::vector<double> loss = {t.loss_sum, t.samples};
    GRANARY_RETURN_IF_ERROR(WindowFigures(epoch_start_, ReadCounters(state_), *state_.dp.comm, &r, &loss));
    r.epoch = epoch + 1;
    r.train_loss = loss[0] / std::max(1.0, loss[1]);
    r.lr = schedule_.At(std::max<int64_t>(0, state_.global_step - 1));
    r.parameters = parameters_;
    return r;
  }

  RankState& state_;
  const TrainConfig& c_;
  TrainBatches& batches_;
  const RunHooks hooks_;
  const int64_t end_epoch_;
  const LrSchedule schedule_;
  // The epoch in progress, at its start.
  RankCounters epoch_start_;
  uint64_t parameters_ = 0;
};

}  // namespace

void SetUpRankProcess(const TrainConfig& c, const Environment& env) {
  SizeThreadPools(c.ThreadsPerRank(UsableCpuCount()));  // threads resolved by the launcher
  KeepFreedMemory(env);
}

StatusOr<std::vector<EpochReport>> TrainRank(RankState& state, TrainBatches& batches, RunHooks hooks) {
  RankLoop loop(state, batches, std::move(hooks));
  return loop.Run();
}

StatusOr<ResolvedRun> ResolveRun(TrainConfig config, Environment env) {
  ResolvedRun run;
  run.env = std::move(env);
  GRANARY_ASSIGN_OR_RETURN(run.db, DbReader::Open(config.data.db));
  GRANARY_RETURN_IF_ERROR(ApplySavedModelsInput(run.db->manifest(), &config));
  GRANARY_ASSIGN_OR_RETURN(run.workload, ResolveWorkload(run.db->manifest(), config.data.db, &config));
  run.config = std::move(config);
  return run;
}

}  // namespace granary
