// loader: the data path alone, without a model: `loader bench DB` reports
// what the prefetching loader feeds, `loader order DB` prints the sample
// indices a rank reads in an epoch (docs/FORMAT.md's "Epoch order").
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "base/cli.h"
#include "base/cli_flags.h"
#include "base/file.h"
#include "base/json_text.h"
#include "loader/fields.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "store/db.h"

namespace {

// CLI11 reads "-1" into an unsigned option as 2^64 - 1: refuse it first.
const CLI::Validator kNonNegative(
    [](std::string& value) { return value.find('-') == std::string::npos ? std::string() : "must be >= 0"; },
    "NONNEGATIVE");

int Fail(const granary::Status& s) { return granary::PrintFailure("loader", s); }

struct BenchArgs {
  std::string db;
  granary::LoaderOptions loader;
  std::string augment;  // comma list of flip, crop, rrc
  int epochs = 1;
  double step_ms = 0;      // simulated model step per batch
  std::string shuffle = "full";
  std::string input_field, target_field;  // "": the shared rule (loader/fields.h)
  bool normalize = false;  // ImageNet per-channel mean and std
  bool json = false;
};

// Busy-waits, as a training step keeps a core busy.
void Spin(double ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// This process's peak RSS: VmHWM, the high-water mark of its own memory map.
// (getrusage's ru_maxrss would also count the parent's RSS at fork, before
// exec, when the parent is the bigger process.) 0 if /proc is unreadable.
double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // in kB
  }
  return 0.0;
}

