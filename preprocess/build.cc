#include "preprocess/build.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <exception>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "preprocess/progress.h"
#include "store/db.h"
#include "store/db_writer.h"
#include "store/json_text.h"
#include "store/record.h"

namespace granary {
namespace {

// An item after the parallel encode stage: its sample, and the sample
// encoded alone (the record if its block holds only it; its size otherwise
// estimates its share of a block).
struct Encoded {
  uint64_t index = 0;
  Sample sample;
  std::string value;   // empty if rejected
  std::string reject;  // why the item was rejected
  uint64_t payload_bytes = 0;
  uint64_t payload_hash = 0;
};
using EncodedPtr = std::shared_ptr<Encoded>;

// Consecutive items that become one record (rejected items ride along so the
// writer can name them in order).
struct Block {
  uint64_t seq = 0;
  std::vector<EncodedPtr> items;
  std::string value;  // empty if every item was rejected
  std::vector<uint64_t> payload_hashes;
  std::string error;  // encoding the block failed
};
using BlockPtr = std::shared_ptr<Block>;

// Records whose payload is at most this are "small": a dictionary pays off.
constexpr uint64_t kSmallRecordBytes = 4 << 10;
// A block never holds more than this many items or uncompressed bytes, so a
// reader never decompresses much to get one sample, and the limiter (which
// must admit more than one block) stays small.
constexpr size_t kMaxBlockItems = 256;
constexpr uint64_t kMaxBlockPayloadBytes = 64 << 10;

// Per-thread state of the encode nodes.
struct EncodeScratch {
  EncodeScratch(const Schema& schema, int level, std::shared_ptr<const CompressionDictionary> dict)
      : encoder(schema, level, std::move(dict)) {}
  RecordEncoder encoder;
  std::vector<SampleInput> inputs;
};

// Fills inputs[k] with FieldInputs pointing into `sample`.
Status Inputs(const Schema& schema, const Sample& sample, SampleInput* inputs) {
  if (sample.fields.size() != schema.fields.size()) {
    return Status::InvalidArgument("source produced " + std::to_string(sample.fields.size()) + " fields");
  }
  inputs->resize(schema.fields.size());
  for (size_t f = 0; f < schema.fields.size(); ++f) {
    (*inputs)[f].data = sample.fields[f].data();
    (*inputs)[f].bytes = sample.fields[f].size();
    if (schema.fields[f].HasVariableDims()) (*inputs)[f].shape = sample.shapes.at(f);
  }
  return Status::OK();
}

std::string NowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Encodes out->sample alone, or rejects it with `status` if that is an error.
void EncodeProduced(const Schema& schema, Status status, EncodeScratch& s, Encoded* out) {
  s.inputs.resize(1);
  if (status.ok()) status = Inputs(schema, out->sample, &s.inputs[0]);
  if (status.ok()) {
    for (const std::string& f : out->sample.fields) out->payload_bytes += f.size();
    status = s.encoder.EncodeOne(s.inputs[0], &out->value, &out->payload_hash);
  }
  if (!status.ok()) {
    out->value.clear();
    out->sample = Sample();
    out->reject = status.message();
  }
}

void EncodeItem(const Schema& schema, const SplitSource& split, EncodeScratch& s, Encoded* out) {
  EncodeProduced(schema, split.Produce(out->index, &out->sample), s, out);
}

// Encodes the accepted items of `block` as one record.
void EncodeBlock(const Schema& schema, EncodeScratch& s, Block* block) {
  std::vector<Encoded*> accepted;
  for (const EncodedPtr& e : block->items) {
    if (e->reject.empty()) accepted.push_back(e.get());
  }
  if (accepted.size() == 1) {
    block->value = std::move(accepted[0]->value);
    block->payload_hashes = {accepted[0]->payload_hash};
  } else if (accepted.size() > 1) {
    s.inputs.resize(accepted.size());
    for (size_t k = 0; k < accepted.size(); ++k) {
      Status st = Inputs(schema, accepted[k]->sample, &s.inputs[k]);
      if (!st.ok()) {
        block->error = st.message();
        return;
      }
    }
    Status st = s.encoder.Encode(s.inputs, &block->value, &block->payload_hashes);
    if (!st.ok()) block->error = st.message();
  }
  for (Encoded* e : accepted) e->sample = Sample();  // the record holds it now
}

// Groups consecutive items into blocks whose record should fit `block_bytes`,
// estimating each sample's share by its size encoded alone. Serial.
class Packer {
 public:
  Packer(const Schema& schema, uint64_t items, size_t block_bytes)
      : schema_(schema), items_(items), block_bytes_(block_bytes) {}

