// TrainConfig's bounds (Validate, ValidateEvaluation: every flag named when
// out of range), its resolved defaults and what a run leaves unused. Its
// JSON form is config_json.cc.
#include "trainer/config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "loader/augment.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "trainer/config/choices.h"
#include "trainer/number_text.h"

namespace granary {
namespace {

// Hard limits, whatever the machine: beyond them a run cannot be meant.
constexpr int64_t kMaxBatch = int64_t{1} << 20;
constexpr int kMaxEpochs = 1000000;
constexpr int kMaxAccum = 1024;
constexpr int kMaxNodes = 4096;
constexpr int kMaxTimeout = 24 * 3600;
// --tune-seconds: below, warm-up and noise swamp the figure.
constexpr double kMinTuneSeconds = 0.5, kMaxTuneSeconds = 600;
// With --oversubscribe, ranks x threads may reach this many times the cores.
constexpr int kOversubscribeFactor = 8;

// Validate's sections, each the bounds of its flags. `cores`: the CPUs one
// process (a rank) may use.
Status ValidateData(const DataConfig& data, int cores) {
  const DataConfig& d = data;
  if (d.db.empty()) return Status::InvalidArgument("--db is empty");
  if (d.train_split.empty()) return Status::InvalidArgument("--train-split is empty");
  const int max_loader_threads = kLoaderThreadsPerCore * cores;
  if (d.loader_threads < 1 || d.loader_threads > max_loader_threads) {
    return OutOfRange("--loader-threads", std::to_string(d.loader_threads),
                      Range(1, max_loader_threads) + " (" + std::to_string(kLoaderThreadsPerCore) + " x the " +
                          std::to_string(cores) + (cores == 1 ? " CPU" : " CPUs") + " a rank may use)");
  }
  if (d.prefetch < 1 || d.prefetch > kMaxLoaderPrefetch) {
    return OutOfRange("--prefetch", std::to_string(d.prefetch), Range(1, kMaxLoaderPrefetch));
  }
  GRANARY_RETURN_IF_ERROR(ParseShuffleMode(d.shuffle).status());
  GRANARY_RETURN_IF_ERROR(ParseAugment(d.augment).status());
  if (!std::isfinite(d.mean)) return OutOfRange("--mean", NumberText(d.mean), "must be finite");
  if (!(std::isfinite(d.stddev) && d.stddev > 0)) {
    return OutOfRange("--std", NumberText(d.stddev), "must be finite and > 0");
  }
  if (d.probe_s != 0) GRANARY_RETURN_IF_ERROR(CheckTuneSeconds(d.probe_s));
  return Status::OK();
}

Status ValidateModel(const ModelConfig& model) {
  if (model.name != "auto" && !IsKnownModel(model.name) && !IsModelFile(model.name)) {
    // A torchvision name (resnet18, mobilenet_v2, vgg11, ...): how any of them trains here.
    const bool torchvision = model.name.find_first_of("0123456789_") != std::string::npos;
    return OutOfRange("--model", model.name,
                      "unknown (known: auto, " + KnownModelNames() + ", or a TorchScript FILE.pt)" +
                          (torchvision ? "; torchvision's models train as TorchScript files: python3 -c \"import "
                                         "torch, torchvision; torch.jit.script(torchvision.models." + model.name +
                                         "(num_classes=N)).save('" + model.name + ".pt')\" (N: the db's classes), "
                                         "then --model " + model.name + ".pt (one pretrained on ImageNet, weights="
                                         "'DEFAULT', with --new-head); resnet and mobilenet here are small "
                                         "ones, for 32-128 px images"
                                       : ""));
  }
  if (model.new_head && !IsModelFile(model.name)) {
    return Status::InvalidArgument("--new-head: replaces the last layer of a model file (--model FILE.pt); --model " +
                                   model.name + " is built for the db's classes as it is");
  }
  if (model.freeze && !IsModelFile(model.name)) {
    return Status::InvalidArgument("--freeze: keeps a model file's trained layers (--model FILE.pt) as they are; "
                                   "--model " + model.name + " starts from random weights, with none to keep");
  }
  if (!(model.width >= kMinModelWidth && model.width <= kMaxModelWidth)) {
    return OutOfRange("--width", NumberText(model.width),
                      "must be in " + NumberText(kMinModelWidth) + ".." + NumberText(kMaxModelWidth));
  }
  if (!(model.dropout >= 0 && model.dropout < 1)) {
    return OutOfRange("--dropout", NumberText(model.dropout), "must be in [0, 1)");
  }
  return Status::OK();
}

Status ValidateOptim(const OptimConfig& optim) {
  if (!IsKnownOptimizer(optim.optimizer)) {
    return OutOfRange("--optimizer", optim.optimizer, "unknown (known: " + KnownOptimizerNames() + ")");
  }
  if (!(std::isfinite(optim.lr) && optim.lr > 0)) {
    return OutOfRange("--lr", NumberText(optim.lr), "must be finite and > 0");
  }
  if (!(optim.momentum >= 0 && optim.momentum < 1)) {
    return OutOfRange("--momentum", NumberText(optim.momentum), "must be in [0, 1)");
  }
  if (optim.momentum > 0 && optim.optimizer != "sgd") {
    return Status::InvalidArgument("--momentum is for --optimizer sgd (" + optim.optimizer + " has its own betas)");
  }
  if (optim.nesterov && !(optim.optimizer == "sgd" && optim.momentum > 0)) {
    return Status::InvalidArgument("--nesterov needs --optimizer sgd with --momentum above 0");
  }
  if (!(std::isfinite(optim.weight_decay) && optim.weight_decay >= 0 && optim.weight_decay < 1)) {
    return OutOfRange("--weight-decay", NumberText(optim.weight_decay), "must be in [0, 1)");
  }
  if (optim.epochs < 1 || optim.epochs > kMaxEpochs) {
    return OutOfRange("--epochs", std::to_string(optim.epochs), Range(1, kMaxEpochs));
  }
  if (optim.batch_size < 1 || optim.batch_size > kMaxBatch) {
    return OutOfRange("--batch-size", std::to_string(optim.batch_size), Range(1, kMaxBatch));
  }
  if (!IsKnownSchedule(optim.schedule)) {
    return OutOfRange("--schedule", optim.schedule, "unknown (known: " + KnownScheduleNames() + ")");
  }
  if (!(optim.warmup_epochs >= 0 && optim.warmup_epochs <= optim.epochs)) {
    return OutOfRange("--warmup-epochs", NumberText(optim.warmup_epochs),
                      "must be in 0..--epochs (" + std::to_string(optim.epochs) + ")");
  }
  if (optim.base_batch < 1 || optim.base_batch > kMaxBatch) {
    return OutOfRange("--base-batch", std::to_string(optim.base_batch), Range(1, kMaxBatch));
  }
  if (!(optim.label_smoothing >= 0 && optim.label_smoothing < 1)) {
    return OutOfRange("--label-smoothing", NumberText(optim.label_smoothing), "must be in [0, 1)");
  }
  if (optim.class_weights != "none" && optim.class_weights != "balanced") {
    return OutOfRange("--class-weights", optim.class_weights, "must be none or balanced");
  }
  return Status::OK();
}

Status ValidateSync(const SyncConfig& sync) {
  if (!(sync.bucket_mb >= 0.001 && sync.bucket_mb <= 1024)) {
    return OutOfRange("--bucket-mb", NumberText(sync.bucket_mb), "must be in 0.001..1024");
  }
  if (sync.compress != Compression::kNone && sync.method != SyncMethod::kBucketed) {
    return Status::InvalidArgument(std::string("--sync-compress ") + NameOf(sync.compress) + " needs --sync bucketed");
  }
  if (sync.powersgd_rank < 1 || sync.powersgd_rank > 256) {
    return OutOfRange("--powersgd-rank", std::to_string(sync.powersgd_rank), Range(1, 256));
  }
  if (sync.powersgd_warmup < 0 || sync.powersgd_warmup > kMaxEpochs) {
    return OutOfRange("--powersgd-warmup", std::to_string(sync.powersgd_warmup), Range(0, kMaxEpochs));
  }
  return Status::OK();
}

// Ranks, threads and nodes on `cores` cores, and a batch that divides over them.
Status ValidateLayout(const TrainConfig& c, int cores) {
  const DistConfig& dist = c.dist;
  const OptimConfig& optim = c.optim;
  const int hard_cap = kOversubscribeFactor * cores;
  const std::string cores_text = std::to_string(cores) + (cores == 1 ? " core" : " cores");
  if (dist.ranks < 1 || dist.ranks > hard_cap) {
    return OutOfRange("--ranks", std::to_string(dist.ranks),
                      Range(1, hard_cap) + " (" + std::to_string(kOversubscribeFactor) + " x " + cores_text + ")");
  }
  if (dist.threads < 0 || dist.threads > hard_cap) {
    return OutOfRange("--threads", std::to_string(dist.threads), Range(0, hard_cap) + " (0: cores / ranks)");
  }
  const int64_t used = int64_t{dist.ranks} * c.ThreadsPerRank(cores);
  if (used > cores && !dist.oversubscribe) {
    const std::string fits = dist.ranks > cores ? "--ranks " + std::to_string(cores) + " fits, or "
                             : dist.threads > 0 ? "--threads " + std::to_string(std::max(1, cores / dist.ranks)) +
                                                      " fits, or "
                                                : "";
    return Status::InvalidArgument("--ranks " + std::to_string(dist.ranks) + " x --threads " +
                                   std::to_string(c.ThreadsPerRank(cores)) + " = " + std::to_string(used) +
                                   " threads on " + cores_text + ": " + fits + "pass --oversubscribe to run it anyway");
  }
  if (used > hard_cap) {
    return Status::InvalidArgument("--ranks " + std::to_string(dist.ranks) + " x --threads " +
                                   std::to_string(c.ThreadsPerRank(cores)) + " = " + std::to_string(used) +
                                   " threads: more than " + std::to_string(kOversubscribeFactor) + " x " +
                                   cores_text + " even with --oversubscribe");
  }
  if (optim.accum < 1 || optim.accum > kMaxAccum) {
    return OutOfRange("--accum", std::to_string(optim.accum), Range(1, kMaxAccum));
  }
  if (dist.nnodes < 1 || dist.nnodes > kMaxNodes) {
    return OutOfRange("--nnodes", std::to_string(dist.nnodes), Range(1, kMaxNodes));
  }
  if (dist.node_rank < 0 || dist.node_rank >= dist.nnodes) {
    return OutOfRange("--node-rank", std::to_string(dist.node_rank), Range(0, dist.nnodes - 1) + " (--nnodes)");
  }
  if (dist.nnodes > 1 && dist.port == 0 && dist.backend != Backend::kMpi) {
    return Status::InvalidArgument("--nnodes " + std::to_string(dist.nnodes) +
                                   " needs --master-port (and --master-addr: node 0's address)");
  }
  if (dist.timeout_s < 1 || dist.timeout_s > kMaxTimeout) {
    return OutOfRange("--timeout", std::to_string(dist.timeout_s), Range(1, kMaxTimeout));
  }
  const int64_t world = c.World();
  const std::string ranks_text =
      (dist.nnodes > 1 ? "--ranks x --nnodes " : "--ranks ") + std::to_string(world);
  if (optim.batch_size % world != 0) {
    return Status::InvalidArgument("--batch-size " + std::to_string(optim.batch_size) +
                                   " must be a positive multiple of " + ranks_text);
  }
  if (optim.batch_size % (world * optim.accum) != 0) {
    return Status::InvalidArgument("--batch-size " + std::to_string(optim.batch_size) + " must be a multiple of " +
                                   ranks_text + " x --accum " + std::to_string(optim.accum));
  }
  return Status::OK();
}

Status ValidateOutputs(const OutputConfig& output) {
  if (output.log_every < 1 || output.log_every > kMaxEpochs) {
    return OutOfRange("--log-every", std::to_string(output.log_every), Range(1, kMaxEpochs));
  }
  return Status::OK();
}

// "A-B" as (A, B); (0, 0) if it does not read so.
std::pair<int, int> ParseEpochRange(const std::string& text) {
  int first = 0, last = 0;
  char dash = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d %c %d %c", &first, &dash, &last, &extra) != 3 || dash != '-') return {0, 0};
  return {first, last};
}

// A flag set away from its default for a choice that is off is a mistake the
// run would hide (--powersgd-rank 8 without powersgd): refused, naming both
// (the features' flags: each feature's Validate). ClearUnused (below) keeps
// such values out of the comparisons.
Status ValidateUnused(const TrainConfig& c) {
  const TrainConfig defaults;
  if (c.sync.compress != Compression::kPowerSgd) {
    if (c.sync.powersgd_rank != defaults.sync.powersgd_rank) {
      return OnlyUsedWith("--powersgd-rank", std::to_string(c.sync.powersgd_rank), "--sync-compress powersgd");
    }
    if (c.sync.powersgd_warmup != defaults.sync.powersgd_warmup) {
      return OnlyUsedWith("--powersgd-warmup", std::to_string(c.sync.powersgd_warmup), "--sync-compress powersgd");
    }
  }
  if (c.sync.method != SyncMethod::kBucketed && c.sync.bucket_mb != defaults.sync.bucket_mb) {
    return OnlyUsedWith("--bucket-mb", NumberText(c.sync.bucket_mb), "--sync bucketed");
  }
  if (c.optim.lr_scaling == LrScaling::kNone && c.optim.base_batch != defaults.optim.base_batch) {
    return OnlyUsedWith("--base-batch", std::to_string(c.optim.base_batch), "--lr-scaling linear");
  }
  return Status::OK();
}

Status ValidateRendezvous(const DistConfig& dist) {
  if (dist.host.empty()) return Status::InvalidArgument("--master-addr is empty");
  if (dist.port < 0 || dist.port > 65535) {
    return OutOfRange("--master-port", std::to_string(dist.port), Range(0, 65535));
  }
  return Status::OK();
}

}  // namespace

Status CheckTuneSeconds(double seconds) {
  if (seconds >= kMinTuneSeconds && seconds <= kMaxTuneSeconds) return Status::OK();
  return OutOfRange("--tune-seconds", NumberText(seconds),
                    "must be in " + NumberText(kMinTuneSeconds) + ".." + NumberText(kMaxTuneSeconds));
}

std::pair<int, int> PruneEpochs(const ShrinkConfig& shrink, int epochs) {
  if (shrink.prune_epochs.empty()) return {1, std::max(1, epochs / 2)};
  return ParseEpochRange(shrink.prune_epochs);
}

void TrainConfig::ResolveDefaults() {
  if (!IsKnownOptimizer(optim.optimizer)) return;
  const OptimizerDefaults d = DefaultsOf(optim.optimizer);
  if (optim.lr < 0) optim.lr = d.lr;
  if (optim.weight_decay < 0) optim.weight_decay = d.weight_decay;
}

int TrainConfig::ThreadsPerRank(int cores) const {
  return dist.threads > 0 ? dist.threads : std::max(1, cores / std::max(1, dist.ranks));
}

bool TrainConfig::PinsRanks(int cores) const {
  return dist.pin && int64_t{dist.ranks} * ThreadsPerRank(cores) <= cores;
}

Status TrainConfig::Validate(int cores) const {
  GRANARY_RETURN_IF_ERROR(ValidateData(data, CpusPerRank(cores)));
  GRANARY_RETURN_IF_ERROR(ValidateModel(model));
  GRANARY_RETURN_IF_ERROR(ValidateOptim(optim));
  GRANARY_RETURN_IF_ERROR(ValidateSync(sync));
  GRANARY_RETURN_IF_ERROR(ValidateLayout(*this, cores));
  GRANARY_RETURN_IF_ERROR(ValidateOutputs(output));
  GRANARY_RETURN_IF_ERROR(ValidateUnused(*this));
  return ValidateRendezvous(dist);
}

Status TrainConfig::ValidateEvaluation(int cores) const {
  GRANARY_RETURN_IF_ERROR(ValidateData(data, cores));
  GRANARY_RETURN_IF_ERROR(ValidateModel(model));
  if (dist.threads < 0 || dist.threads > cores) {
    return OutOfRange("--threads", std::to_string(dist.threads),
                      Range(0, cores) + " (this machine's " + std::to_string(cores) + " cores; 0: all of them)");
  }
  if (dist.timeout_s < 1 || dist.timeout_s > kMaxTimeout) {
    return OutOfRange("--timeout", std::to_string(dist.timeout_s), Range(1, kMaxTimeout));
  }
  return Status::OK();
}

void TrainConfig::ClearUnused() {
  const TrainConfig defaults;
  if (sync.compress != Compression::kPowerSgd) {
    sync.powersgd_rank = defaults.sync.powersgd_rank;
    sync.powersgd_warmup = defaults.sync.powersgd_warmup;
  }
  if (sync.method != SyncMethod::kBucketed) sync.bucket_mb = defaults.sync.bucket_mb;
  if (shrink.quantize == Quantize::kNone) shrink.calibration_batches = defaults.shrink.calibration_batches;
  if (optim.lr_scaling == LrScaling::kNone) optim.base_batch = defaults.optim.base_batch;
  if (checkpoint.dir.empty()) checkpoint.keep = defaults.checkpoint.keep;
}

namespace {

// `text` as flag's choice into *out, or OutOfRange naming its choices.
template <typename E>
Status ParseFlag(const char* flag, const std::string& text, E* out) {
  if (ParseChoice(text, out)) return Status::OK();
  return OutOfRange(flag, text, "expected " + ChoiceNames(*out));
}

}  // namespace

ChoiceFlags::ChoiceFlags(const TrainConfig& d)
    : precision(NameOf(d.model.precision)),
      lr_scaling(NameOf(d.optim.lr_scaling)),
      sync(NameOf(d.sync.method)),
      sync_compress(NameOf(d.sync.compress)),
      backend(NameOf(d.dist.backend)),
      quantize(NameOf(d.shrink.quantize)) {}

Status ChoiceFlags::ParseInto(TrainConfig* c) const {
  GRANARY_RETURN_IF_ERROR(ParseFlag("--precision", precision, &c->model.precision));
  GRANARY_RETURN_IF_ERROR(ParseFlag("--lr-scaling", lr_scaling, &c->optim.lr_scaling));
  GRANARY_RETURN_IF_ERROR(ParseFlag("--sync", sync, &c->sync.method));
  GRANARY_RETURN_IF_ERROR(ParseFlag("--sync-compress", sync_compress, &c->sync.compress));
  GRANARY_RETURN_IF_ERROR(ParseFlag("--backend", backend, &c->dist.backend));
  return ParseFlag("--quantize", quantize, &c->shrink.quantize);
}

Status OutOfRange(const std::string& flag, const std::string& value, const std::string& bound) {
  return Status::InvalidArgument(flag + " " + value + ": " + bound);
}

Status OnlyUsedWith(const std::string& flag, const std::string& value, const std::string& needs) {
  return Status::InvalidArgument(flag + " " + value + ": only used with " + needs);
}

std::string Range(int64_t lo, int64_t hi) { return "must be in " + std::to_string(lo) + ".." + std::to_string(hi); }

}  // namespace granary
