#include "trainer/trainer.h"

#include <chrono>
#include <thread>

#include "loader/loader.h"
#include "store/db.h"
#include "trainer/comm.h"
#include "trainer/model.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// Wraps a Batch's buffers without copying; valid while the Batch is untouched.
torch::Tensor InputTensor(Batch& b) {
  return torch::from_blob(b.input.data(), b.input_shape, torch::kFloat32);
}
torch::Tensor TargetTensor(Batch& b) {
  return torch::from_blob(b.target.data(), {static_cast<int64_t>(b.size)}, torch::kInt64);
}

// What the training and the evaluation loaders share.
LoaderOptions BaseLoaderOptions(const TrainOptions& o) {
  LoaderOptions lo;
  lo.threads = o.loader_threads;
  lo.prefetch = o.prefetch;
  lo.mean = o.mean;
  lo.stddev = o.stddev;
  lo.skip_corrupt = o.skip_corrupt;
  return lo;
}

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  uint64_t samples = 0;
};

Status Evaluate(const DbReader& db, const TrainOptions& o, ConvNet& model, EvalResult* out) {
  LoaderOptions lo = BaseLoaderOptions(o);
  lo.split = o.eval_split;
  lo.batch_size = 256;
  lo.sampler.mode = ShuffleMode::kNone;
  StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(db, lo);
  if (!loader.ok()) return loader.status().WithContext("evaluation loader");
  loader.value()->StartEpoch(0);
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0;
  uint64_t correct = 0, seen = 0;
  Batch batch;
  for (;;) {
    StatusOr<bool> more = loader.value()->Next(&batch);
    if (!more.ok()) return more.status();
    if (!more.value()) break;
    GRANARY_RETURN_IF_ERROR(CatchTorch("evaluation", [&] {
      torch::Tensor logits = model->forward(InputTensor(batch));
      torch::Tensor target = TargetTensor(batch);
      loss_sum += torch::nll_loss(torch::log_softmax(logits, 1), target, {}, at::Reduction::Sum).item<double>();
      correct += logits.argmax(1).eq(target).sum().item<int64_t>();
    }));
    seen += batch.size;
  }
  model->train();
  out->samples = seen;
  out->loss = seen > 0 ? loss_sum / seen : 0;
  out->accuracy = seen > 0 ? static_cast<double>(correct) / seen : 0;
  return Status::OK();
}

}  // namespace

int DefaultThreadsPerRank(int world) {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, world));
}