  // Adds `e`; returns the blocks that are complete (at most two).
  std::vector<BlockPtr> Add(const EncodedPtr& e) {
    std::vector<BlockPtr> done;
    if (e->reject.empty()) {
      const size_t share = e->value.size() - RecordOverheadBytes(schema_, 1);
      // Compressed together, samples take a little more than alone (~0.5% on
      // Fashion-MNIST); 2% headroom keeps blocks from spilling into one more page.
      const size_t expected = RecordOverheadBytes(schema_, accepted_ + 1) + (body_bytes_ + share) * 102 / 100;
      const bool fits = accepted_ == 0 ||
                        (expected <= block_bytes_ && payload_bytes_ + e->payload_bytes <= kMaxBlockPayloadBytes);
      if (!fits) done.push_back(Take());
      ++accepted_;
      body_bytes_ += share;
      payload_bytes_ += e->payload_bytes;
    }
    current_->items.push_back(e);
    if (++seen_ == items_ || current_->items.size() >= kMaxBlockItems) done.push_back(Take());
    return done;
  }

 private:
  BlockPtr Take() {
    BlockPtr block = std::move(current_);
    current_ = std::make_shared<Block>();
    current_->seq = block->seq + 1;
    accepted_ = 0;
    body_bytes_ = 0;
    payload_bytes_ = 0;
    return block;
  }

