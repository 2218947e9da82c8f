#include "trainer/loop/train_batches.h"

#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "trainer/loop/batch_tensors.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

class LoaderBatches : public TrainBatches {
 public:
  LoaderBatches(Loader& loader, bool channels_last, int rank, RunObserver& observer)
      : loader_(loader), channels_last_(channels_last), rank_(rank), observer_(observer) {}

  void StartEpoch(uint64_t epoch, uint64_t position) override { loader_.StartEpoch(epoch, position); }

  StatusOr<bool> Next(MicroBatch* next) override {
    StatusOr<bool> more = loader_.Next(&batch_);
    if (!more.ok() || !more.value()) return more;
    for (const std::string& reason : batch_.skipped_reasons) {
      observer_.Note("rank " + std::to_string(rank_) + ": skipped corrupt " + reason);
    }
    GRANARY_RETURN_IF_ERROR(CatchTorch("batch tensors", [&] {
      next->input = InputTensor(batch_, channels_last_);
      next->target = TargetTensor(batch_);
    }));
    return true;
  }

 private:
  Loader& loader_;
  const bool channels_last_;
  const int rank_;
  RunObserver& observer_;
  Batch batch_;
};

class SyntheticBatches : public TrainBatches {
 public:
  explicit SyntheticBatches(MicroBatch batch) : batch_(std::move(batch)) {}
  void StartEpoch(uint64_t, uint64_t) override {}
  StatusOr<bool> Next(MicroBatch* next) override {
    *next = batch_;
    return true;
  }

 private:
  MicroBatch batch_;
};

// Random inputs of the loader's shape and layout, random targets.
MicroBatch RandomBatch(const Loader& loader, int64_t size, const Workload& workload, bool channels_last) {
  std::vector<int64_t> shape = {size};
  for (uint64_t d : loader.sample_shape()) shape.push_back(static_cast<int64_t>(d));
  MicroBatch b;
  if (channels_last && shape.size() == 4) {
    // As InputTensor makes it from the loader's NHWC batch (strides matter:
    // with one channel, .contiguous(ChannelsLast) would keep NCHW strides).
    b.input = torch::rand({shape[0], shape[2], shape[3], shape[1]}).permute({0, 3, 1, 2});
  } else {
    b.input = torch::rand(shape);
  }
  b.target = workload.regression
                 ? torch::randn({size}) * workload.target_std + workload.target_mean
                 : torch::randint(std::max<int64_t>(1, workload.outputs), {size}, torch::kInt64);
  return b;
}

}  // namespace

StatusOr<std::unique_ptr<TrainBatches>> MakeTrainBatches(const TrainConfig& c, Loader& loader,
                                                         const Workload& workload, int rank, RunObserver& observer) {
  const bool channels_last = c.model.channels_last;
  if (!c.data.synthetic) return std::unique_ptr<TrainBatches>(new LoaderBatches(loader, channels_last, rank, observer));
  MicroBatch batch;
  GRANARY_RETURN_IF_ERROR(CatchTorch("synthetic batch", [&] {
    batch = RandomBatch(loader, c.MicroBatchSize(), workload, channels_last);
  }));
  return std::unique_ptr<TrainBatches>(new SyntheticBatches(std::move(batch)));
}

}  // namespace granary
