// TrainConfig: everything a training run is configured with, in one value.
// Built once (by train_main.cc from flags, or from JSON), validated before
// any work starts (by the launcher, and again by every rank process, which
// also covers a rank started by torchrun), printed at start, serialised to JSON
// for reports (and checkpoints), and comparable (for resume). Plain data:
// copy it freely; no method touches the filesystem or the network.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "trainer/config/choices.h"

namespace granary {

// What is read and how batches are made.
struct DataConfig {
  std::string db;
  std::string train_split = "train";
  std::string eval_split = "auto";  // "" to skip evaluation; auto: test, else val (not train_split), else none
  std::string input_field;          // "": "image", else the db's only field besides the label
  int loader_threads = 1;           // per rank
  int prefetch = 4;                 // batches the loader prepares ahead
  std::string shuffle = "full";     // full, block (dbs larger than RAM) or none
  bool drop_last = false;           // drop the epoch's tail instead of padding ranks
  bool skip_corrupt = false;        // skip and name corrupt records (training and evaluation)
  std::string augment;              // comma list of flip, crop, rrc ("" none); training only
  float mean = 0.0f;                // input normalisation after scaling to [0, 1]
  float stddev = 1.0f;
  // Measurement only: one random in-memory batch of the db's shape, reused,
  // instead of the loader, and no gradient sync (ranks train apart). What is
  // left is the step's compute, the bound a real run is measured against.
  bool synthetic = false;
  // Measurement only (train --tune): after a few warm-up steps, train about
  // this many seconds, then stop; the run's one report is of that window.
  double probe_s = 0;
};

// Which network (trainer/models/registry.h), its knobs, and how it computes.
struct ModelConfig {
  std::string name = "auto";  // auto: chosen from the db (trainer/config/workload.h)
  double width = 1;           // channel multiplier
  double dropout = 0.4;
  ComputeType precision = ComputeType::kFp32;  // or bf16: CPU autocast, fp32 weights and loss
  bool channels_last = false;      // NHWC batches and conv weights
  bool new_head = false;           // a model file's last linear layer made anew for the db's classes
  bool freeze = false;             // a model file's layers but its last linear one kept as they are
};

// The optimisation recipe. `lr` and `weight_decay` below 0 mean the
// optimizer's default (trainer/optim/optimizer.h), filled in by ResolveDefaults.
struct OptimConfig {
  std::string optimizer = "adam";  // sgd, adam or adamw
  double lr = -1;
  double momentum = 0;             // sgd
  bool nesterov = false;           // sgd, with momentum
  double weight_decay = -1;
  int epochs = 5;
  int64_t batch_size = 64;  // global: each rank takes batch_size / ranks
  int accum = 1;            // micro-batches per step: each rank's batch is split accum ways
  uint64_t seed = 0;        // weights, epoch order, dropout
  // The learning rate over the run (trainer/optim/schedule.h): constant, step (x0.1
  // at half and three quarters of the run) or cosine (to 0), after a linear
  // warm-up; with lr_scaling linear the peak is lr x batch_size / base_batch.
  std::string schedule = "constant";
  double warmup_epochs = 0;
  LrScaling lr_scaling = LrScaling::kNone;
  int64_t base_batch = 256;
  double label_smoothing = 0;
  std::string class_weights = "none";  // or balanced: the loss weighs classes by their rarity (loader/class_counts.h)
  // Stop after the first evaluation at or above this test accuracy, in
  // (0, 1]; 0: train every epoch (trainer/features/stop_at_accuracy/target_accuracy.h).
  double stop_at_accuracy = 0;
};

// How gradients are averaged over ranks (trainer/comm/gradient_sync.h).
struct SyncConfig {
  SyncMethod method = SyncMethod::kBucketed;  // DDP's overlapped buckets, or after-backward (one all-reduce)
  double bucket_mb = 25;                          // bucketed: MiB of gradients per bucket
  Compression compress = Compression::kNone;      // bucketed: none, fp16, bf16, powersgd (trainer/comm/compress.h)
  int powersgd_rank = 4;                  // powersgd: columns of its factors
  int powersgd_warmup = 10;               // powersgd: uncompressed steps first
};

// How the run is laid out over processes and cores.
struct DistConfig {
  int ranks = 2;                   // rank processes on this node
  int threads = 0;                 // intra-op threads per rank; 0: cores / ranks
  int nnodes = 1;                  // nodes (machines), each running `ranks` ranks
  int node_rank = 0;               // this node's index; its ranks are node_rank x ranks + 0 .. ranks - 1
  std::string host = "127.0.0.1";  // --master-addr: where rank 0 serves the rendezvous (TCPStore)
  int port = 0;                    // --master-port; 0 (one node only): no port, a FileStore on a memfd
  std::string iface;               // network interface for Gloo ("": loopback, or this machine's hostname)
  int timeout_s = 60;              // rendezvous and collectives: a lost rank ends the run this much later
  bool oversubscribe = false;      // allow ranks x threads above the cores
  bool pin = true;                 // pin each rank to its own CPUs (trainer/launch/layout.h)
  // The collectives' transport (trainer/comm/comm.h): gloo (TCP), mpi
  // (OpenMPI: shared memory on one machine; mpirun or srun between
  // machines), or auto (mpi inside an MPI job, else gloo: ResolveBackend,
  // trainer/run.cc).
  Backend backend = Backend::kAuto;
  // A rank's only: the launcher's FileStore rendezvous on one machine
  // (trainer/launch/launch.h); not part of a run's config, never written.
  std::string rendezvous_file;
};

// Lighter models (docs/CPU_TRAINING.md): INT8 quantization after training
// (trainer/features/int8/int8_export.h) and structured pruning during it.
struct ShrinkConfig {
  Quantize quantize = Quantize::kNone;  // or int8: post-training, writes FILE.int8.pt beside --save FILE.pt
  int calibration_batches = 32;   // training batches (a rank's) the activation ranges are observed on
  // Structured pruning (trainer/features/prune/pruner.h): this fraction of each
  // prunable layer's channels removed by the end of epoch B of prune_epochs
  // "A-B" (1-based; "" for the first half of the run); 0: none.
  double prune = 0;
  std::string prune_epochs;
};

// --prune-epochs as (first, last), 1-based; the first half of the run if
// unset; (0, 0) if it does not read as A-B (the prune feature's Validate
// refuses that).
std::pair<int, int> PruneEpochs(const ShrinkConfig& shrink, int epochs);

// What the run leaves behind besides its report on stdout.
struct OutputConfig {
  std::string save;     // the trained model as TorchScript ("" none)
  std::string metrics;  // JSON lines: every log_every steps and per epoch ("" none)
  int log_every = 50;   // optimizer steps between metrics lines
  std::string report;   // one self-contained HTML page of the run's curves ("" none)
};

// Where and when the run is checkpointed (trainer/checkpoint/checkpoint.h), and where
// it resumes from.
struct CheckpointConfig {
  std::string dir;     // "" none
  int64_t every = 0;   // optimizer steps between checkpoints (0: at epoch ends only)
  int keep = 3;        // newest checkpoints kept in dir
  std::string resume;  // "" none; "latest" (in dir) or a checkpoint file; the launcher resolves it to a file
};

// --tune-seconds within its bounds (0.5..600: below, warm-up and noise swamp
// the figure); InvalidArgument naming the flag otherwise.
Status CheckTuneSeconds(double seconds);

struct TrainConfig {
  DataConfig data;
  ModelConfig model;
  OptimConfig optim;
  SyncConfig sync;
  DistConfig dist;
  CheckpointConfig checkpoint;
  OutputConfig output;
  ShrinkConfig shrink;

