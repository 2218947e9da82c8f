// Checkpoints: everything a run needs to continue exactly where it was, in
// one file per checkpoint, DIR/step-<global step, 10 digits>.ckpt, written
// atomically and durably (temporary file, fsync, rename, fsync of DIR). The
// layout is specified in docs/FORMAT.md ("Checkpoints"): a magic, a JSON
// header (the run's config, the db's content hash, where the run is, every
// rank's epoch-so-far loss, the payload's size and XXH64) and a LibTorch
// archive of the model's parameters and buffers, the optimizer's state and
// the gradient compression's (every rank's).
// Every field is checked on load; a damaged or foreign file is refused with
// one line saying why. Dropout's random stream needs no saving: each step
// reseeds it from (seed, rank, global step).
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/file.h"
#include "base/status.h"
#include "trainer/config/config.h"

namespace granary {

// Where a run is.
struct RunPosition {
  int64_t global_step = 0;  // optimizer steps taken
  uint64_t epoch = 0;       // the epoch in progress (0-based); the next one at an epoch's end
  uint64_t position = 0;    // samples of that epoch's global order consumed (LoaderState)
  int world = 1;            // ranks of the run that wrote it
  // Per rank, the epoch so far: summed training loss x samples, and samples.
  std::vector<double> loss_sums, sample_counts;
};

struct CheckpointHeader {
  TrainConfig config;
  std::string db_content_hash;  // the manifest's, "xxh64:..."
  RunPosition at;
  std::string run;  // the run that wrote it (ClaimCheckpointDir); "" in files written before runs had one
};

struct Checkpoint {
  std::string path;
  CheckpointHeader header;
  std::string payload;  // the LibTorch archive, checked against the header's hash
};

// The gradient compression's state in a checkpoint (trainer/comm/compress.h's
// CompressionState, gathered to rank 0): `shared` as every rank has it;
// `ranks` with each rank's own tensors stacked, row r rank r's.
struct SavedCompression {
  std::map<std::string, torch::Tensor> shared, ranks;
  bool empty() const { return shared.empty() && ranks.empty(); }
};

// Writes the checkpoint of `at` into `dir` (created if missing), then deletes
// all but the newest `keep` of the same run's checkpoints there. Only files
// named step-*.ckpt whose header names header.run are ever deleted or
// replaced; a file of another run where this one goes is FailedPrecondition.
Status WriteCheckpoint(const std::string& dir, const CheckpointHeader& header, const torch::nn::Module& model,
                       const torch::optim::Optimizer& optimizer, int keep,
                       const SavedCompression& compression = SavedCompression{});

// Rank 0's checkpoints, written in the background: Write() copies the
// state into the file's bytes at once (training may change the model right
// after) and returns; writing, syncing and renaming the file happen on a
// thread of its own, so a slow disk does not hold the other ranks in their
// next collective past --timeout. A Write first waits for the one before; if
// that failed, it returns the error and writes nothing (Busy() tells a caller
// that must not wait). Wait() waits for the last and returns its status (a
// run calls it before it ends); destruction waits too.
class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter();

  Status Write(const std::string& dir, const CheckpointHeader& header, const torch::nn::Module& model,
               const torch::optim::Optimizer& optimizer, int keep,
               const SavedCompression& compression = SavedCompression{});
  Status Wait();
  // Whether a write is still in progress.
  bool Busy() const { return thread_.joinable() && !done_.load(); }

 private:
  std::thread thread_;
  Status stored_;                 // the last write's outcome, set by thread_
  std::atomic<bool> done_{true};  // thread_ has set stored_
};

// Reads and checks `path`: Corruption (damaged), FailedPrecondition (a newer
// version), NotFound, InvalidArgument (not a regular file: a FIFO, a
// device); each naming the file. The header is read and its lengths checked
// against the file's size before the payload is read.
StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);

// A checkpoint's payload parsed once (a LibTorch archive), restored from
// part by part as a rank builds them: the model first, the optimizer and the
// gradient compression once they exist. Errors name the checkpoint's file.
class CheckpointArchive {
 public:
  static StatusOr<CheckpointArchive> Parse(const Checkpoint& checkpoint);

  // The saved values into `model` (same structure).
  Status RestoreModel(torch::nn::Module& model) const;
  // The saved state into `optimizer` (over the same parameters).
  Status RestoreOptimizer(torch::optim::Optimizer& optimizer) const;
  // The gradient compression's state; empty if the checkpoint has none.
  StatusOr<SavedCompression> Compression() const;

 private:
  CheckpointArchive(std::string path, std::shared_ptr<torch::serialize::InputArchive> archive)
      : path_(std::move(path)), archive_(std::move(archive)) {}

  std::string path_;
  std::shared_ptr<torch::serialize::InputArchive> archive_;  // InputArchive cannot be copied
};

// The room the checkpoints of a run in `dir`, each of `bytes`, still need:
// `keep` of them and the next (written before the oldest is removed), less
// those already there (a resumed run's); at least one.
uint64_t CheckpointRoomNeeded(const std::string& dir, uint64_t bytes, int keep);

// The newest checkpoint in `dir`; NotFound naming `dir` if it has none.
StatusOr<std::string> LatestCheckpoint(const std::string& dir);

// Resolves config->checkpoint.resume ("latest" in the checkpoint dir, or a
// file) to the checkpoint's path, reads it and checks that it belongs to this
// db (content hash) and this run (CheckResumable). One line saying why not.
StatusOr<Checkpoint> ResolveResume(const std::string& db_content_hash, TrainConfig* config);

// A checkpoint directory belongs to one run. The process that starts a run
// (the launcher; rank 0 under torchrun) claims `dir` before any rank starts:
// it creates it if missing, takes `lock` (held while the run lives, released
// by the kernel if the process dies), checks that every checkpoint there is
// this run's, and records the run in DIR/granary-run.json (its id, start
// time, pid and host). `resumed` is the checkpoint a resumed run continues
// (its run is this run), or null for a new run, which gets a new id.
// FailedPrecondition in one line naming the other run if another run holds
// the lock or has checkpoints there. Returns the run's id.
StatusOr<std::string> ClaimCheckpointDir(const std::string& dir, const Checkpoint* resumed, DirectoryLock* lock);

// The id of the run that claimed `dir` (rank 0 names its checkpoints with it).
StatusOr<std::string> CheckpointDirRun(const std::string& dir);

// OK if a run configured as `resumed` may continue one configured as `saved`:
// only the layout (ranks, threads, host, port, pinning), the epoch count,
// the loader's threads and prefetch, the db's path (its content is checked
// by hash), outputs and checkpointing may change. Else InvalidArgument
// naming the first field that differs.
Status CheckResumable(const TrainConfig& saved, const TrainConfig& resumed);

}  // namespace granary
