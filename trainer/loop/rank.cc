#include "trainer/clock.h"
#include "trainer/loop/rank.h"

#include <malloc.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>

#include "loader/loader.h"
#include "store/db.h"
#include "store/json_text.h"
#include "store/manifest.h"
#include "trainer/dist/comm.h"
#include "trainer/dist/gradient_sync.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/evaluate.h"
#include "trainer/loop/int8_report.h"
#include "trainer/loop/probe_window.h"
#include "trainer/loop/pruner.h"
#include "trainer/number_text.h"
#include "trainer/loop/rank_model.h"
#include "trainer/loop/run_checkpointer.h"
#include "trainer/loop/step.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"
#include "trainer/models/script.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/schedule.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// The training loader of rank `rank`.
StatusOr<std::unique_ptr<Loader>> TrainLoader(const DbReader& db, const TrainConfig& c, const Workload& w, int rank) {
  LoaderOptions lo = BaseLoaderOptions(c.data, w);
  lo.channels_last = c.model.channels_last;
  lo.split = c.data.train_split;
  lo.batch_size = static_cast<size_t>(c.optim.batch_size / (c.World() * c.optim.accum));
  lo.sampler.seed = c.optim.seed;
  lo.sampler.rank = rank;
  lo.sampler.world = c.World();
  lo.sampler.mode = ParseShuffleMode(c.data.shuffle).value();  // validated
  lo.sampler.drop_last = c.data.drop_last;
  lo.augment = ParseAugment(c.data.augment).value();  // validated
  return Loader::Create(db, lo);
}

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

// XXH64 over the parameters' values in order: equal runs have equal hashes.
std::string WeightsHash(const std::vector<torch::Tensor>& params) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  for (const torch::Tensor& p : params) {
    const torch::Tensor values = p.detach().contiguous();
    XXH64_update(state, values.data_ptr(), values.numel() * values.element_size());
  }
  const uint64_t hash = XXH64_digest(state);
  XXH64_freeState(state);
  return FormatHash(hash);
}

// --synthetic: the batch every step of a compute-bound run takes, random
// inputs of the loader's shape and layout and random labels.
struct SyntheticBatch {
  torch::Tensor input, target;
};

SyntheticBatch MakeSyntheticBatch(const Loader& loader, int64_t size, int64_t classes, bool channels_last) {
  std::vector<int64_t> shape = {size};
  for (uint64_t d : loader.sample_shape()) shape.push_back(static_cast<int64_t>(d));
  SyntheticBatch b;
  if (channels_last && shape.size() == 4) {
    // As InputTensor makes it from the loader's NHWC batch (strides matter:
    // with one channel, .contiguous(ChannelsLast) would keep NCHW strides).
    b.input = torch::rand({shape[0], shape[2], shape[3], shape[1]}).permute({0, 3, 1, 2});
  } else {
    b.input = torch::rand(shape);
  }
  b.target = torch::randint(std::max<int64_t>(1, classes), {size}, torch::kInt64);
  return b;
}

// What a resume continues, and what changed since the checkpoint (rank 0's notes).
void ReportResume(const Checkpoint& from, const TrainConfig& now, RunObserver& observer) {
  const RunPosition& at = from.header.at;
  observer.Note("resuming from " + from.path + ": epoch " + std::to_string(at.epoch + 1) + ", step " +
                std::to_string(at.global_step) + ", " + std::to_string(at.position) + " samples of the epoch done");
  if (static_cast<int64_t>(at.epoch) >= now.optim.epochs) {
    observer.Note("resume: the checkpoint is at the end of epoch " + std::to_string(at.epoch) + " of " +
                  std::to_string(now.optim.epochs) + ": nothing left to train (raise --epochs to go on)");
  }
  if (at.world != now.World()) {
    const int64_t batch = now.optim.batch_size;
    observer.Note("resume: " + std::to_string(at.world) + " ranks -> " + std::to_string(now.World()) +
                  ": per-rank batch " + std::to_string(batch / at.world) + " -> " +
                  std::to_string(batch / now.World()) + "; global batch " + std::to_string(batch) +
                  " and the learning rate (" + NumberText(from.header.config.optim.lr) + ") unchanged");
  }
}

