// prep: builds granary dbs from raw datasets (`prep build RAW DB`), and
// inspects, verifies and benchmarks them (info, verify, cat, bench, order).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "loader/loader.h"
#include "loader/sampler.h"
#include "preprocess/build.h"
#include "preprocess/inspect.h"
#include "preprocess/source.h"
#include "store/db.h"
#include "store/file.h"
#include "store/db_writer.h"
#include "store/verify.h"

namespace {

std::atomic<bool> g_cancel{false};

void OnSignal(int) { g_cancel.store(true); }

int Fail(const granary::Status& s) {
  std::fprintf(stderr, "prep: %s\n", s.message().c_str());
  return 1;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

struct BuildArgs {
  std::string raw;
  std::string db;
  std::string format = "auto";
  std::string class_names;
  std::string on_error = "skip";
  std::string dictionary = "auto";
  std::string size = "64";
  int channels = 3;
  double val_fraction = 0;
  std::string label;
  std::string missing = "reject";
  double max_rejects = 0.01;
  uint64_t limit = 0;
  bool json = false;
  bool no_progress = false;
  granary::BuildOptions options;
};

// "auto": a .csv file or a folder with train.csv is a CSV table, IDX files make
// an IDX dataset, class sub-folders an image folder.
std::string DetectFormat(const std::string& raw) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::path(raw).extension() == ".csv" || fs::is_regular_file(fs::path(raw) / "train.csv", ec)) return "csv";
  bool has_dirs = false;
  for (const auto& e : fs::directory_iterator(raw, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find("-ubyte") != std::string::npos) return "idx";
    has_dirs = has_dirs || (e.is_directory(ec) && name[0] != '.');
  }
  return has_dirs ? "images" : "idx";
}

// "64" or "96x64" (width x height).
bool ParseSize(const std::string& text, int* width, int* height) {
  char x = 0, extra = 0;
  int w = 0, h = 0;
  int n = std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &extra);
  if (n == 1) h = w;
  if (!((n == 1) || (n == 3 && (x == 'x' || x == 'X'))) || w < 1 || h < 1 || w > 8192 || h > 8192) return false;
  *width = w;
  *height = h;
  return true;
}