  // Replaces "the optimizer's default" (lr, weight_decay < 0) by its value,
  // so what is printed and compared is what runs. Unknown optimizers are
  // left for Validate to name.
  void ResolveDefaults();
  // Checks every field against its bounds on a machine with `cores` cores,
  // before any work starts; InvalidArgument naming the flag (and the bound)
  // of the first field out of range.
  Status Validate(int cores) const;
  // What --eval-only uses of the config: the data flags, the model, --threads
  // (one process: at most `cores`) and --timeout.
  Status ValidateEvaluation(int cores) const;
  // Sets what the run does not use (--powersgd-rank without powersgd, ...)
  // back to its default, so a comparison (--resume) sees only what runs.
  // Validate refuses such values; a checkpoint written before it did may
  // still hold them.
  void ClearUnused();
  // Threads per rank: dist.threads, or cores / ranks (at least 1).
  int ThreadsPerRank(int cores) const;
  // Whether the launcher pins each rank to ThreadsPerRank CPUs of its own
  // (launch/layout.h): --pin on and ranks x threads fit in `cores`.
  bool PinsRanks(int cores) const;
  // The CPUs one rank may use (its loader workers share them): its pinned
  // share, or all `cores` when ranks are not pinned.
  int CpusPerRank(int cores) const { return PinsRanks(cores) ? ThreadsPerRank(cores) : cores; }
  // Ranks over all nodes: dist.ranks x dist.nnodes.
  int World() const { return dist.ranks * dist.nnodes; }
  // One forward's batch on one rank: the global batch over ranks and --accum.
  int64_t MicroBatchSize() const { return optim.batch_size / (World() * optim.accum); }

  // One JSON object with a member per section (the flags' names, '-' as '_').
  std::string ToJson() const;
  // The inverse of ToJson; members left out keep their defaults, unknown
  // members are an error (InvalidArgument naming them).
  static StatusOr<TrainConfig> FromJson(const std::string& json);
  // "section.field: this -> other" for each field that differs.
  std::vector<std::string> Differences(const TrainConfig& other) const;
  bool operator==(const TrainConfig& other) const { return Differences(other).empty(); }
  bool operator!=(const TrainConfig& other) const { return !(*this == other); }
};

// The closed choices' flags as typed on train's command line, parsed into
// a config once (the rest of the program compares enums): InvalidArgument
// naming the first flag whose value is none of its choices.
struct ChoiceFlags {
  std::string precision, lr_scaling, sync, sync_compress, backend, quantize;
  explicit ChoiceFlags(const TrainConfig& defaults);  // their names in `defaults`
  Status ParseInto(TrainConfig* config) const;
};

// What every rank of a run must agree on, compared at rendezvous: a JSON
// object of "section.field" members, the config's less what a node may
// choose for itself (its paths, threads, address and index, what only rank
// 0 writes), with the db's content hash, whether the run checkpoints, and
// the resumed checkpoint's step (-1: none).
std::string RecipeJson(const TrainConfig& config, const std::string& db_content_hash, int64_t resumed_step);


// A flag refused for its value, in the one shape every program's bounds
// use: "FLAG VALUE: BOUND", BOUND usually Range's "must be in LO..HI".
Status OutOfRange(const std::string& flag, const std::string& value, const std::string& bound);
std::string Range(int64_t lo, int64_t hi);
// A flag set away from its default for a choice or feature that is off:
// "FLAG VALUE: only used with NEEDS".
Status OnlyUsedWith(const std::string& flag, const std::string& value, const std::string& needs);

}  // namespace granary