// The process around a rank: its thread pools and its allocator.
void SetUpProcess(const TrainConfig& c) {
  SizeThreadPools(c.ThreadsPerRank(CoreCount()));  // threads resolved by the launcher
  KeepFreedMemory();
}

// Where an epoch stands on this rank.
struct EpochTally {
  std::chrono::steady_clock::time_point start;
  LoaderStats loader_before;
  double sync_before = 0;        // the sync's blocked seconds at the start
  double loss_sum = 0;           // training loss x samples, the epoch so far (a resumed part included)
  double samples = 0;
  double samples_before = 0;     // of those, trained before this run (not in samples/s)
  double compute_seconds = 0;
  uint64_t parameters = 0;       // the model's, as the epoch trained it
  bool stopped = false;          // the tune probe's window closed: training ends
};

// A rank's run, epoch by epoch: train, close (the ranks' sums), evaluate a
// share, checkpoint; then the saved model and the last checkpoint.
class RankTrainer {
 public:
  RankTrainer(const ResolvedRun& run, int rank, RunObserver& observer, RankModel& model, DataParallel& dp,
              torch::optim::Optimizer& optimizer, Loader& train, const Checkpoint* resumed, std::string checkpoint_run,
              Pruner* pruner)
      : c_(run.config),
        run_(run),
        rank_(rank),
        observer_(observer),
        model_(model),
        dp_(dp),
        train_(train),
        schedule_(c_.optim, static_cast<int64_t>((train.batches_per_epoch() + c_.optim.accum - 1) / c_.optim.accum)),
        start_at_(resumed != nullptr ? resumed->header.at : RunPosition{}),
        resumed_(resumed),
        step_(start_at_.global_step),
        pruner_(pruner),
        checkpointer_(c_, run.db->manifest().content_hash, std::move(checkpoint_run), rank, *dp.comm, *model.net,
                      optimizer, observer) {
    parts_.net = model.net.get();
    parts_.precision = &model.precision;
    parts_.optimizer = &optimizer;
    dp.Parts(/*apart=*/c_.data.synthetic, &parts_);
    parts_.label_smoothing = c_.optim.label_smoothing;
    parts_.seed = c_.optim.seed;
    parts_.rank = rank;
    if (c_.data.probe_s > 0) probe_.emplace(c_.data.probe_s, train, *dp.sync, *dp.comm);
  }

  StatusOr<std::vector<EpochReport>> Run() {
    GRANARY_RETURN_IF_ERROR(Plan());
    if (resumed_ != nullptr && rank_ == 0) ReportResume(*resumed_, c_, observer_);
    NotePruneSchedule();
    std::vector<EpochReport> reports;
    for (int epoch = static_cast<int>(start_at_.epoch); epoch < c_.optim.epochs || probe_; ++epoch) {
      EpochTally tally;
      tally.start = std::chrono::steady_clock::now();
      tally.loader_before = train_.stats();
      tally.sync_before = dp_.sync->blocked_seconds();
      tally.parameters = ParameterCount();
      GRANARY_RETURN_IF_ERROR(TrainEpoch(epoch, &tally));
      if (probe_) {  // every rank ends its epochs alike, so skipping their collectives is safe
        if (!tally.stopped) continue;
        reports.push_back(probe_->Report());
        break;
      }
      StatusOr<EpochReport> report = CloseEpoch(epoch, tally);
      if (!report.ok()) return report.status();
      // The prune first: the epoch's figures, weights hash and checkpoint are the saved model's.
      report->parameters = tally.parameters;
      GRANARY_RETURN_IF_ERROR(PruneAfter(epoch + 1, &report.value()));
      GRANARY_RETURN_IF_ERROR(EvaluateShare(&report.value()));
      if (rank_ == 0) report->weights_hash = WeightsHash(model_.net->parameters());
      if (checkpointer_.enabled() && !c_.data.synthetic) {
        RunPosition at;
        at.global_step = step_;
        at.epoch = static_cast<uint64_t>(epoch) + 1;
        const bool last = epoch + 1 == c_.optim.epochs;
        GRANARY_RETURN_IF_ERROR(checkpointer_.Save(at, 0, 0, dp_.sync->SaveState(), /*final=*/last));
      }
      GRANARY_RETURN_IF_ERROR(dp_.comm->Barrier());
      reports.push_back(report.value());
      observer_.Epoch(report.value());
    }
    if (rank_ == 0 && !c_.output.save.empty() && !probe_) {
      GRANARY_RETURN_IF_ERROR(
          SaveTorchScript(*model_.net, c_.output.save, ModelCardOf(c_, run_.workload, run_.db->manifest())));
    }
    if (rank_ == 0 && c_.compress.quantize == "int8" && !probe_ && !c_.data.synthetic) {
      StatusOr<QuantizedReport> quantized = QuantizeTrained(c_, *run_.db, run_.workload, *model_.net);
      if (!quantized.ok()) return quantized.status();
      observer_.Quantized(quantized.value());
    }
    // No collective follows: rank 0 may wait for its disk. The last
    // checkpoint is on disk before the run says it ended.
    GRANARY_RETURN_IF_ERROR(checkpointer_.Finish());
    return reports;
  }