int RunBuild(BuildArgs& a) {
  const std::string format = a.format == "auto" ? DetectFormat(a.raw) : a.format;
  granary::StatusOr<granary::Source> source = granary::Status::InvalidArgument("unreachable");
  if (format == "idx") {
    granary::IdxSourceOptions idx;
    idx.limit = a.limit;
    if (!a.class_names.empty()) idx.class_names = SplitCommas(a.class_names);
    source = granary::OpenIdxSource(a.raw, idx);
  } else if (format == "csv") {
    granary::CsvOptions csv;
    csv.label = a.label;
    csv.missing = a.missing == "nan"    ? granary::MissingPolicy::kNaN
                  : a.missing == "zero" ? granary::MissingPolicy::kZero
                                        : granary::MissingPolicy::kReject;
    csv.val_fraction = a.val_fraction;
    csv.limit = a.limit;
    source = granary::OpenCsvSource(a.raw, csv);
  } else {
    granary::ImageFolderOptions images;
    if (!ParseSize(a.size, &images.width, &images.height)) {
      return Fail(granary::Status::InvalidArgument("--size " + a.size + ": expected S or WxH (1..8192)"));
    }
    images.channels = a.channels;
    images.val_fraction = a.val_fraction;
    images.limit = a.limit;
    source = granary::OpenImageFolderSource(a.raw, images);
  }
  if (!source.ok()) return Fail(source.status());
  for (const std::string& note : source->info.notes) std::fprintf(stderr, "prep: note: %s\n", note.c_str());

  granary::BuildOptions& o = a.options;
  o.db_path = a.db;
  o.on_error = a.on_error == "fail" ? granary::OnError::kFail : granary::OnError::kSkip;
  o.dictionary = a.dictionary == "on"    ? granary::DictionaryMode::kOn
                 : a.dictionary == "off" ? granary::DictionaryMode::kOff
                                         : granary::DictionaryMode::kAuto;
  o.max_reject_fraction = a.max_rejects;
  o.show_progress = !a.no_progress && ::isatty(STDERR_FILENO);
  o.cancel = &g_cancel;
  o.recorded_options = {{"format", format},
                        {"size", format == "images" ? a.size : ""},
                        {"channels", format == "images" ? std::to_string(a.channels) : ""},
                        {"val_fraction", format != "idx" ? std::to_string(a.val_fraction) : ""},
                        {"label", format == "csv" ? a.label : ""},
                        {"missing", format == "csv" ? a.missing : ""},
                        {"zstd_level", std::to_string(o.zstd_level)},
                        {"dictionary", a.dictionary},
                        {"shards", std::to_string(o.shards)},
                        {"block_bytes", std::to_string(o.block_bytes)},
                        {"limit", std::to_string(a.limit)}};
  for (auto it = o.recorded_options.begin(); it != o.recorded_options.end();) {
    it = it->second.empty() ? o.recorded_options.erase(it) : std::next(it);
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto summary = granary::BuildDb(source.value(), o);
  if (!summary.ok()) {
    if (summary.status().code() == granary::Status::Code::kBusy) return Fail(summary.status());
    const bool kept = granary::HasResumableBuild(a.db);
    granary::Status s = summary.status().WithContext("build of " + a.db + " failed, no db written");
    return Fail(kept ? granary::Status::FailedPrecondition(s.message() + " (" + a.db +
                                                           ".partial keeps the work done: add --resume to continue)")
                     : s);
  }

  const granary::BuildSummary& s = summary.value();
  uint64_t written = 0, rejected = 0;
  for (const auto& split : s.splits) {
    written += split.written;
    rejected += split.rejected;
  }
  if (a.json) {
    nlohmann::json j = {{"db", a.db},
                        {"seconds", s.seconds},
                        {"threads", s.threads},
                        {"written", written},
                        {"rejected", rejected},
                        {"raw_bytes", s.raw_bytes},
                        {"payload_bytes", s.payload_bytes},
                        {"db_bytes", s.stored_bytes},
                        {"items_per_s", written / std::max(s.seconds, 1e-9)},
                        {"content_hash", s.content_hash},
                        {"dictionary_bytes", s.dictionary_bytes},
                        {"splits", nlohmann::json::array()},
                        {"rejected_items", nlohmann::json::array()}};
    for (const auto& split : s.splits) {
      j["splits"].push_back(
          {{"name", split.name}, {"read", split.read}, {"written", split.written}, {"rejected", split.rejected}});
    }
    for (const auto& r : s.rejected) j["rejected_items"].push_back({{"item", r.item}, {"reason", r.reason}});
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::fprintf(stderr, "prep: built %s in %.2fs with %d thread(s)\n", a.db.c_str(), s.seconds, s.threads);
  for (const auto& split : s.splits) {
    std::fprintf(stderr, "  %-8s %llu read, %llu written, %llu rejected\n", split.name.c_str(),
                 static_cast<unsigned long long>(split.read), static_cast<unsigned long long>(split.written),
                 static_cast<unsigned long long>(split.rejected));
  }
  for (const auto& r : s.rejected) std::fprintf(stderr, "  rejected %s: %s\n", r.item.c_str(), r.reason.c_str());
  std::fprintf(stderr, "  %.0f items/s; raw %.1f MB, decoded %.1f MB, db %.1f MB (%.2fx of decoded, %.3fx of raw)\n",
               written / std::max(s.seconds, 1e-9), s.raw_bytes / 1e6, s.payload_bytes / 1e6, s.stored_bytes / 1e6,
               s.payload_bytes > 0 ? static_cast<double>(s.stored_bytes) / s.payload_bytes : 0.0,
               s.raw_bytes > 0 ? static_cast<double>(s.stored_bytes) / s.raw_bytes : 0.0);
  std::fprintf(stderr, "  zstd dictionary: %s%s\n",
               s.dictionary_bytes > 0 ? (std::to_string(s.dictionary_bytes) + " bytes, ").c_str() : "",
               s.dictionary_note.c_str());
  std::fprintf(stderr, "  content hash %s\n", s.content_hash.c_str());
  return 0;
}

int RunInfo(const std::string& path, bool json) {
  auto db = granary::DbReader::Open(path);
  if (!db.ok()) return Fail(db.status());
  std::cout << (json ? granary::DescribeDbJson(*db.value()) : granary::DescribeDb(*db.value()));
  return 0;
}

int RunVerify(const std::string& path, bool json) {
  const bool tty = !json && ::isatty(STDERR_FILENO);
  auto report = granary::VerifyDb(path, [&](const std::string& shard, uint64_t records) {
    if (tty) std::fprintf(stderr, "verify: %s (%llu samples)\n", shard.c_str(), static_cast<unsigned long long>(records));
  });
  if (!report.ok()) return Fail(report.status());
  const granary::VerifyReport& r = report.value();
  if (json) {
    nlohmann::json j = {{"db", path},
                        {"ok", r.ok()},
                        {"samples_expected", r.samples_expected},
                        {"samples_ok", r.samples_ok},
                        {"content_hash", r.content_hash},
                        {"problems", r.problems}};
    std::cout << j.dump() << std::endl;
  } else {
    constexpr size_t kShown = 100;
    for (size_t i = 0; i < r.problems.size() && i < kShown; ++i) std::printf("%s\n", r.problems[i].c_str());
    if (r.problems.size() > kShown) std::printf("... and %zu more problems\n", r.problems.size() - kShown);
    std::printf("verify: %s: %llu of %llu samples ok, %zu problem(s)%s\n", path.c_str(),
                static_cast<unsigned long long>(r.samples_ok), static_cast<unsigned long long>(r.samples_expected),
                r.problems.size(), r.ok() ? ", content hash matches" : "");
  }
  return r.ok() ? 0 : 1;
}

int RunCat(const std::string& path, const granary::CatOptions& options, bool json) {
  auto db = granary::DbReader::Open(path);
  if (!db.ok()) return Fail(db.status());
  auto text = granary::DescribeRecord(*db.value(), options, json);
  if (!text.ok()) return Fail(text.status());
  std::cout << text.value();
  return 0;
}

struct BenchArgs {
  std::string db;
  granary::LoaderOptions loader;
  std::string augment;  // comma list of flip, crop, rrc
  int epochs = 1;
  double step_ms = 0;      // simulated model step per batch
  std::string shuffle = "full";
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
  auto db = granary::DbReader::Open(a.db);
  if (!db.ok()) return Fail(db.status());
  auto augment = granary::ParseAugment(a.augment);
  if (!augment.ok()) return Fail(augment.status());
  a.loader.augment = augment.value();
  auto shuffle = granary::ParseShuffleMode(a.shuffle);
  if (!shuffle.ok()) return Fail(shuffle.status());
  a.loader.sampler.mode = shuffle.value();
  if (a.normalize) {
    a.loader.channel_mean = {0.485f, 0.456f, 0.406f};
    a.loader.channel_std = {0.229f, 0.224f, 0.225f};
  }
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
      samples += batch.size;
      bytes += batch.input.size() * sizeof(float) + batch.input_u8.size() + batch.target.size() * sizeof(int64_t);
      if (a.step_ms > 0) Spin(a.step_ms);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = samples / seconds, mb_per_s = bytes / seconds / 1e6;
  const double stall = loader.value()->stats().wait_seconds / seconds;
  const double peak_rss_mib = PeakRssMib();
  if (a.json) {
    nlohmann::json j = {{"db", a.db},           {"split", a.loader.split}, {"threads", a.loader.threads},
                        {"batch", a.loader.batch_size}, {"augment", a.augment}, {"samples", samples},
                        {"seconds", seconds},   {"samples_per_s", rate},   {"batch_mb_per_s", mb_per_s},
                        {"step_ms", a.step_ms}, {"stall_fraction", stall},
                        {"skipped_corrupt", loader.value()->stats().skipped_corrupt},
                        {"peak_rss_mib", peak_rss_mib}};
    std::cout << j.dump() << std::endl;
  } else {
    std::printf("bench: %s/%s: %llu samples in %.2fs: %.0f samples/s, %.1f MB/s of batches, stall %.2f%%, "
                "peak RSS %.1f MiB (%d thread(s), batch %zu%s%s)\n",
                a.db.c_str(), a.loader.split.c_str(), static_cast<unsigned long long>(samples), seconds, rate, mb_per_s,
                100 * stall, peak_rss_mib, a.loader.threads, a.loader.batch_size, a.augment.empty() ? "" : ", augment ",
                a.augment.c_str());
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
  auto db = granary::DbReader::Open(a.db);
  if (!db.ok()) return Fail(db.status());
  const granary::SplitInfo* split = db.value()->manifest().FindSplit(a.split);
  if (split == nullptr) return Fail(granary::Status::NotFound(a.db + ": no split '" + a.split + "'"));
  auto shuffle = granary::ParseShuffleMode(a.shuffle);
  if (!shuffle.ok()) return Fail(shuffle.status());
  a.sampler.mode = shuffle.value();
  auto sampler = granary::Sampler::Create(split->count, a.sampler);
  if (!sampler.ok()) return Fail(sampler.status());
  const std::vector<uint64_t> indices = sampler.value().EpochIndices(a.epoch, a.start);
  if (a.json) {
    nlohmann::json j = {{"split", a.split},   {"epoch", a.epoch},     {"rank", a.sampler.rank},
                        {"world", a.sampler.world}, {"start", a.start},     {"indices", indices},
                        {"padded", sampler.value().padded(a.start)}, {"dropped", sampler.value().dropped(a.start)}};
    std::cout << j.dump() << std::endl;
  } else {
    for (uint64_t i : indices) std::printf("%llu\n", static_cast<unsigned long long>(i));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  granary::RaiseOpenFileLimit();
  CLI::App app{"Builds granary dbs from raw datasets (see README.md and docs/FORMAT.md)."};
  app.require_subcommand(1);
  BuildArgs b;
  CLI::App* build = app.add_subcommand("build", "build a db from a raw dataset folder");
  build->add_option("raw", b.raw, "raw dataset: IDX folder (train-images-idx3-ubyte[.gz], ...) or image folder "
                                  "(<class>/*.jpg|png, or train/<class>/... and val|test/<class>/...)")
      ->required();
  build->add_option("db", b.db, "db directory to create")->required();
  build->add_option("--format", b.format, "raw format: auto, idx, images or csv")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "idx", "images", "csv"}));
  build->add_option("--label", b.label, "csv: the label column");
  build->add_option("--missing", b.missing, "csv: a missing value rejects the row, or becomes nan or zero")
      ->capture_default_str()
      ->check(CLI::IsMember({"reject", "nan", "zero"}));
  build->add_option("--size", b.size, "images: stored size S (square) or WxH; short side resized, centre crop")
      ->capture_default_str();
  build->add_option("--channels", b.channels, "images: 3 (RGB) or 1 (gray)")->capture_default_str()->check(
      CLI::IsMember({1, 3}));
  build->add_option("--val-fraction", b.val_fraction,
                    "images without train/ and val/ folders, or a single CSV file: this fraction becomes split 'val'")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  build->add_option("--threads", b.options.threads, "worker threads (0: all cores)")->capture_default_str();
  build->add_option("--shards", b.options.shards, "LMDB shards per split")->capture_default_str()->check(
      CLI::Range(1, 4096));
  build->add_option("--zstd-level", b.options.zstd_level, "zstd level, 0 for none")->capture_default_str()->check(
      CLI::Range(0, 22));
  build->add_option("--dictionary", b.dictionary, "zstd dictionary: auto (for small records), on or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  build->add_option("--block-bytes", b.options.block_bytes,
                    "pack consecutive small samples into records of about this size (0: two LMDB pages)")
      ->capture_default_str();
  build->add_option("--limit", b.limit, "use only the first N items of each split (0: all)")->capture_default_str();
  build->add_option("--class-names", b.class_names, "comma-separated class names, in label order");
  build->add_option("--on-error", b.on_error, "skip (count and list rejects) or fail")
      ->capture_default_str()
      ->check(CLI::IsMember({"skip", "fail"}));
  build->add_option("--max-rejects", b.max_rejects, "fail if more than this fraction of a split is rejected")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  build->add_flag("--force", b.options.overwrite, "replace an existing db");
  build->add_flag("--resume", b.options.resume, "continue an interrupted build of DB (same RAW and options)");
  build->add_flag("--json", b.json, "print the summary as JSON on stdout");
  build->add_flag("--no-progress", b.no_progress, "no progress line even on a terminal");
  std::string db_path;
  bool json = false;
  CLI::App* info = app.add_subcommand("info", "describe a db: schema, splits, sizes, compression, build options");
  info->add_option("db", db_path, "db directory")->required();
  info->add_flag("--json", json, "print the manifest and sizes as JSON");
  CLI::App* verify = app.add_subcommand("verify", "read and check every record and the content hash");
  verify->add_option("db", db_path, "db directory")->required();
  verify->add_flag("--json", json, "print the report as JSON");
  granary::CatOptions cat_options;
  CLI::App* cat = app.add_subcommand("cat", "print one record's fields");
  cat->add_option("db", db_path, "db directory")->required();
  cat->add_option("--split", cat_options.split, "split")->capture_default_str();
  cat->add_option("--index", cat_options.index, "record index within the split")->required();
  cat->add_option("--max-values", cat_options.max_values, "values shown per field (0: all)")->capture_default_str();
  cat->add_option("--png", cat_options.png_path, "write the record's image field to this PNG file");
  cat->add_flag("--json", json, "print the record as JSON (all values, exact; NaN and infinities as strings)");
  BenchArgs bench_args;
  CLI::App* bench = app.add_subcommand("bench", "run the loader alone over a split and report samples/s and MB/s");
  bench->add_option("db", bench_args.db, "db directory")->required();
  bench->add_option("--split", bench_args.loader.split, "split")->capture_default_str();
  bench->add_option("--threads", bench_args.loader.threads, "loader threads")->capture_default_str();
  bench->add_option("--batch", bench_args.loader.batch_size, "batch size")->capture_default_str();
  bench->add_option("--prefetch", bench_args.loader.prefetch, "batches ahead")->capture_default_str();
  bench->add_option("--epochs", bench_args.epochs, "epochs")->capture_default_str();
  bench->add_option("--augment", bench_args.augment, "comma list of flip, crop (pad 4), rrc");
  bench->add_option("--step-ms", bench_args.step_ms, "busy-wait this long per batch, like a model step")
      ->capture_default_str();
  bench->add_flag("--normalize", bench_args.normalize, "normalise with ImageNet's per-channel mean and std");
  bench->add_option("--shuffle", bench_args.shuffle, "full, block (chunks of consecutive samples) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "block", "none"}));
  bench->add_flag("--skip-corrupt", bench_args.loader.skip_corrupt, "skip and count corrupt records");
  bench->add_flag("--uint8", bench_args.loader.uint8_batches, "uint8 batches (raw values) instead of float");
  bench->add_flag("--channels-last", bench_args.loader.channels_last, "NHWC batches instead of NCHW");
  bench->add_flag("--json", bench_args.json, "print the figures as JSON");
  OrderArgs order_args;
  CLI::App* order = app.add_subcommand("order", "print the sample indices one rank reads in one epoch, in order");
  order->add_option("db", order_args.db, "db directory")->required();
  order->add_option("--split", order_args.split, "split")->capture_default_str();
  order->add_option("--epoch", order_args.epoch, "epoch")->capture_default_str();
  order->add_option("--seed", order_args.sampler.seed, "seed")->capture_default_str();
  order->add_option("--rank", order_args.sampler.rank, "rank")->capture_default_str();
  order->add_option("--world", order_args.sampler.world, "ranks in all")->capture_default_str();
  order->add_option("--start", order_args.start, "global position the epoch resumes at")->capture_default_str();
  order->add_option("--shuffle", order_args.shuffle, "full, block (chunks of consecutive samples) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "block", "none"}));
  order->add_flag("--drop-last", order_args.sampler.drop_last, "drop the tail instead of padding ranks");
  order->add_flag("--json", order_args.json, "print the indices and the pad/drop counts as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "prep: %s (see prep --help)\n", e.what());
    return 2;
  }
  if (build->parsed()) return RunBuild(b);
  if (info->parsed()) return RunInfo(db_path, json);
  if (verify->parsed()) return RunVerify(db_path, json);
  if (cat->parsed()) return RunCat(db_path, cat_options, json);
  if (bench->parsed()) return RunBench(bench_args);
  if (order->parsed()) return RunOrder(order_args);
  return 2;
}
