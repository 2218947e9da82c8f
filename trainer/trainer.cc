#include "trainer/trainer.h"

#include <malloc.h>
#include <sys/resource.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "loader/loader.h"
#include "store/db.h"
#include "store/json_text.h"
#include "store/manifest.h"
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/evaluate.h"
#include "trainer/gradient_sync.h"
#include "trainer/heartbeat.h"
#include "trainer/models/registry.h"
#include "trainer/models/script.h"
#include "trainer/optimizer.h"
#include "trainer/precision.h"
#include "trainer/schedule.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// What the training and the evaluation loaders share.
LoaderOptions BaseLoaderOptions(const DataConfig& d, const Workload& w) {
  LoaderOptions lo;
  lo.input_field = w.input_field;
  lo.target_field = w.target_field;
  lo.scale = w.input_uint8 ? 1.0f / 255.0f : 1.0f;
  lo.threads = d.loader_threads;
  lo.prefetch = d.prefetch;
  lo.mean = d.mean;
  lo.stddev = d.stddev;
  lo.skip_corrupt = d.skip_corrupt;
  return lo;
}

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

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

// The seed of rank `rank`'s random stream (dropout) at optimizer step
// `step`: SplitMix64 of the three, so a resumed run draws what an
// uninterrupted one would have.
uint64_t StepSeed(uint64_t seed, int rank, int64_t step) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xBF58476D1CE4E5B9ull +
               static_cast<uint64_t>(step) * 0x94D049BB133111EBull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (x ^ (x >> 31)) >> 1;  // manual_seed takes it as a positive int64 too
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

// What a resume continues, and what changed since the checkpoint (rank 0).
void ReportResume(const Checkpoint& from, const TrainConfig& now) {
  const RunPosition& at = from.header.at;
  const TrainConfig& then = from.header.config;
  std::fprintf(stderr, "train: resuming from %s: epoch %llu, step %lld, %llu samples of the epoch done\n",
               Printable(from.path).c_str(), static_cast<unsigned long long>(at.epoch + 1),
               static_cast<long long>(at.global_step), static_cast<unsigned long long>(at.position));
  if (static_cast<int64_t>(at.epoch) >= now.optim.epochs) {
    std::fprintf(stderr,
                 "train: resume: the checkpoint is at the end of epoch %llu of %d: nothing left to train "
                 "(raise --epochs to go on)\n",
                 static_cast<unsigned long long>(at.epoch), now.optim.epochs);
  }
  if (at.world != now.World()) {
    const int64_t batch = now.optim.batch_size;
    std::fprintf(stderr,
                 "train: resume: %d ranks -> %d: per-rank batch %lld -> %lld; global batch %lld and the "
                 "learning rate (%g) unchanged\n",
                 at.world, now.World(), static_cast<long long>(batch / at.world),
                 static_cast<long long>(batch / now.World()), static_cast<long long>(batch), then.optim.lr);
  }
}

// The model to build for `workload`.
ModelSpec SpecFor(const ModelConfig& m, const Workload& workload, int64_t classes) {
  ModelSpec spec;
  spec.name = m.name;
  spec.input = workload.input_shape;
  spec.classes = classes;
  spec.dropout = m.dropout;
  spec.width = m.width;
  return spec;
}

// Cross-entropy, with label smoothing as PyTorch's CrossEntropyLoss has it:
// (1 - e) x NLL + e x the mean over classes of -log p.
torch::Tensor TrainingLoss(const torch::Tensor& logits, const torch::Tensor& target, double smoothing) {
  torch::Tensor log_p = torch::log_softmax(logits, 1);
  torch::Tensor nll = torch::nll_loss(log_p, target);
  if (smoothing == 0) return nll;
  return (1 - smoothing) * nll - smoothing * log_p.mean(1).mean();
}

// This process's peak resident memory, MiB.
double PeakRssMb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;  // KiB on Linux
}

// train --tune's measurement window (data.probe_s > 0). The first
// kWarmupSteps steps are not timed (first-touch allocation, oneDNN's kernel
// choice); the next kCalibrationSteps are, and the ranks agree (their mean)
// how many more steps fill probe_s; then the window closes, on every rank
// at the same step, and Report() tells what it saw.
class ProbeWindow {
 public:
  static constexpr int64_t kWarmupSteps = 2, kCalibrationSteps = 3;
  explicit ProbeWindow(double seconds) : seconds_(seconds) {}