  const Schema& schema_;
  const uint64_t items_;
  const size_t block_bytes_;
  uint64_t seen_ = 0;
  BlockPtr current_ = std::make_shared<Block>();
  size_t accepted_ = 0;
  size_t body_bytes_ = 0;
  uint64_t payload_bytes_ = 0;
};

// The shard bytes of the records `samples` become when packed into blocks as
// BuildSplit packs them (rejected samples left out), LMDB's pages counted.
uint64_t PackedBytes(const Schema& schema, const std::vector<Sample>& samples, int level,
                     std::shared_ptr<const CompressionDictionary> dictionary, size_t block_bytes) {
  EncodeScratch scratch(schema, level, std::move(dictionary));
  Packer packer(schema, samples.size(), block_bytes);
  uint64_t bytes = 0;
  for (size_t k = 0; k < samples.size(); ++k) {
    auto e = std::make_shared<Encoded>();
    e->index = k;
    e->sample = samples[k];
    EncodeProduced(schema, Status::OK(), scratch, e.get());
    for (const BlockPtr& block : packer.Add(e)) {
      EncodeBlock(schema, scratch, block.get());
      if (!block->value.empty()) bytes += StoredBytesOfValue(block->value.size());
    }
  }
  return bytes;
}

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

// Trains a dictionary on evenly spaced items of `split` (rejected items are
// left out). Returns "" with *note saying why when there is to be none. In
// auto mode the dictionary is kept only if a trial says the split's records
// shrink by more than its own size: the trial packs held-out items (all items
// when the split is no larger than the training sample) with and without it.
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
    *note = "none (" + dict.status().message() + ")";
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

// Writes one split through the graph
//   source -> limiter -> encode items (parallel) -> order -> pack (serial)
//     -> encode blocks (parallel) -> order -> write (serial) -> limiter
// Returns the first writer or policy error.
// Items before *next_item were handled by an earlier, interrupted build (and
// are already counted in *summary); *next_item advances as records are written.
Status BuildSplit(const SourceInfo& info, const SplitSource& split, const BuildOptions& options, size_t max_in_flight,
                  size_t block_bytes, const std::shared_ptr<const CompressionDictionary>& dictionary,
                  DbWriter* writer, uint64_t* next_item, SplitSummary* summary, BuildSummary* total) {
  using namespace tbb::flow;
  const uint64_t n = split.size();
  const uint64_t start_item = *next_item;
  GRANARY_RETURN_IF_ERROR(writer->BeginSplit(split.name(), n));
  summary->name = split.name();
  const Schema& schema = info.schema;
  tbb::enumerable_thread_specific<std::unique_ptr<EncodeScratch>> scratch(
      [&] { return std::make_unique<EncodeScratch>(schema, options.zstd_level, dictionary); });
  ProgressLine progress(split.name(), n, options.show_progress);
  progress.Add(start_item, 0);
  Packer packer(schema, n - start_item, block_bytes);

  // Invariant: `failure` is written only by the serial writer node; `stop`
  // tells the source to end early.
  Status failure;
  std::atomic<bool> stop{false};
  uint64_t next = start_item;

  graph g;
  input_node<uint64_t> source(g, [&](tbb::flow_control& fc) -> uint64_t {
    bool cancelled = options.cancel != nullptr && options.cancel->load();
    if (next >= n || stop.load() || cancelled) {
      fc.stop();
      return 0;
    }
    return next++;
  });
  limiter_node<uint64_t, int64_t> limiter(g, max_in_flight);
  function_node<uint64_t, EncodedPtr> encode(g, unlimited, [&](uint64_t index) {
    auto e = std::make_shared<Encoded>();
    e->index = index;
    try {
      EncodeItem(schema, split, *scratch.local(), e.get());
    } catch (const std::exception& ex) {  // one bad item must not cancel the graph
      e->value.clear();
      e->reject = std::string("unexpected error: ") + ex.what();
    }
    return e;
  });
  sequencer_node<EncodedPtr> item_order(g, [start_item](const EncodedPtr& e) { return e->index - start_item; });
  using PackNode = multifunction_node<EncodedPtr, std::tuple<BlockPtr>>;
  PackNode pack(g, serial, [&](const EncodedPtr& e, PackNode::output_ports_type& ports) {
    for (BlockPtr& block : packer.Add(e)) std::get<0>(ports).try_put(block);
  });
  function_node<BlockPtr, BlockPtr> encode_block(g, unlimited, [&](BlockPtr block) {
    try {
      EncodeBlock(schema, *scratch.local(), block.get());
    } catch (const std::exception& ex) {
      block->error = std::string("unexpected error: ") + ex.what();
    }
    return block;
  });
  sequencer_node<BlockPtr> block_order(g, [](const BlockPtr& b) { return b->seq; });
  function_node<BlockPtr, int64_t> write(g, serial, [&](const BlockPtr& block) {
    const auto released = static_cast<int64_t>(block->items.size());
    if (!failure.ok()) return released;
    for (const EncodedPtr& e : block->items) {
      ++summary->read;
      total->payload_bytes += e->payload_bytes;
      progress.Add(1, e->payload_bytes);
      if (e->reject.empty()) continue;
      ++summary->rejected;
      total->rejected.push_back({split.name(), split.ItemName(e->index), e->reject});
      if (options.on_error == OnError::kFail && failure.ok()) {
        failure = Status::InvalidArgument(split.ItemName(e->index) + ": " + e->reject + " (--on-error fail)");
      }
    }
    if (failure.ok() && !block->error.empty()) {
      failure = Status::InvalidArgument("split '" + split.name() + "': " + block->error);
    }
    if (failure.ok() && !block->value.empty()) {
      // The journal's checkpoint (taken inside Append) must include this block.
      summary->written += block->payload_hashes.size();
      *next_item = block->items.back()->index + 1;
      failure = writer->Append(block->value, block->payload_hashes);
    }
    if (!failure.ok()) stop.store(true);
    return released;
  });
  make_edge(source, limiter);
  make_edge(limiter, encode);
  make_edge(encode, item_order);
  make_edge(item_order, pack);
  make_edge(output_port<0>(pack), encode_block);
  make_edge(encode_block, block_order);
  make_edge(block_order, write);
  make_edge(write, limiter.decrementer());
  source.activate();
  g.wait_for_all();

  GRANARY_RETURN_IF_ERROR(failure);
  if (options.cancel != nullptr && options.cancel->load()) return Status::FailedPrecondition("interrupted");
  *next_item = n;
  if (summary->read != n) {
    return Status::FailedPrecondition("split '" + split.name() + "': read " + std::to_string(summary->read) + " of " +
                                      std::to_string(n) + " items");
  }
  if (n > 0 && static_cast<double>(summary->rejected) > options.max_reject_fraction * static_cast<double>(n)) {
    std::string first;  // the first reasons, so the line says why
    int shown = 0;
    for (const RejectedItem& r : total->rejected) {
      if (r.split != split.name() || shown == 3) continue;
      first += (shown++ == 0 ? "; first: " : ", ") + r.item + ": " + r.reason;
    }
    return Status::InvalidArgument("split '" + split.name() + "': " + std::to_string(summary->rejected) + " of " +
                                   std::to_string(n) + " items rejected, more than --max-rejects allows" + first);
  }
  return writer->EndSplit();
}

nlohmann::json SplitSummaryJson(const SplitSummary& s) {
  return {{"name", s.name}, {"read", s.read}, {"written", s.written}, {"rejected", s.rejected}};
}

// The builder's state for the journal: finished splits' summaries, the split
// in progress, every rejected item so far, and where to continue.
std::string CheckpointJson(const BuildSummary& summary, const SplitSummary& current, uint64_t next_item) {
  nlohmann::json j = {{"next_item", next_item},
                      {"payload_bytes", summary.payload_bytes},
                      {"current", SplitSummaryJson(current)},
                      {"splits", nlohmann::json::array()},
                      {"rejected", nlohmann::json::array()}};
  for (const SplitSummary& s : summary.splits) j["splits"].push_back(SplitSummaryJson(s));
  for (const RejectedItem& r : summary.rejected) j["rejected"].push_back({r.split, r.item, r.reason});
  return DumpJson(j);
}

Status RestoreCheckpoint(const std::string& text, BuildSummary* summary, SplitSummary* current, uint64_t* next_item) {
  auto j = ParseJson(text);
  try {
    auto split = [](const nlohmann::json& s) {
      return SplitSummary{s.at("name").get<std::string>(), s.at("read").get<uint64_t>(),
                          s.at("written").get<uint64_t>(), s.at("rejected").get<uint64_t>()};
    };
    *next_item = j.at("next_item").get<uint64_t>();
    summary->payload_bytes = j.at("payload_bytes").get<uint64_t>();
    *current = split(j.at("current"));
    for (const auto& s : j.at("splits")) summary->splits.push_back(split(s));
    for (const auto& r : j.at("rejected")) summary->rejected.push_back({r.at(0), r.at(1), r.at(2)});
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("build journal checkpoint: ") + e.what());
  }
  return Status::OK();
}

// What must not change between an interrupted build and its --resume: the
// source (kind, path, splits with their item counts and sizes) and every
// option that shapes the records.
std::string Fingerprint(const Source& source, const BuildOptions& o, size_t block_bytes) {
  nlohmann::json j = {{"kind", source.info.kind},
                      {"path", source.info.path},
                      {"zstd_level", o.zstd_level},
                      {"dictionary", static_cast<int>(o.dictionary)},
                      {"shards", o.shards},
                      {"block_bytes", block_bytes},
                      {"options", RecordedOptions(source, o)},
                      {"splits", nlohmann::json::array()}};
  for (const auto& split : source.splits) j["splits"].push_back({split->name(), split->size(), split->raw_bytes()});
  return DumpJson(j);
}

}  // namespace