StatusOr<std::vector<EpochReport>> RunRank(const TrainOptions& o,
                                           const std::function<void(const EpochPlanReport&)>& on_start,
                                           const std::function<void(const EpochReport&)>& on_epoch) {
  if (o.epochs < 1) return Status::InvalidArgument("--epochs must be >= 1");
  if (o.batch_size == 0 || o.batch_size % static_cast<size_t>(o.world) != 0) {
    return Status::InvalidArgument("--batch-size " + std::to_string(o.batch_size) +
                                   " must be a positive multiple of --ranks " + std::to_string(o.world));
  }
  if (!(o.lr > 0)) return Status::InvalidArgument("--lr must be > 0");
  if (o.dropout < 0 || o.dropout >= 1) return Status::InvalidArgument("--dropout must be in [0, 1)");
  const int threads = o.threads > 0 ? o.threads : DefaultThreadsPerRank(o.world);
  torch::set_num_threads(threads);

  StatusOr<std::unique_ptr<DbReader>> db = DbReader::Open(o.db);
  if (!db.ok()) return db.status();
  const Manifest& manifest = db.value()->manifest();
  const int image_field = manifest.schema.FieldIndex("image");
  if (image_field < 0 || manifest.schema.fields[image_field].shape.size() != 3) {
    return Status::InvalidArgument(o.db + ": the CNN needs a 3-dim 'image' field (CHW or HWC)");
  }
  if (manifest.num_classes < 2) return Status::InvalidArgument(o.db + ": needs at least 2 classes");

  LoaderOptions lo = BaseLoaderOptions(o);
  lo.split = o.train_split;
  lo.batch_size = o.batch_size / static_cast<size_t>(o.world);
  lo.sampler.seed = o.seed;
  lo.sampler.rank = o.rank;
  lo.sampler.world = o.world;
  lo.sampler.mode = o.shuffle;
  lo.sampler.drop_last = o.drop_last;
  lo.augment = o.augment;
  StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(*db.value(), lo);
  if (!loader.ok()) return loader.status();
  if (!o.eval_split.empty() && manifest.FindSplit(o.eval_split) == nullptr) {
    return Status::NotFound(o.db + ": no split '" + o.eval_split + "' to evaluate on");
  }

  CommOptions co;
  co.rank = o.rank;
  co.world = o.world;
  co.host = o.host;
  co.port = o.port;
  StatusOr<std::unique_ptr<Comm>> comm = Comm::Create(co);
  if (!comm.ok()) return comm.status();

  // Same initial weights everywhere: seeded init, then rank 0's broadcast.
  torch::manual_seed(o.seed);
  const Shape& chw = loader.value()->sample_shape();  // as batched, whatever the stored layout
  ConvNet model(chw[0], chw[1], chw[2], manifest.num_classes, o.dropout);
  std::vector<torch::Tensor> params = model->parameters();
  {
    torch::NoGradGuard no_grad;
    GRANARY_RETURN_IF_ERROR(comm.value()->Broadcast(params));
  }
  torch::manual_seed(o.seed * 1000003 + static_cast<uint64_t>(o.rank) + 1);  // dropout differs per rank
  torch::optim::Adam optimizer(params, torch::optim::AdamOptions(o.lr));

  std::vector<EpochReport> reports;
  Loader& train = *loader.value();
  on_start({train.sampler().samples_per_rank(), train.sampler().padded(), train.sampler().dropped()});
  Batch batch;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    const LoaderStats before = train.stats();
    train.StartEpoch(static_cast<uint64_t>(epoch));
    double local_loss_sum = 0, local_samples = 0, comm_seconds = 0;
    for (;;) {
      StatusOr<bool> more = train.Next(&batch);
      if (!more.ok()) return more.status();
      if (!more.value()) break;
      GRANARY_RETURN_IF_ERROR(CatchTorch("training step", [&] {
        optimizer.zero_grad();
        torch::Tensor loss = torch::nll_loss(torch::log_softmax(model->forward(InputTensor(batch)), 1),
                                             TargetTensor(batch));
        loss.backward();
        local_loss_sum += loss.item<double>() * static_cast<double>(batch.size);
        local_samples += static_cast<double>(batch.size);
      }));
      std::vector<torch::Tensor> grads;
      for (auto& p : params) grads.push_back(p.grad());
      const auto comm_start = std::chrono::steady_clock::now();
      GRANARY_RETURN_IF_ERROR(comm.value()->AllReduceMean(grads));
      comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - comm_start).count();
      GRANARY_RETURN_IF_ERROR(CatchTorch("optimizer step", [&] { optimizer.step(); }));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    torch::Tensor totals = torch::tensor({local_loss_sum, local_samples}, torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(comm.value()->AllReduceSum(totals));
    const double samples = totals[1].item<double>();

    EpochReport r;
    r.epoch = epoch + 1;
    r.train_loss = totals[0].item<double>() / std::max(1.0, samples);
    r.seconds = seconds;
    r.samples_per_s = samples / seconds;
    const LoaderStats after = train.stats();
    r.stall_fraction = (after.wait_seconds - before.wait_seconds) / seconds;
    r.queue_depth = after.batches > before.batches ? static_cast<double>(after.ready_sum - before.ready_sum) /
                                                         static_cast<double>(after.batches - before.batches)
                                                   : 0.0;
    r.comm_fraction = comm_seconds / seconds;
    if (o.rank == 0 && !o.eval_split.empty()) {
      EvalResult eval;
      GRANARY_RETURN_IF_ERROR(Evaluate(*db.value(), o, model, &eval));
      r.evaluated = true;
      r.eval_loss = eval.loss;
      r.eval_accuracy = eval.accuracy;
      r.eval_samples = eval.samples;
    }
    GRANARY_RETURN_IF_ERROR(comm.value()->Barrier());
    reports.push_back(r);
    on_epoch(r);
  }
  return reports;
}

}  // namespace granary
