#include "trainer/clock.h"
#include "trainer/loop/rank.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>

#include "loader/loader.h"
#include "store/db.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/hooks.h"
#include "trainer/loop/input_statistics.h"
#include "trainer/loop/loader_options.h"
#include "trainer/loop/probe_window.h"
#include "trainer/loop/rank_model.h"
#include "trainer/loop/run_checkpointer.h"
#include "trainer/loop/step.h"
#include "trainer/loop/train_batches.h"
#include "trainer/optim/optimizer.h"
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
// and page clearing for tens of MiB, a quarter to a third of a bf16 step on
// the standard machine (docs/BENCHMARKS.md). Kept instead: allocations up to
// 32 MiB (glibc's largest threshold) come from the heap, which is not
// trimmed, so RSS stays at the step's peak. A MALLOC_* setting in the
// environment is the user's choice and wins.
void KeepFreedMemory() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

// The process around a rank: its thread pools and its allocator.
void SetUpProcess(const TrainConfig& c) {
  SizeThreadPools(c.ThreadsPerRank(UsableCpuCount()));  // threads resolved by the launcher
  KeepFreedMemory();
}

// A rank's run, epoch by epoch: train its steps, close the epoch (the
// ranks' sums), and call the run's hooks (loop/hook.h) at each point. It
// knows no feature: what follows a step, an epoch or the run is a hook's.
class RankLoop {
 public:
  RankLoop(RankState& state, TrainBatches& batches, LoopPlan plan)
      : state_(state),
        c_(state.run.config),
        batches_(batches),
        hooks_(std::move(plan.hooks)),
        end_epoch_(plan.end_epoch),
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
      StatusOr<EpochReport> report = CloseEpoch(static_cast<int>(epoch), tally);
      if (!report.ok()) return report.status();
      const EpochEvent event{static_cast<int>(epoch), epoch + 1 == c_.optim.epochs};
      Flow flow = Flow::kGoOn;
      for (const std::unique_ptr<RunHook>& hook : hooks_) {
        StatusOr<Flow> after = hook->AfterEpoch(state_, event, &report.value());
        if (!after.ok()) return after.status();
        if (after.value() == Flow::kStop) flow = Flow::kStop;
      }
      GRANARY_RETURN_IF_ERROR(state_.dp.comm->Barrier());
      reports.push_back(report.value());
      state_.observer.Epoch(report.value());
      if (flow == Flow::kStop) break;
    }
    for (const std::unique_ptr<RunHook>& hook : hooks_) GRANARY_RETURN_IF_ERROR(hook->AfterRun(state_, &reports));
    return reports;
  }

 private:
  // What every rank reads per epoch, told before training starts.
  void TellPlan() {
    const Sampler& sampler = state_.train.sampler();
    EpochPlanReport plan;
    plan.samples_per_rank = sampler.samples_per_rank();
    plan.padded = sampler.padded();
    plan.dropped = sampler.dropped();
    plan.threads_per_rank = c_.ThreadsPerRank(UsableCpuCount());
    plan.model = c_.model.name;
    plan.parameters = ParameterCount(*state_.model.net);
    plan.peak_lr = schedule_.peak();
    state_.observer.Plan(plan);
  }

  // The epoch's optimizer steps, each an accumulation group, each followed
  // by the heartbeat and the hooks; kStop if a hook stopped training.
  StatusOr<Flow> TrainEpoch(int epoch, EpochTally* t) {
    t->start = std::chrono::steady_clock::now();
    loader_before_ = state_.train.stats();
    sync_before_ = state_.dp.sync->blocked_seconds();
    parameters_ = ParameterCount(*state_.model.net);
    // A resumed epoch goes on where the checkpoint was, with its loss so far:
    // each rank its own, or all of it on rank 0 in another world.
    const RunPosition& start = state_.start;
    const bool resumed_epoch = static_cast<uint64_t>(epoch) == start.epoch;
    batches_.StartEpoch(static_cast<uint64_t>(epoch), resumed_epoch ? start.position : 0);
    const bool same_world = start.world == c_.World();
    for (size_t r = 0; resumed_epoch && r < start.loss_sums.size(); ++r) {
      if (same_world ? static_cast<int>(r) == state_.rank : state_.rank == 0) {
        t->loss_sum += start.loss_sums[r];
        t->samples += start.sample_counts[r];
      }
    }
    t->samples_before = t->samples;
    const uint64_t batches = state_.train.batches_per_epoch(), accum = static_cast<uint64_t>(c_.optim.accum);
    const NextMicroBatch next = [this](MicroBatch* b) { return batches_.Next(b); };
    for (uint64_t done = 0; done < batches;) {
      const int group = static_cast<int>(std::min(accum, batches - done));
      StepEvent event;
      event.lr = schedule_.At(state_.global_step);
      StatusOr<StepResult> stepped = Step(state_.parts, state_.global_step, group, event.lr, next);
      if (!stepped.ok()) return stepped.status();
      ++state_.global_step;
      done += static_cast<uint64_t>(group);
      t->loss_sum += stepped->loss_sum;
      t->samples += stepped->samples;
      t->compute_seconds += stepped->compute_seconds;
      HeartbeatStep(state_.global_step);
      event.epoch = epoch;
      event.step = (done + accum - 1) / accum;
      event.steps = (batches + accum - 1) / accum;
      event.epoch_end = done == batches;
      event.result = stepped.value();
      event.tally = t;
      Flow flow = Flow::kGoOn;
      for (const std::unique_ptr<RunHook>& hook : hooks_) {
        StatusOr<Flow> after = hook->AfterStep(state_, event);
        if (!after.ok()) return after.status();
        if (after.value() == Flow::kStop) flow = Flow::kStop;
      }
      if (flow == Flow::kStop) return flow;
    }
    return Flow::kGoOn;
  }

  // The epoch's report: the ranks' sums of loss, samples and memory.
  StatusOr<EpochReport> CloseEpoch(int epoch, const EpochTally& t) {
    const double seconds = SecondsSince(t.start);
    torch::Tensor totals = torch::tensor({t.loss_sum, t.samples, t.samples_before, PeakRssMb()}, torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(state_.dp.comm->AllReduceSum(totals));
    const double samples = totals[1].item<double>();
    const double trained = samples - totals[2].item<double>();  // by this run
    EpochReport r;
    r.epoch = epoch + 1;
    r.train_loss = totals[0].item<double>() / std::max(1.0, samples);
    r.lr = schedule_.At(std::max<int64_t>(0, state_.global_step - 1));
    r.seconds = seconds;
    r.samples_per_s = trained / seconds;
    const LoaderStats after = state_.train.stats();
    r.stall_fraction = (after.wait_seconds - loader_before_.wait_seconds) / seconds;
    r.queue_depth = after.batches > loader_before_.batches
                        ? static_cast<double>(after.ready_sum - loader_before_.ready_sum) /
                              static_cast<double>(after.batches - loader_before_.batches)
                        : 0.0;
    r.comm_fraction = (state_.dp.sync->blocked_seconds() - sync_before_) / seconds;
    r.compute_fraction = t.compute_seconds / seconds;
    r.peak_rss_mb = totals[3].item<double>();
    r.parameters = parameters_;
    r.parameters_after = parameters_;  // a prune's hook tells what it left
    return r;
  }

  RankState& state_;
  const TrainConfig& c_;
  TrainBatches& batches_;
  const RunHooks hooks_;
  const int64_t end_epoch_;
  const LrSchedule schedule_;
  // The epoch in progress, at its start.
  LoaderStats loader_before_;
  double sync_before_ = 0;  // the sync's blocked seconds
  uint64_t parameters_ = 0;
};

}  // namespace