 private:
  // What every rank reads per epoch, told before training starts; and the
  // --synthetic batch.
  Status Plan() {
    EpochPlanReport plan;
    plan.samples_per_rank = train_.sampler().samples_per_rank();
    plan.padded = train_.sampler().padded();
    plan.dropped = train_.sampler().dropped();
    plan.threads_per_rank = c_.ThreadsPerRank(CoreCount());
    plan.model = c_.model.name;
    plan.parameters = ParameterCount();
    plan.peak_lr = schedule_.peak();
    observer_.Plan(plan);
    if (!c_.data.synthetic) return Status::OK();
    const int64_t micro_batch = c_.optim.batch_size / (c_.World() * c_.optim.accum);
    return CatchTorch("synthetic batch", [&] {
      synthetic_ = MakeSyntheticBatch(train_, micro_batch, run_.db->manifest().num_classes,
                                      model_.precision.channels_last());
    });
  }

  // The next micro-batch: the loader's (skipped records noted), or the
  // --synthetic one.
  StatusOr<bool> NextMicroBatch(MicroBatch* next) {
    if (c_.data.synthetic) {
      *next = {synthetic_.input, synthetic_.target};
      return true;
    }
    StatusOr<bool> more = train_.Next(&batch_);
    if (!more.ok() || !more.value()) return more;
    for (const std::string& reason : batch_.skipped_reasons) {
      observer_.Note("rank " + std::to_string(rank_) + ": skipped corrupt " + reason);
    }
    GRANARY_RETURN_IF_ERROR(CatchTorch("batch tensors", [&] {
      next->input = InputTensor(batch_, model_.precision.channels_last());
      next->target = TargetTensor(batch_);
    }));
    return true;
  }

