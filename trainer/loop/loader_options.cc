#include "trainer/loop/loader_options.h"

namespace granary {

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

LoaderOptions TrainLoaderOptions(const TrainConfig& c, const Workload& w, int rank) {
  LoaderOptions lo = BaseLoaderOptions(c.data, w);
  lo.channels_last = c.model.channels_last;
  lo.split = c.data.train_split;
  lo.batch_size = static_cast<size_t>(c.MicroBatchSize());
  lo.sampler.seed = c.optim.seed;
  lo.sampler.rank = rank;
  lo.sampler.world = c.World();
  lo.sampler.mode = ParseShuffleMode(c.data.shuffle).value();  // validated
  lo.sampler.drop_last = c.data.drop_last;
  lo.augment = ParseAugment(c.data.augment).value();  // validated
  return lo;
}

LoaderOptions EvalLoaderOptions(const DataConfig& data, const Workload& w, bool channels_last) {
  LoaderOptions lo = BaseLoaderOptions(data, w);
  lo.channels_last = channels_last;
  lo.split = data.eval_split;
  lo.batch_size = kEvalBatchSize;
  return lo;
}

LoaderOptions TrainSplitPassOptions(const TrainConfig& c, const Workload& w, size_t batch_size, bool shuffled) {
  LoaderOptions lo = BaseLoaderOptions(c.data, w);
  lo.split = c.data.train_split;
  lo.batch_size = batch_size;
  if (shuffled) lo.sampler.seed = c.optim.seed;
  return lo;
}

LoaderOptions WholeSplitPass(LoaderOptions options) {
  options.sampler = SamplerOptions{};
  options.sampler.mode = ShuffleMode::kNone;
  options.augment = AugmentOptions{};
  return options;
}

}  // namespace granary