StatusOr<ResolvedRun> ResolveRun(TrainConfig config) {
  ResolvedRun run;
  StatusOr<std::unique_ptr<DbReader>> db = DbReader::Open(config.data.db);
  if (!db.ok()) return db.status();
  run.db = std::move(db).value();
  GRANARY_RETURN_IF_ERROR(ApplySavedModelsInput(run.db->manifest(), &config));
  StatusOr<Workload> workload = ResolveWorkload(run.db->manifest(), config.data.db, &config);
  if (!workload.ok()) return workload.status();
  run.workload = workload.value();
  run.config = std::move(config);
  return run;
}

namespace {

// A line naming the features (by index, as the db stores them) that hold
// missing values, and what the model does with them; "" if none does.
std::string MissingFeaturesNote(const InputStatistics& s) {
  const torch::Tensor holding = torch::nonzero(s.missing).flatten();
  if (holding.numel() == 0) return "";
  std::string which;
  for (int64_t i = 0; i < holding.numel() && i < 8; ++i) {
    const int64_t f = holding[i].item<int64_t>();
    which += (i > 0 ? ", " : "") + std::to_string(f) + " (" + std::to_string(s.missing[f].item<int64_t>()) + ")";
  }
  if (holding.numel() > 8) which += ", ...";
  return std::to_string(holding.numel()) + " feature(s) hold missing values (NaN) in the training split: " + which +
         " (feature index, samples missing it): each is standardised over the values present, and a missing "
         "value is taken as its feature's mean";
}

}  // namespace