// Runs the loader alone over a split, as a training rank would, and reports
// its rate: what the data path can feed, with no model in the way.
int RunBench(BenchArgs& a) {
  auto augment = granary::ParseAugment(a.augment);
  if (!augment.ok()) return Fail(augment.status());
  a.loader.augment = augment.value();
  auto shuffle = granary::ParseShuffleMode(a.shuffle);
  if (!shuffle.ok()) return Fail(shuffle.status());
  a.loader.sampler.mode = shuffle.value();
  if (a.normalize) {
    a.loader.channel_mean = granary::kImageNetMean;
    a.loader.channel_std = granary::kImageNetStd;
  }
  auto db = granary::DbReader::Open(a.db);
  if (!db.ok()) return Fail(db.status());
  // The fields `train` would read, by the one rule (a granary.write db's are "input" and "target").
  auto fields = granary::ChooseBatchFields(db.value()->manifest(), a.db, a.input_field, a.target_field);
  if (!fields.ok()) return Fail(fields.status());
  a.loader.input_field = fields->input;
  a.loader.target_field = fields->target;
  const granary::Schema& schema = db.value()->schema();
  a.loader.scale = schema.fields[schema.FieldIndex(fields->input)].dtype == granary::DType::kUInt8 ? 1.0f / 255.0f : 1.0f;
  auto loader = granary::Loader::Create(*db.value(), a.loader);
  if (!loader.ok()) return Fail(loader.status());
  uint64_t samples = 0, bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  granary::Batch batch;
  for (int epoch = 0; epoch < a.epochs; ++epoch) {
    loader.value()->StartEpoch(static_cast<uint64_t>(epoch));
    for (;;) {
      auto more = loader.value()->Next(&batch);
      if (!more.ok()) return Fail(more.status());
      if (!more.value()) break;
      for (const std::string& reason : batch.skipped_reasons) {
        std::fprintf(stderr, "loader: skipped corrupt %s\n", granary::Printable(reason).c_str());
      }
      samples += batch.size;
      bytes += batch.input.size() * sizeof(float) + batch.input_u8.size() + batch.target.size() * sizeof(int64_t) +
               batch.target_values.size() * sizeof(float);
      if (a.step_ms > 0) Spin(a.step_ms);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = samples / seconds, mb_per_s = bytes / seconds / 1e6;
  const double stall = loader.value()->stats().wait_seconds / seconds;
  const double peak_rss_mib = PeakRssMib();
  // How a split larger than memory was read, and why not around the page cache if that failed.
  const granary::Status direct = loader.value()->direct_read_failure();
  std::string memory_note;
  if (loader.value()->releases_read_pages()) {
    memory_note = loader.value()->reads_around_page_cache() ? "; the split exceeds memory: windows read around the page cache"
                                                            : "; the split exceeds memory: windows read leave the page cache";
    if (!direct.ok()) memory_note += " (direct reads failed: " + direct.ToString() + ")";
  }
  if (a.json) {
    nlohmann::json j = {{"db", a.db},           {"split", a.loader.split}, {"threads", a.loader.threads},
                        {"batch", a.loader.batch_size}, {"augment", a.augment}, {"samples", samples},
                        {"seconds", seconds},   {"samples_per_s", rate},   {"batch_mb_per_s", mb_per_s},
                        {"step_ms", a.step_ms}, {"stall_fraction", stall},
                        {"skipped_corrupt", loader.value()->stats().skipped_corrupt},
                        {"peak_rss_mib", peak_rss_mib},
                        {"releases_read_pages", loader.value()->releases_read_pages()},
                        {"reads_around_page_cache", loader.value()->reads_around_page_cache()},
                        {"direct_read_failure", direct.ok() ? nlohmann::json() : nlohmann::json(direct.ToString())}};
    std::cout << granary::DumpJson(j) << std::endl;
  } else {
    std::printf("bench: %s/%s: %llu samples in %.2fs: %.0f samples/s, %.1f MB/s of batches, stall %.2f%%, "
                "peak RSS %.1f MiB (%d thread(s), batch %zu%s%s%s)\n",
                a.db.c_str(), a.loader.split.c_str(), static_cast<unsigned long long>(samples), seconds, rate, mb_per_s,
                100 * stall, peak_rss_mib, a.loader.threads, a.loader.batch_size, a.augment.empty() ? "" : ", augment ",
                a.augment.c_str(),
                memory_note.c_str());
  }
  return 0;
}

struct OrderArgs {
  std::string db;
  std::string split = "train";
  uint64_t epoch = 0;
  uint64_t start = 0;  // global position the epoch resumes at
  std::string shuffle = "full";
  granary::SamplerOptions sampler;
  bool json = false;
};

// Prints the sample indices one rank reads in one epoch, in reading order:
// what docs/FORMAT.md's "Epoch order" specifies, for checking a
// reimplementation or finding what a rank saw.
int RunOrder(OrderArgs& a) {
  auto shuffle = granary::ParseShuffleMode(a.shuffle);
  if (!shuffle.ok()) return Fail(shuffle.status());
  a.sampler.mode = shuffle.value();
  auto db = granary::DbReader::Open(a.db);
  if (!db.ok()) return Fail(db.status());
  const granary::SplitInfo* split = db.value()->manifest().FindSplit(a.split);
  if (split == nullptr) return Fail(granary::NoSuchSplit(db.value()->manifest(), a.db, a.split));
  auto sampler = granary::Sampler::Create(split->count, a.sampler);
  if (!sampler.ok()) return Fail(sampler.status().WithContext(a.db + ": split '" + a.split + "'"));
  const std::vector<uint64_t> indices = sampler.value().EpochIndices(a.epoch, a.start);
  if (a.json) {
    nlohmann::json j = {{"split", a.split},   {"epoch", a.epoch},     {"rank", a.sampler.rank},
                        {"world", a.sampler.world}, {"start", a.start},     {"indices", indices},
                        {"padded", sampler.value().padded(a.start)}, {"dropped", sampler.value().dropped(a.start)}};
    std::cout << granary::DumpJson(j) << std::endl;
  } else {
    for (uint64_t i : indices) std::printf("%llu\n", static_cast<unsigned long long>(i));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  granary::RaiseOpenFileLimit();
  CLI::App app{"The granary loader alone: its rate, and the order it reads (see README.md)."};
  app.require_subcommand(1);
  BenchArgs bench_args;
  CLI::App* bench = app.add_subcommand("bench", "run the loader alone over a split and report samples/s and MB/s");
  bench->add_option("db", bench_args.db, "db directory")->required();
  bench->add_option("--split", bench_args.loader.split, "split")->capture_default_str();
  bench->add_option("--threads", bench_args.loader.threads, "loader threads")->capture_default_str()->check(
      CLI::Range(1, granary::kLoaderThreadsPerCore * granary::UsableCpuCount()));
  bench->add_option("--batch", bench_args.loader.batch_size, "batch size")->capture_default_str()->check(
      CLI::Range(size_t{1}, granary::kMaxLoaderBatch));
  bench->add_option("--prefetch", bench_args.loader.prefetch, "batches ahead")->capture_default_str()->check(
      CLI::Range(1, granary::kMaxLoaderPrefetch));
  bench->add_option("--epochs", bench_args.epochs, "epochs")->capture_default_str()->check(CLI::Range(1, 1000000));
  bench->add_option("--augment", bench_args.augment, "comma list of flip, crop (pad 4), rrc");
  bench->add_option("--step-ms", bench_args.step_ms, "busy-wait this long per batch, like a model step")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60000.0));
  bench->add_flag("--normalize", bench_args.normalize, "normalise with ImageNet's per-channel mean and std");
  bench->add_option("--shuffle", bench_args.shuffle, "full, block (chunks of consecutive samples) or none")
      ->capture_default_str();
  bench->add_flag("--skip-corrupt", bench_args.loader.skip_corrupt, "skip, count and name corrupt records");
  bench->add_option("--input-field", bench_args.input_field, "the field batched as input (default: as train reads)");
  bench->add_option("--target-field", bench_args.target_field, "the label field (default: the db's label field)");
  bench->add_flag("--uint8", bench_args.loader.uint8_batches, "uint8 batches (raw values) instead of float");
  bench->add_flag("--channels-last", bench_args.loader.channels_last, "NHWC batches instead of NCHW");
  bench->add_flag("--json", bench_args.json, "print the figures as JSON");
  OrderArgs order_args;
  CLI::App* order = app.add_subcommand("order", "print the sample indices one rank reads in one epoch, in order");
  order->add_option("db", order_args.db, "db directory")->required();
  order->add_option("--split", order_args.split, "split")->capture_default_str();
  order->add_option("--epoch", order_args.epoch, "epoch")->capture_default_str()->check(kNonNegative);
  order->add_option("--seed", order_args.sampler.seed, "seed")->capture_default_str()->check(kNonNegative);
  order->add_option("--rank", order_args.sampler.rank, "rank")->capture_default_str()->check(kNonNegative);
  order->add_option("--world", order_args.sampler.world, "ranks in all")->capture_default_str()->check(
      CLI::Range(1, 1 << 20));
  order->add_option("--start", order_args.start, "global position the epoch resumes at")
      ->capture_default_str()
      ->check(kNonNegative);
  order->add_option("--shuffle", order_args.shuffle, "full, block (chunks of consecutive samples) or none")
      ->capture_default_str();
  order->add_flag("--drop-last", order_args.sampler.drop_last, "drop the tail instead of padding ranks");
  order->add_flag("--json", order_args.json, "print the indices and the pad/drop counts as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "loader: %s%s (see loader --help)\n", e.what(), granary::ParseErrorAdvice(app).c_str());
    return 2;
  }
  if (bench->parsed()) return RunBench(bench_args);
  if (order->parsed()) return RunOrder(order_args);
  return 2;
}