  // After every optimizer step; true once the window is closed.
  StatusOr<bool> AfterStep(double samples, const Loader& loader, const GradientSync& sync, Comm& comm) {
    ++steps_;
    if (steps_ == kWarmupSteps) {
      start_ = std::chrono::steady_clock::now();
      wait_at_start_ = loader.stats().wait_seconds;
      sync_at_start_ = sync.blocked_seconds();
      return false;
    }
    if (steps_ < kWarmupSteps) return false;
    samples_ += samples;
    if (steps_ == kWarmupSteps + kCalibrationSteps) {
      torch::Tensor elapsed = torch::tensor({SecondsSince(start_)}, torch::kFloat64);
      GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(elapsed));
      const double per_step = elapsed.item<double>() / comm.world() / kCalibrationSteps;
      last_step_ = steps_ + static_cast<int64_t>(std::max(
                                0.0, std::round((seconds_ - per_step * kCalibrationSteps) / std::max(per_step, 1e-6))));
    }
    if (last_step_ == 0 || steps_ < last_step_) return false;
    report_.seconds = SecondsSince(start_);
    report_.samples_per_s = samples_ * comm.world() / report_.seconds;
    report_.stall_fraction = (loader.stats().wait_seconds - wait_at_start_) / report_.seconds;
    report_.comm_fraction = (sync.blocked_seconds() - sync_at_start_) / report_.seconds;
    report_.compute_fraction = std::max(0.0, 1 - report_.stall_fraction - report_.comm_fraction);
    torch::Tensor rss = torch::tensor({PeakRssMb()}, torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(rss));
    report_.peak_rss_mb = rss.item<double>();
    return true;
  }
  EpochReport Report() const { return report_; }

 private:
  double seconds_;
  int64_t steps_ = 0, last_step_ = 0;  // last_step_: 0 until calibrated
  double samples_ = 0;                 // this rank's, in the window
  std::chrono::steady_clock::time_point start_;
  double wait_at_start_ = 0, sync_at_start_ = 0;
  EpochReport report_;
};

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

// A loss that is no longer finite ends the run: nothing it trains after that means anything.
Status DivergedAt(double loss, int64_t step, int epoch, double lr) {
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%g", lr);
  return Status::FailedPrecondition("the training loss became " + std::string(std::isnan(loss) ? "nan" : "infinite") +
                                    " at step " + std::to_string(step + 1) + " (epoch " + std::to_string(epoch + 1) +
                                    "): the run diverged; try a lower --lr (now " + rate +
                                    "), --precision fp32 or a smaller --batch-size");
}

}  // namespace