StatusOr<std::vector<EpochReport>> RunRank(const ResolvedRun& run, int rank, RunObserver& observer,
                                           std::optional<Checkpoint> resumed) {
  const TrainConfig& c = run.config;
  SetUpProcess(c);
  StatusOr<std::unique_ptr<Loader>> train = Loader::Create(*run.db, TrainLoaderOptions(c, run.workload, rank));
  if (!train.ok()) return train.status();
  if (!c.data.eval_split.empty() && run.db->manifest().FindSplit(c.data.eval_split) == nullptr) {
    return Status::NotFound(c.data.db + ": no split '" + c.data.eval_split + "' to evaluate on");
  }
  if (!c.checkpoint.resume.empty() && !resumed) {  // resolved to a file and checked by RunTrain
    StatusOr<Checkpoint> read = ReadCheckpoint(c.checkpoint.resume);
    if (!read.ok()) return read.status().WithContext("--resume");
    resumed = std::move(read).value();
  }
  const Checkpoint* from = resumed ? &*resumed : nullptr;
  std::optional<CheckpointArchive> archive;  // the payload parsed once, for the model, optimizer and compression
  if (from != nullptr) {
    StatusOr<CheckpointArchive> parsed = CheckpointArchive::Parse(*from);
    if (!parsed.ok()) return parsed.status().WithContext("--resume");
    archive = std::move(parsed).value();
  }
  ModelSpec spec = SpecFor(c.model, run.workload, run.db->manifest().num_classes);
  if (run.workload.kind == InputKind::kFeatures && !c.data.synthetic) {  // a feature model standardises its input
    StatusOr<InputStatistics> s =
        ComputeInputStatistics(*run.db, TrainSplitPassOptions(c, run.workload, 1024, /*shuffled=*/false));
    if (!s.ok()) return s.status();
    spec.input_mean = s->mean;
    spec.input_std = s->stddev;
    if (rank == 0) {
      if (std::string note = MissingFeaturesNote(s.value()); !note.empty()) observer.Note(note);
    }
  }
  StatusOr<RankModel> model = BuildRankModel(c, spec, archive ? &*archive : nullptr);
  if (!model.ok()) return model.status();
  std::string checkpoint_run;  // rank 0's checkpoints name the run that claimed --checkpoint-dir
  if (rank == 0 && !c.checkpoint.dir.empty()) {
    StatusOr<std::string> owner = CheckpointDirRun(c.checkpoint.dir);
    if (!owner.ok()) return owner.status().WithContext("--checkpoint-dir");
    checkpoint_run = owner.value();
  }
  const std::string recipe = RecipeJson(c, run.db->manifest().content_hash,
                                        from != nullptr ? static_cast<int64_t>(from->header.at.global_step) : -1);
  StatusOr<DataParallel> dp = DataParallel::Join(c, rank, *model->net, recipe);
  if (!dp.ok()) return dp.status();
  StatusOr<std::unique_ptr<torch::optim::Optimizer>> optimizer = CreateOptimizer(c.optim, model->net->parameters());
  if (!optimizer.ok()) return optimizer.status();
  if (archive) {
    GRANARY_RETURN_IF_ERROR(archive->RestoreOptimizer(*optimizer.value()));
    StatusOr<SavedCompression> compression = archive->Compression();
    if (!compression.ok()) return compression.status();
    GRANARY_RETURN_IF_ERROR(ResumeCompression(*from, compression.value(), rank, c.World(), *dp->sync, observer));
  }
  RankState state{run, rank, observer, model.value(), dp.value(), *optimizer.value(), *train.value(), {},
                  from != nullptr ? from->header.at : RunPosition{}, 0};
  state.global_step = state.start.global_step;
  dp->Parts(/*apart=*/c.data.synthetic, &state.parts);
  state.parts.net = model->net.get();
  state.parts.precision = &model->precision;
  state.parts.optimizer = optimizer.value().get();
  state.parts.label_smoothing = c.optim.label_smoothing;
  state.parts.seed = c.optim.seed;
  state.parts.rank = rank;
  StatusOr<std::unique_ptr<TrainBatches>> batches =
      MakeTrainBatches(c, *train.value(), run.db->manifest().num_classes, rank, observer);
  if (!batches.ok()) return batches.status();
  StatusOr<LoopPlan> plan = AssembleHooks(state, from, std::move(checkpoint_run));
  if (!plan.ok()) return plan.status();
  RankLoop loop(state, *batches.value(), std::move(plan).value());
  return loop.Run();
}

}  // namespace granary