  // The epoch's optimizer steps, each an accumulation group, and after each:
  // the heartbeat, rank 0's step report, a checkpoint when due, the probe.
  Status TrainEpoch(int epoch, EpochTally* t) {
    const bool resuming = resumed_ != nullptr && static_cast<uint64_t>(epoch) == start_at_.epoch;
    if (!c_.data.synthetic) train_.StartEpoch(static_cast<uint64_t>(epoch), resuming ? start_at_.position : 0);
    if (resuming) {  // the epoch's loss so far: each rank its own, or all of it on rank 0 in another world
      const bool same_world = start_at_.world == c_.World();
      for (int r = 0; r < start_at_.world; ++r) {
        if (same_world ? r == rank_ : rank_ == 0) {
          t->loss_sum += start_at_.loss_sums[r];
          t->samples += start_at_.sample_counts[r];
        }
      }
    }
    t->samples_before = t->samples;
    const uint64_t batches = train_.batches_per_epoch(), accum = static_cast<uint64_t>(c_.optim.accum);
    const granary::NextMicroBatch next = [this](MicroBatch* b) { return NextMicroBatch(b); };
    for (uint64_t done = 0; done < batches;) {
      const int group = static_cast<int>(std::min(accum, batches - done));
      const double lr = schedule_.At(step_);
      StatusOr<StepResult> stepped = Step(parts_, step_, group, lr, next);
      if (!stepped.ok()) return stepped.status();
      ++step_;
      done += static_cast<uint64_t>(group);
      t->loss_sum += stepped->loss_sum;
      t->samples += stepped->samples;
      t->compute_seconds += stepped->compute_seconds;
      HeartbeatStep(step_);
      if (rank_ == 0) {
        StepReport s;
        s.epoch = epoch + 1;
        s.step = (done + accum - 1) / accum;
        s.steps = (batches + accum - 1) / accum;
        s.global_step = step_;
        s.loss = stepped->loss_sum / std::max(1.0, stepped->samples);
        s.epoch_loss = t->loss_sum / std::max(1.0, t->samples);
        s.lr = lr;
        s.seconds = SecondsSince(t->start);
        s.samples_per_s = (t->samples - t->samples_before) * c_.World() / std::max(1e-9, s.seconds);
        observer_.Step(s);
      }
      const bool epoch_end = done == batches;
      if (checkpointer_.enabled() && c_.checkpoint.every > 0 && step_ % c_.checkpoint.every == 0 && !epoch_end &&
          !c_.data.synthetic && !probe_) {
        RunPosition at;
        at.global_step = step_;
        at.epoch = static_cast<uint64_t>(epoch);
        at.position = train_.state().position;
        GRANARY_RETURN_IF_ERROR(checkpointer_.Save(at, t->loss_sum, t->samples, dp_.sync->SaveState()));
      }
      GRANARY_RETURN_IF_ERROR(checkpointer_.Failed());
      if (probe_) {
        StatusOr<bool> closed = probe_->AfterStep(stepped->samples);
        if (!closed.ok()) return closed.status();
        t->stopped = closed.value();
        if (t->stopped) return Status::OK();
      }
    }
    return Status::OK();
  }

  uint64_t ParameterCount() const {
    uint64_t n = 0;
    for (const torch::Tensor& p : model_.net->parameters()) n += static_cast<uint64_t>(p.numel());
    return n;
  }

  // --prune: what the schedule removes after epoch `epoch` (1-based), before
  // the epoch's evaluation and checkpoint (told in its report); the gradient
  // sync follows the new shapes.
  Status PruneAfter(int epoch, EpochReport* report) {
    report->parameters_after = report->parameters;
    if (pruner_ == nullptr) return Status::OK();
    StatusOr<bool> changed = pruner_->AfterEpoch(epoch, dp_.comm.get(), *parts_.optimizer);
    if (!changed.ok()) return changed.status();
    if (!changed.value()) return Status::OK();
    GRANARY_RETURN_IF_ERROR(dp_.Reattach(c_, *model_.net));
    dp_.Parts(/*apart=*/c_.data.synthetic, &parts_);
    report->pruned = pruner_->last_change();
    report->parameters_after = ParameterCount();
    return Status::OK();
  }

  // Rank 0, before training: what of --prune's schedule will not happen as asked.
  void NotePruneSchedule() const {
    if (pruner_ == nullptr || rank_ != 0) return;
    const std::string note = pruner_->ScheduleNote(static_cast<int>(start_at_.epoch), c_);
    if (!note.empty()) observer_.Note(note);
  }