std::map<std::string, std::string> RecordedOptions(const Source& source, const BuildOptions& o) {
  static const char* const kDictionaryNames[] = {"auto", "on", "off"};  // DictionaryMode order
  std::map<std::string, std::string> recorded = source.info.options;
  recorded["zstd_level"] = std::to_string(o.zstd_level);
  recorded["dictionary"] = kDictionaryNames[static_cast<int>(o.dictionary)];
  recorded["shards"] = std::to_string(o.shards);
  recorded["block_bytes"] = std::to_string(o.block_bytes);
  return recorded;
}

StatusOr<BuildSummary> BuildDb(const Source& source, const BuildOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.threads < 0) return Status::InvalidArgument("--threads must be >= 0");
  if (options.zstd_level < 0 || options.zstd_level > 22) {
    return Status::InvalidArgument("--zstd-level must be in 0..22, got " + std::to_string(options.zstd_level));
  }
  if (options.dictionary == DictionaryMode::kOn && options.zstd_level == 0) {
    return Status::InvalidArgument("--dictionary on needs compression: --zstd-level 0 stores records as they are");
  }
  const int threads = options.threads > 0 ? options.threads : tbb::info::default_concurrency();
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
  // Invariant: the limiter admits more items than one block can hold, so the
  // packer always gets the items it waits for.
  const size_t max_in_flight = std::max(options.max_in_flight > 0 ? options.max_in_flight : 64 * static_cast<size_t>(threads),
                                        2 * kMaxBlockItems);
  const size_t block_bytes = options.block_bytes > 0 ? options.block_bytes : ValueBytesFillingPages(2);

  DbWriterOptions wopts;
  wopts.path = options.db_path;
  wopts.schema = source.info.schema;
  if (options.shards < 1) return Status::InvalidArgument("--shards must be at least 1, got " + std::to_string(options.shards));
  wopts.shards_per_split = options.shards;
  wopts.max_shard_bytes = options.max_shard_mb << 20;
  wopts.overwrite = options.overwrite;
  wopts.inputs = {source.info.path};
  if (options.records_per_commit > 0) wopts.records_per_commit = options.records_per_commit;
  ResumePoint resume;
  StatusOr<std::unique_ptr<DbWriter>> writer = DbWriter::Create(wopts, options.resume ? &resume : nullptr);
  if (!writer.ok()) return writer.status();

  // The state a resumed build continues from: what every split has read,
  // written and rejected, and the next item of the split in progress.
  BuildSummary summary;
  summary.threads = threads;
  SplitSummary current;
  uint64_t next_item = 0;
  if (resume.resuming) {
    GRANARY_RETURN_IF_ERROR(RestoreCheckpoint(resume.checkpoint, &summary, &current, &next_item));
    // A checkpoint taken as a split ended still holds that split as current.
    if (!current.name.empty() && current.name != resume.split) {
      summary.splits.push_back(current);
      current = SplitSummary();
    }
  }
  auto checkpoint = [&] { return CheckpointJson(summary, current, next_item); };

  std::shared_ptr<const CompressionDictionary> dictionary;
  std::string dict_bytes;
  if (resume.resuming) {
    dict_bytes = resume.dictionary;
    summary.dictionary_note = "as in the interrupted build";
  } else if (!source.splits.empty()) {
    StatusOr<std::string> trained =
        MaybeTrainDictionary(source.info.schema, *source.splits[0], options, block_bytes, &summary.dictionary_note);
    if (!trained.ok()) return trained.status();
    dict_bytes = std::move(trained).value();
    if (!dict_bytes.empty()) GRANARY_RETURN_IF_ERROR(writer.value()->SetDictionary(dict_bytes));
  }
  if (!dict_bytes.empty()) {
    summary.dictionary_bytes = dict_bytes.size();
    auto dict = CompressionDictionary::Create(dict_bytes, options.zstd_level);
    if (!dict.ok()) return dict.status();
    dictionary = dict.value();
  }
  Status journal = writer.value()->StartJournal(Fingerprint(source, options, block_bytes), checkpoint);
  if (!journal.ok() && resume.resuming) {
    return Status::FailedPrecondition(journal.message() +
                                      "; resume with the same ones, or build again without --resume to replace it");
  }
  GRANARY_RETURN_IF_ERROR(journal);

  for (const auto& split : source.splits) {
    summary.raw_bytes += split->raw_bytes();
    bool finished = false;
    for (const SplitInfo& done : resume.finished) finished = finished || done.name == split->name();
    if (finished) continue;
    if (!(resume.resuming && split->name() == resume.split)) {
      current = SplitSummary();
      next_item = 0;
    }
    GRANARY_RETURN_IF_ERROR(BuildSplit(source.info, *split, options, max_in_flight, block_bytes, dictionary,
                                       writer->get(), &next_item, &current, &summary));
    summary.splits.push_back(current);
    current = SplitSummary();
  }
  // Splits in source order, whichever run built them.
  std::sort(summary.splits.begin(), summary.splits.end(), [&](const SplitSummary& a, const SplitSummary& b) {
    auto rank = [&](const std::string& name) {
      for (size_t i = 0; i < source.splits.size(); ++i) {
        if (source.splits[i]->name() == name) return i;
      }
      return source.splits.size();
    };
    return rank(a.name) < rank(b.name);
  });

  Manifest m;
  m.builder = std::string("granary prep ") + GRANARY_VERSION;
  m.created_utc = NowUtc();
  m.label_field = source.info.label_field;
  m.num_classes = source.info.num_classes;
  m.class_names = source.info.class_names;
  m.codec = options.zstd_level > 0 ? "zstd" : "none";
  m.zstd_level = options.zstd_level;
  m.source_kind = source.info.kind;
  m.source_path = source.info.path;
  m.build_options = RecordedOptions(source, options);
  m.build_options["dictionary_choice"] = summary.dictionary_note;
  m.rejected = summary.rejected;
  GRANARY_RETURN_IF_ERROR(writer.value()->Finish(m));

  StatusOr<std::unique_ptr<DbReader>> check = DbReader::Open(options.db_path);
  if (!check.ok()) return check.status().WithContext("reopening the new db");
  summary.content_hash = check.value()->manifest().content_hash;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(options.db_path, ec)) {
    if (entry.is_regular_file(ec)) summary.stored_bytes += entry.file_size(ec);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace granary