Status CheckModelFits(const TrainConfig& config, const Workload& workload, int64_t classes) {
  const std::string context = config.data.db + ": field '" + workload.input_field + "'";
  ModelSpec spec = SpecFor(config.model, workload, classes);
  StatusOr<std::shared_ptr<Classifier>> model = Status::FailedPrecondition("no model");
  GRANARY_RETURN_IF_ERROR(CatchTorch("building the model", [&] { model = CreateModel(spec); }));
  if (!model.ok()) return model.status().WithContext(context);
  // A dry forward of a batch of two: the model takes the db's input and
  // gives one logit per class.
  Shape batch = {2};
  batch.insert(batch.end(), spec.input.begin(), spec.input.end());
  const std::string shapes = "model " + spec.name + " on input " + ShapeToString(batch);
  // On a thread of its own, bounded by --timeout: a model's forward may loop.
  // Past it the thread is left running and the caller must end the process.
  struct DryRun {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    Status ran;
    torch::Tensor logits;
  };
  auto dry = std::make_shared<DryRun>();
  std::thread([dry, net = model.value(), batch] {
    Status ran = CatchTorch("dry forward", [&] {
      torch::NoGradGuard no_grad;
      net->eval();
      dry->logits = net->forward(torch::zeros(batch));
    });
    std::lock_guard<std::mutex> lock(dry->mutex);
    dry->ran = ran;
    dry->done = true;
    dry->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(dry->mutex);
  if (!dry->done_cv.wait_for(lock, std::chrono::seconds(config.dist.timeout_s), [&] { return dry->done; })) {
    return Status::FailedPrecondition(context + ": " + shapes + ": the forward did not return within --timeout " +
                                      std::to_string(config.dist.timeout_s) + " s (does the model loop?)");
  }
  if (!dry->ran.ok()) return dry->ran.WithContext(context + ": " + shapes);
  const torch::Tensor logits = dry->logits;
  const Shape want = {2, classes};
  if (logits.sizes().vec() != want) {
    return Status::InvalidArgument(context + ": " + shapes + " gives " + ShapeToString(logits.sizes().vec()) +
                                   ", training needs " + ShapeToString(want) + " (" + std::to_string(classes) +
                                   " classes)");
  }
  return Status::OK();
}

StatusOr<std::vector<EpochReport>> RunRank(const TrainConfig& config, int rank, RunObserver& observer,
                                           std::optional<Checkpoint> resumed) {
  const int threads = config.ThreadsPerRank(CoreCount());  // resolved by the launcher
  SizeThreadPools(threads);
  KeepFreedMemory();

  StatusOr<std::unique_ptr<DbReader>> db = DbReader::Open(config.data.db);
  if (!db.ok()) return db.status();
  const Manifest& manifest = db.value()->manifest();
  TrainConfig c = config;  // resolved already when it comes from the launcher
  StatusOr<Workload> workload = ResolveWorkload(manifest, c.data.db, &c);
  if (!workload.ok()) return workload.status();
  StatusOr<std::unique_ptr<Loader>> loader = TrainLoader(*db.value(), c, workload.value(), rank);
  if (!loader.ok()) return loader.status();
  if (!c.data.eval_split.empty() && manifest.FindSplit(c.data.eval_split) == nullptr) {
    return Status::NotFound(c.data.db + ": no split '" + c.data.eval_split + "' to evaluate on");
  }

  ModelSpec spec = SpecFor(c.model, workload.value(), manifest.num_classes);
  if (workload->kind == InputKind::kFeatures && !c.data.synthetic) {
    LoaderOptions stats = BaseLoaderOptions(c.data, workload.value());
    stats.split = c.data.train_split;
    stats.batch_size = 1024;
    StatusOr<InputStatistics> s = ComputeInputStatistics(*db.value(), stats);
    if (!s.ok()) return s.status();
    spec.input_mean = s->mean;
    spec.input_std = s->stddev;
  }
  // Same initial weights everywhere: seeded init, then rank 0's broadcast.
  torch::manual_seed(c.optim.seed);
  StatusOr<std::shared_ptr<Classifier>> model = Status::FailedPrecondition("no model");
  GRANARY_RETURN_IF_ERROR(CatchTorch("building the model", [&] { model = CreateModel(spec); }));
  if (!model.ok()) return model.status().WithContext(c.data.db);
  Classifier& net = *model.value();
  StatusOr<Precision> precision = Precision::Create(c.model);
  if (!precision.ok()) return precision.status();
  GRANARY_RETURN_IF_ERROR(CatchTorch("channels-last weights", [&] { precision->Prepare(net); }));
  // --resume (resolved to a file and checked by RunTrain): the weights now,
  // the optimizer's state once it exists, the position below.
  if (!c.checkpoint.resume.empty() && !resumed) {
    StatusOr<Checkpoint> read = ReadCheckpoint(c.checkpoint.resume);
    if (!read.ok()) return read.status().WithContext("--resume");
    resumed = std::move(read).value();
  }
  if (resumed) GRANARY_RETURN_IF_ERROR(RestoreCheckpoint(*resumed, &net, nullptr));
  std::string run;  // rank 0's checkpoints name the run that claimed --checkpoint-dir before the ranks started
  if (rank == 0 && !c.checkpoint.dir.empty()) {
    StatusOr<std::string> owner = CheckpointDirRun(c.checkpoint.dir);
    if (!owner.ok()) return owner.status().WithContext("--checkpoint-dir");
    run = owner.value();
  }

  CommOptions co;
  co.rank = rank;
  co.world = c.World();
  co.iface = c.dist.iface;
  co.timeout_s = c.dist.timeout_s;
  co.host = c.dist.host;
  co.port = c.dist.port;
  co.store_file = c.dist.rendezvous_file;
  StatusOr<std::unique_ptr<Comm>> comm = Comm::Create(co);
  if (!comm.ok()) return comm.status();
  std::vector<torch::Tensor> params = net.parameters();
  // BatchNorm statistics and the like: rank 0's, before every step (DDP's rule).
  const std::vector<torch::Tensor> buffers = net.buffers();
  {
    torch::NoGradGuard no_grad;
    GRANARY_RETURN_IF_ERROR(comm.value()->Broadcast(params));
  }
  StatusOr<std::unique_ptr<GradientSync>> sync =
      CreateGradientSync(c.sync.method, static_cast<size_t>(c.sync.bucket_mb * (1 << 20)), *comm.value());
  if (!sync.ok()) return sync.status();
  GRANARY_RETURN_IF_ERROR(sync.value()->Attach(params));
  StatusOr<std::unique_ptr<torch::optim::Optimizer>> made = CreateOptimizer(c.optim, params);
  if (!made.ok()) return made.status();
  torch::optim::Optimizer& optimizer = *made.value();
  if (resumed) GRANARY_RETURN_IF_ERROR(RestoreCheckpoint(*resumed, nullptr, &optimizer));

  std::vector<EpochReport> reports;
  Loader& train = *loader.value();
  const uint64_t accum = static_cast<uint64_t>(c.optim.accum);
  const uint64_t steps_per_epoch = (train.batches_per_epoch() + accum - 1) / accum;  // optimizer steps
  const LrSchedule schedule(c.optim, static_cast<int64_t>(steps_per_epoch));
  const RunPosition start_at = resumed ? resumed->header.at : RunPosition{};
  int64_t step = start_at.global_step;  // optimizer steps so far
  EpochPlanReport plan;
  plan.samples_per_rank = train.sampler().samples_per_rank();
  plan.padded = train.sampler().padded();
  plan.dropped = train.sampler().dropped();
  plan.threads_per_rank = threads;
  plan.model = c.model.name;
  for (const torch::Tensor& p : params) plan.parameters += static_cast<uint64_t>(p.numel());
  plan.peak_lr = schedule.peak();
  observer.Plan(plan);
  Batch batch;
  const int64_t micro_batch = c.optim.batch_size / (c.World() * c.optim.accum);
  SyntheticBatch synthetic;
  if (c.data.synthetic) {
    GRANARY_RETURN_IF_ERROR(CatchTorch("synthetic batch", [&] {
      synthetic = MakeSyntheticBatch(train, micro_batch, manifest.num_classes, precision->channels_last());
    }));
  }
  if (resumed && rank == 0) ReportResume(*resumed, c);
  // At a checkpoint, every rank's epoch-so-far loss (gathered: a sum where
  // only row `rank` is not zero is exact), then rank 0 writes, in the
  // background: its peers never wait for its disk. A checkpoint due while
  // the one before is still being written is skipped, with a note; the run's
  // last is kept (`final`) and written after the last collective.
  CheckpointWriter checkpoints;
  std::optional<CheckpointHeader> final_checkpoint;
  auto checkpoint = [&](RunPosition at, double loss_sum, double samples, bool final = false) -> Status {
    torch::Tensor rows = torch::zeros({c.World(), 2}, torch::kFloat64);
    rows[rank][0] = loss_sum;
    rows[rank][1] = samples;
    GRANARY_RETURN_IF_ERROR(comm.value()->AllReduceSum(rows));
    at.world = c.World();
    for (int r = 0; r < c.World(); ++r) {
      at.loss_sums.push_back(rows[r][0].item<double>());
      at.sample_counts.push_back(rows[r][1].item<double>());
    }
    if (rank != 0) return Status::OK();
    CheckpointHeader header{c, manifest.content_hash, at, run};
    if (final) {
      final_checkpoint = header;
      return Status::OK();
    }
    if (checkpoints.Busy()) {
      std::fprintf(stderr,
                   "train: checkpoint of step %lld skipped: the one before is still being written "
                   "(a slow disk? a larger --checkpoint-every)\n",
                   static_cast<long long>(at.global_step));
      return Status::OK();
    }
    return checkpoints.Write(c.checkpoint.dir, header, net, optimizer, c.checkpoint.keep);
  };
  std::optional<ProbeWindow> probe;  // train --tune's measurement: no evaluation, checkpoint or saved model
  if (c.data.probe_s > 0) probe.emplace(c.data.probe_s);
  bool probe_closed = false;
  for (int epoch = static_cast<int>(start_at.epoch); epoch < c.optim.epochs || probe; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    const LoaderStats before = train.stats();
    const double sync_before = sync.value()->blocked_seconds();
    const bool resuming = resumed && static_cast<uint64_t>(epoch) == start_at.epoch;
    if (!c.data.synthetic) train.StartEpoch(static_cast<uint64_t>(epoch), resuming ? start_at.position : 0);
    double local_loss_sum = 0, local_samples = 0, compute_seconds = 0;
    if (resuming) {  // the epoch's loss so far: each rank its own, or all of it on rank 0 in another world
      const bool same_world = start_at.world == c.World();
      for (int r = 0; r < start_at.world; ++r) {
        if (same_world ? r == rank : rank == 0) {
          local_loss_sum += start_at.loss_sums[r];
          local_samples += start_at.sample_counts[r];
        }
      }
    }
    const double samples_before = local_samples;  // not trained in this run: not in samples/s
    double step_loss_sum = 0, step_samples = 0;   // this optimizer step's micro-batches
    // Gradients accumulate over `accum` micro-batches (fewer in the epoch's
    // last group); only the group's last backward is synchronised (DDP's
    // no_sync), and the optimizer steps once per group.
    const uint64_t batches = train.batches_per_epoch();
    uint64_t group = 1;                       // micro-batches in the current group
    const bool sync_now = !c.data.synthetic;  // --synthetic: ranks train apart
    for (uint64_t b = 0;; ++b) {
      torch::Tensor input, target;
      if (c.data.synthetic) {
        if (b == batches) break;
        input = synthetic.input;
        target = synthetic.target;
      } else {
        StatusOr<bool> more = train.Next(&batch);
        if (!more.ok()) return more.status();
        if (!more.value()) break;
        for (const std::string& reason : batch.skipped_reasons) {
          std::fprintf(stderr, "train: rank %d: skipped corrupt %s\n", rank, Printable(reason).c_str());
        }
        GRANARY_RETURN_IF_ERROR(CatchTorch("batch tensors", [&] {
          input = InputTensor(batch, precision->channels_last());
          target = TargetTensor(batch);
        }));
      }
      const bool group_start = b % accum == 0;
      const bool group_end = (b + 1) % accum == 0 || b + 1 == batches;
      if (group_start) {
        group = std::min(accum, batches - b);
        torch::manual_seed(StepSeed(c.optim.seed, rank, step));  // dropout: a function of where the run is
      }
      const auto step_start = std::chrono::steady_clock::now();
      if (group_start && sync_now && !buffers.empty()) {
        torch::NoGradGuard no_grad;
        GRANARY_RETURN_IF_ERROR(comm.value()->Broadcast(buffers));
      }
      double batch_loss = 0;
      GRANARY_RETURN_IF_ERROR(CatchTorch("training step", [&] {
        if (group_start) optimizer.zero_grad();
        torch::Tensor logits = precision->Forward(net, input);
        torch::Tensor loss = TrainingLoss(logits, target, c.optim.label_smoothing);
        if (group_end && sync_now) sync.value()->BeginStep();
        (group > 1 ? loss / static_cast<double>(group) : loss).backward();
        batch_loss = loss.item<double>() * static_cast<double>(input.size(0));
        if (group_start) step_loss_sum = step_samples = 0;
        step_loss_sum += batch_loss;
        step_samples += static_cast<double>(input.size(0));
        local_loss_sum += batch_loss;
        local_samples += static_cast<double>(input.size(0));
      }));
      if (!std::isfinite(batch_loss)) return DivergedAt(batch_loss, step, epoch, c.optim.lr);
      const double sync_blocked = sync.value()->blocked_seconds();
      if (group_end) {
        if (sync_now) GRANARY_RETURN_IF_ERROR(sync.value()->FinishStep());
        const double lr = schedule.At(step++);
        GRANARY_RETURN_IF_ERROR(CatchTorch("optimizer step", [&] {
          for (torch::optim::OptimizerParamGroup& g : optimizer.param_groups()) g.options().set_lr(lr);
          optimizer.step();
        }));
        HeartbeatStep(step);
        if (rank == 0) {
          StepReport s;
          s.epoch = epoch + 1;
          s.step = (b + 1 + accum - 1) / accum;
          s.steps = steps_per_epoch;
          s.global_step = step;
          s.loss = step_loss_sum / std::max(1.0, step_samples);
          s.epoch_loss = local_loss_sum / std::max(1.0, local_samples);
          s.lr = lr;
          s.seconds = SecondsSince(start);
          s.samples_per_s = (local_samples - samples_before) * c.World() / std::max(1e-9, s.seconds);
          observer.Step(s);
        }
        const bool epoch_end = b + 1 == batches;
        if (!c.checkpoint.dir.empty() && c.checkpoint.every > 0 && step % c.checkpoint.every == 0 && !epoch_end &&
            !c.data.synthetic && !probe) {
          RunPosition at;
          at.global_step = step;
          at.epoch = static_cast<uint64_t>(epoch);
          at.position = train.state().position;
          GRANARY_RETURN_IF_ERROR(checkpoint(at, local_loss_sum, local_samples));
        }
        if (probe) {
          StatusOr<bool> closed = probe->AfterStep(step_samples, train, *sync.value(), *comm.value());
          if (!closed.ok()) return closed.status();
          probe_closed = closed.value();
          if (probe_closed) break;
        }
      }
      // The step's own time, less what it waited for the sync.
      compute_seconds += SecondsSince(step_start) - (sync.value()->blocked_seconds() - sync_blocked);
    }
    if (probe) {  // every rank ends its epochs alike, so skipping their collectives is safe
      if (!probe_closed) continue;
      reports.push_back(probe->Report());
      break;
    }
    const double seconds = SecondsSince(start);
    torch::Tensor totals = torch::tensor({local_loss_sum, local_samples, samples_before, PeakRssMb()}, torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(comm.value()->AllReduceSum(totals));
    const double samples = totals[1].item<double>();
    const double trained = samples - totals[2].item<double>();  // by this run

    EpochReport r;
    r.epoch = epoch + 1;
    r.train_loss = totals[0].item<double>() / std::max(1.0, samples);
    r.lr = schedule.At(std::max<int64_t>(0, step - 1));
    r.seconds = seconds;
    r.samples_per_s = trained / seconds;
    const LoaderStats after = train.stats();
    r.stall_fraction = (after.wait_seconds - before.wait_seconds) / seconds;
    r.queue_depth = after.batches > before.batches ? static_cast<double>(after.ready_sum - before.ready_sum) /
                                                         static_cast<double>(after.batches - before.batches)
                                                   : 0.0;
    r.comm_fraction = (sync.value()->blocked_seconds() - sync_before) / seconds;
    r.compute_fraction = compute_seconds / seconds;
    r.peak_rss_mb = totals[3].item<double>();
    if (!c.data.eval_split.empty() && !c.data.synthetic) {  // every rank its share, then the sums
      LoaderOptions eval = BaseLoaderOptions(c.data, workload.value());
      eval.channels_last = c.model.channels_last;
      eval.split = c.data.eval_split;
      eval.batch_size = 256;
      StatusOr<EvalResult> result = Evaluate(*db.value(), eval, net, precision.value(), rank, c.World());
      if (!result.ok()) return result.status();
      torch::Tensor sums =
          torch::tensor({result->loss_sum, static_cast<double>(result->correct), static_cast<double>(result->samples)},
                        torch::kFloat64);
      GRANARY_RETURN_IF_ERROR(comm.value()->AllReduceSum(sums));
      const double samples = sums[2].item<double>();
      r.evaluated = true;
      r.test_loss = sums[0].item<double>() / std::max(1.0, samples);
      r.test_accuracy = sums[1].item<double>() / std::max(1.0, samples);
      r.test_samples = static_cast<uint64_t>(samples);
    }
    if (rank == 0) r.weights_hash = WeightsHash(params);
    if (!c.checkpoint.dir.empty() && !c.data.synthetic) {
      RunPosition at;
      at.global_step = step;
      at.epoch = static_cast<uint64_t>(epoch) + 1;
      GRANARY_RETURN_IF_ERROR(checkpoint(at, 0, 0, /*final=*/epoch + 1 == c.optim.epochs));
    }
    GRANARY_RETURN_IF_ERROR(comm.value()->Barrier());
    reports.push_back(r);
    observer.Epoch(r);
  }
  if (rank == 0 && !c.output.save.empty() && !probe) GRANARY_RETURN_IF_ERROR(SaveTorchScript(net, c.output.save));
  // No collective follows: rank 0 may wait for its disk (beating its heart,
  // so the launcher does not take a slow disk for a hang). The last
  // checkpoint is on disk before the run says it ended.
  auto wait_for_disk = [&] {
    while (checkpoints.Busy()) {
      HeartbeatBeat();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return checkpoints.Wait();
  };
  if (final_checkpoint) {
    GRANARY_RETURN_IF_ERROR(wait_for_disk());
    GRANARY_RETURN_IF_ERROR(checkpoints.Write(c.checkpoint.dir, *final_checkpoint, net, optimizer, c.checkpoint.keep));
  }
  GRANARY_RETURN_IF_ERROR(wait_for_disk());
  return reports;
}

}  // namespace granary