  // The epoch's report: the ranks' sums of loss, samples and memory.
  StatusOr<EpochReport> CloseEpoch(int epoch, const EpochTally& t) {
    const double seconds = SecondsSince(t.start);
    torch::Tensor totals = torch::tensor({t.loss_sum, t.samples, t.samples_before, PeakRssMb()}, torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(dp_.comm->AllReduceSum(totals));
    const double samples = totals[1].item<double>();
    const double trained = samples - totals[2].item<double>();  // by this run
    EpochReport r;
    r.epoch = epoch + 1;
    r.train_loss = totals[0].item<double>() / std::max(1.0, samples);
    r.lr = schedule_.At(std::max<int64_t>(0, step_ - 1));
    r.seconds = seconds;
    r.samples_per_s = trained / seconds;
    const LoaderStats after = train_.stats();
    r.stall_fraction = (after.wait_seconds - t.loader_before.wait_seconds) / seconds;
    r.queue_depth = after.batches > t.loader_before.batches
                        ? static_cast<double>(after.ready_sum - t.loader_before.ready_sum) /
                              static_cast<double>(after.batches - t.loader_before.batches)
                        : 0.0;
    r.comm_fraction = (dp_.sync->blocked_seconds() - t.sync_before) / seconds;
    r.compute_fraction = t.compute_seconds / seconds;
    r.peak_rss_mb = totals[3].item<double>();
    return r;
  }

  // Every rank evaluates its share of the eval split, then the ranks' sums.
  Status EvaluateShare(EpochReport* r) {
    if (c_.data.eval_split.empty() || c_.data.synthetic) return Status::OK();
    LoaderOptions eval = BaseLoaderOptions(c_.data, run_.workload);
    eval.channels_last = c_.model.channels_last;
    eval.split = c_.data.eval_split;
    eval.batch_size = kEvalBatchSize;
    StatusOr<EvalResult> result = Evaluate(*run_.db, eval, *model_.net, model_.precision, rank_, c_.World());
    if (!result.ok()) return result.status().WithContext("model " + c_.model.name);
    torch::Tensor sums =
        torch::tensor({result->loss_sum, static_cast<double>(result->correct), static_cast<double>(result->samples)},
                      torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(dp_.comm->AllReduceSum(sums));
    const double samples = sums[2].item<double>();
    r->evaluated = true;
    r->test_loss = sums[0].item<double>() / std::max(1.0, samples);
    r->test_accuracy = sums[1].item<double>() / std::max(1.0, samples);
    r->test_samples = static_cast<uint64_t>(samples);
    return Status::OK();
  }

  const TrainConfig& c_;
  const ResolvedRun& run_;
  const int rank_;
  RunObserver& observer_;
  RankModel& model_;
  DataParallel& dp_;
  Loader& train_;
  const LrSchedule schedule_;
  const RunPosition start_at_;
  const Checkpoint* const resumed_;  // null unless the run resumes
  int64_t step_;  // optimizer steps so far
  Pruner* const pruner_;  // null without --prune
  StepParts parts_;
  RunCheckpointer checkpointer_;
  std::optional<ProbeWindow> probe_;  // train --tune's measurement: no evaluation, checkpoint or saved model
  Batch batch_;
  SyntheticBatch synthetic_;
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

StatusOr<std::vector<EpochReport>> RunRank(const ResolvedRun& run, int rank, RunObserver& observer,
                                           std::optional<Checkpoint> resumed) {
  const TrainConfig& c = run.config;
  SetUpProcess(c);
  StatusOr<std::unique_ptr<Loader>> train = TrainLoader(*run.db, c, run.workload, rank);
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
  ModelSpec spec = SpecFor(c.model, run.workload, run.db->manifest().num_classes);
  if (run.workload.kind == InputKind::kFeatures && !c.data.synthetic) {  // a feature model standardises its input
    LoaderOptions stats = BaseLoaderOptions(c.data, run.workload);
    stats.split = c.data.train_split;
    stats.batch_size = 1024;
    StatusOr<InputStatistics> s = ComputeInputStatistics(*run.db, stats);
    if (!s.ok()) return s.status();
    spec.input_mean = s->mean;
    spec.input_std = s->stddev;
  }
  StatusOr<RankModel> model = BuildRankModel(c, spec, from);
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
  if (from != nullptr) {
    SavedCompression compression;
    GRANARY_RETURN_IF_ERROR(RestoreCheckpoint(*from, nullptr, optimizer.value().get(), &compression));
    GRANARY_RETURN_IF_ERROR(ResumeCompression(*from, compression, rank, c.World(), *dp->sync, observer));
  }
  StatusOr<std::unique_ptr<Pruner>> pruner = Pruner::Create(c, *model->net, model->channels_at_build);
  if (!pruner.ok()) return pruner.status();
  RankTrainer trainer(run, rank, observer, model.value(), dp.value(), *optimizer.value(), *train.value(), from,
                      std::move(checkpoint_run), pruner.value().get());
  return trainer.Run();
}

}  // namespace granary
