#include "preprocess/dictionary_choice.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "preprocess/packing.h"
#include "store/record.h"

namespace granary {
namespace {

// Items first + k * n / count of `split` for k < count (those that fail to
// produce are left out).
std::vector<Sample> SpacedSamples(const SplitSource& split, uint64_t count, double first) {
  const uint64_t n = split.size();
  std::vector<Sample> samples(count);
  std::vector<char> ok(count, 0);
  tbb::parallel_for(uint64_t{0}, count, [&](uint64_t k) {
    const auto index = std::min<uint64_t>(n - 1, static_cast<uint64_t>(first + static_cast<double>(k) * n / count));
    ok[k] = split.Produce(index, &samples[k]).ok();
  });
  std::vector<Sample> produced;
  for (uint64_t k = 0; k < count; ++k) {
    if (ok[k]) produced.push_back(std::move(samples[k]));
  }
  return produced;
}

std::string SizeText(double bytes) {
  const bool small = bytes < 10 * 1024;
  return std::to_string(std::llround(small ? bytes : bytes / 1024)) + (small ? " bytes" : " KiB");
}

}  // namespace

StatusOr<std::string> MaybeTrainDictionary(const Schema& schema, const SplitSource& split, const BuildOptions& options,
                                           size_t block_bytes, std::string* note) {
  if (options.dictionary == DictionaryMode::kOff || options.zstd_level == 0) {
    *note = "off";
    return std::string();
  }
  // Decide from a few evenly spaced items whether records are small, before
  // producing thousands (for photos, that would decode them all twice).
  const uint64_t n = split.size();
  const bool automatic = options.dictionary == DictionaryMode::kAuto;
  if (automatic) {
    uint64_t bytes = 0;
    const std::vector<Sample> probes = SpacedSamples(split, std::min<uint64_t>(n, 16), 0);
    for (const Sample& sample : probes) {
      for (const std::string& field : sample.fields) bytes += field.size();
    }
    if (probes.empty() || bytes / probes.size() > kSmallRecordBytes) {
      *note = "none (records are not small)";
      return std::string();
    }
  }
  const uint64_t count = std::min<uint64_t>(n, options.dictionary_samples);
  const std::vector<Sample> training = SpacedSamples(split, count, 0);
  std::string samples;
  std::vector<size_t> sizes;
  for (const Sample& sample : training) {
    const size_t before = samples.size();
    for (const std::string& field : sample.fields) samples += field;
    if (samples.size() > before) sizes.push_back(samples.size() - before);
  }
  StatusOr<std::string> dict = TrainDictionary(samples, sizes, options.dictionary_max_bytes);
  if (!dict.ok()) {
    if (!automatic) {
      return Status::InvalidArgument("--dictionary on: zstd could not train a dictionary on " +
                                     std::to_string(sizes.size()) + " samples of split '" + split.name() + "' (" +
                                     dict.status().message() + "); use --dictionary auto or off");
    }
    // zstd's "Src size is incorrect": too few samples, or bytes, to train on.
    const bool few = dict.status().message().find("Src size") != std::string::npos;
    *note = "none (zstd could not train one on " + std::to_string(sizes.size()) + " samples" +
            (few ? " of " + std::to_string(samples.size()) + " bytes in all: too few" : ": " + dict.status().message()) +
            ")";
    return std::string();
  }
  const std::string trained = "trained on " + std::to_string(sizes.size()) + " samples of split '" + split.name() + "'";
  if (!automatic) {
    *note = trained + " (--dictionary on)";
    return dict;
  }
  const std::vector<Sample> trial =
      n <= count ? training : SpacedSamples(split, std::min(count, n - count), 0.5 * static_cast<double>(n) / count);
  if (trial.empty()) {
    *note = "none (no held-out sample to try it on)";
    return std::string();
  }
  auto compression = CompressionDictionary::Create(dict.value(), options.zstd_level);
  if (!compression.ok()) return compression.status();
  const double scale = static_cast<double>(n) / static_cast<double>(trial.size());
  const double without = scale * PackedBytes(schema, trial, options.zstd_level, nullptr, block_bytes);
  const double with = scale * PackedBytes(schema, trial, options.zstd_level, compression.value(), block_bytes);
  const double saved = without - with;
  const std::string how =
      n <= count ? "packing the split" : "a trial on " + std::to_string(trial.size()) + " held-out samples";
  const std::string trial_text = how + ": records take " + SizeText(with) + " with it, " + SizeText(without) +
                                 " without, the dictionary " + SizeText(static_cast<double>(dict->size()));
  if (saved <= static_cast<double>(dict->size())) {
    *note = "none (it would not pay: " + trial_text + ")";
    return std::string();
  }
  *note = trained + " (" + trial_text + ")";
  return dict;
}

}  // namespace granary
