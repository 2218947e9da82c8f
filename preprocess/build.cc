#include "preprocess/build.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <chrono>
#include <ctime>
#include <exception>
#include <memory>

#include "preprocess/progress.h"
#include "store/db.h"
#include "store/record.h"

namespace granary {
namespace {

// An item on its way from the encoder to the writer.
struct Encoded {
  uint64_t index = 0;
  std::string value;   // the record; empty if rejected
  std::string reject;  // why the item was rejected
  uint64_t payload_bytes = 0;
  uint64_t payload_hash = 0;
};

// Records whose payload is at most this are "small": a dictionary pays off.
constexpr uint64_t kSmallRecordBytes = 16 << 10;

// Per-thread state of the encode node.
struct EncodeScratch {
  EncodeScratch(const Schema& schema, int level, std::shared_ptr<const CompressionDictionary> dict)
      : encoder(schema, level, std::move(dict)) {}
  RecordEncoder encoder;
  Sample sample;
  std::vector<FieldInput> inputs;
};

std::string NowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void Encode(const Schema& schema, const SplitSource& split, EncodeScratch& s, Encoded* out) {
  Status status = split.Produce(out->index, &s.sample);
  if (status.ok()) {
    s.inputs.resize(schema.fields.size());
    if (s.sample.fields.size() != schema.fields.size()) {
      status = Status::InvalidArgument("source produced " + std::to_string(s.sample.fields.size()) + " fields");
    }
    for (size_t f = 0; status.ok() && f < schema.fields.size(); ++f) {
      s.inputs[f].data = s.sample.fields[f].data();
      s.inputs[f].bytes = s.sample.fields[f].size();
      if (schema.fields[f].HasVariableDims()) s.inputs[f].shape = s.sample.shapes.at(f);
      out->payload_bytes += s.sample.fields[f].size();
    }
    if (status.ok()) status = s.encoder.Encode(s.inputs, &out->value, &out->payload_hash);
  }
  if (!status.ok()) {
    out->value.clear();
    out->reject = status.message();
  }
}

// Trains a dictionary on evenly spaced items of `split` (rejected items are
// left out). Returns "" with *note saying why when there is to be none.
StatusOr<std::string> MaybeTrainDictionary(const SplitSource& split, const BuildOptions& options,
                                           std::string* note) {
  if (options.dictionary == DictionaryMode::kOff || options.zstd_level == 0) {
    *note = "off";
    return std::string();
  }
  const uint64_t n = split.size();
  const uint64_t count = std::min<uint64_t>(n, options.dictionary_samples);
  std::vector<std::string> payloads(count);
  tbb::parallel_for(uint64_t{0}, count, [&](uint64_t k) {
    Sample sample;
    if (!split.Produce(k * n / count, &sample).ok()) return;
    for (const std::string& field : sample.fields) payloads[k] += field;
  });
  std::string samples;
  std::vector<size_t> sizes;
  for (const std::string& p : payloads) {
    if (p.empty()) continue;
    samples += p;
    sizes.push_back(p.size());
  }
  if (options.dictionary == DictionaryMode::kAuto && (sizes.empty() || samples.size() / sizes.size() > kSmallRecordBytes)) {
    *note = "none (records are not small)";
    return std::string();
  }
  StatusOr<std::string> dict = TrainDictionary(samples, sizes, options.dictionary_max_bytes);
  if (!dict.ok()) {
    if (options.dictionary == DictionaryMode::kOn) return dict.status();
    *note = "none (" + dict.status().message() + ")";
    return std::string();
  }
  *note = "trained on " + std::to_string(sizes.size()) + " samples of split '" + split.name() + "'";
  return dict;
}

// Writes one split through the graph. Returns the first writer or policy error.
Status BuildSplit(const SourceInfo& info, const SplitSource& split, const BuildOptions& options, size_t max_in_flight,
                  const std::shared_ptr<const CompressionDictionary>& dictionary, DbWriter* writer,
                  SplitSummary* summary, BuildSummary* total) {
  using namespace tbb::flow;
  GRANARY_RETURN_IF_ERROR(writer->BeginSplit(split.name()));
  summary->name = split.name();
  const uint64_t n = split.size();
  const Schema& schema = info.schema;
  tbb::enumerable_thread_specific<std::unique_ptr<EncodeScratch>> scratch(
      [&] { return std::make_unique<EncodeScratch>(schema, options.zstd_level, dictionary); });
  ProgressLine progress(split.name(), n, options.show_progress);

  // Invariant: `failure` is written only by the serial writer node and read by
  // the source after the limiter has ordered it (stop is advisory).
  Status failure;
  std::atomic<bool> stop{false};
  uint64_t next = 0;

  graph g;
  input_node<uint64_t> source(g, [&](tbb::flow_control& fc) -> uint64_t {
    bool cancelled = options.cancel != nullptr && options.cancel->load();
    if (next >= n || stop.load() || cancelled) {
      fc.stop();
      return 0;
    }
    return next++;
  });
  limiter_node<uint64_t> limiter(g, max_in_flight);
  function_node<uint64_t, Encoded> encode(g, unlimited, [&](uint64_t index) {
    Encoded e;
    e.index = index;
    try {
      Encode(schema, split, *scratch.local(), &e);
    } catch (const std::exception& ex) {  // one bad item must not cancel the graph
      e.value.clear();
      e.reject = std::string("unexpected error: ") + ex.what();
    }
    return e;
  });
  sequencer_node<Encoded> order(g, [](const Encoded& e) { return e.index; });
  function_node<Encoded, continue_msg> write(g, serial, [&](const Encoded& e) {
    if (!failure.ok()) return continue_msg();
    ++summary->read;
    total->payload_bytes += e.payload_bytes;
    progress.Add(1, e.payload_bytes);
    if (!e.reject.empty()) {
      ++summary->rejected;
      total->rejected.push_back({split.name(), split.ItemName(e.index), e.reject});
      if (options.on_error == OnError::kFail) {
        failure = Status::InvalidArgument(split.ItemName(e.index) + ": " + e.reject + " (--on-error fail)");
        stop.store(true);
      }
      return continue_msg();
    }
    Status s = writer->Append(e.value, e.payload_hash);
    if (!s.ok()) {
      failure = s;
      stop.store(true);
      return continue_msg();
    }
    ++summary->written;
    return continue_msg();
  });
  make_edge(source, limiter);
  make_edge(limiter, encode);
  make_edge(encode, order);
  make_edge(order, write);
  make_edge(write, limiter.decrementer());
  source.activate();
  g.wait_for_all();

  GRANARY_RETURN_IF_ERROR(failure);
  if (options.cancel != nullptr && options.cancel->load()) return Status::FailedPrecondition("interrupted");
  if (summary->read != n) {
    return Status::FailedPrecondition("split '" + split.name() + "': read " + std::to_string(summary->read) + " of " +
                                      std::to_string(n) + " items");
  }
  if (n > 0 && static_cast<double>(summary->rejected) > options.max_reject_fraction * static_cast<double>(n)) {
    return Status::InvalidArgument("split '" + split.name() + "': " + std::to_string(summary->rejected) + " of " +
                                   std::to_string(n) + " items rejected, more than --max-rejects allows");
  }
  return writer->EndSplit();
}

}  // namespace

StatusOr<BuildSummary> BuildDb(const Source& source, const BuildOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.threads < 0) return Status::InvalidArgument("--threads must be >= 0");
  if (options.zstd_level < 0 || options.zstd_level > 22) {
    return Status::InvalidArgument("--zstd-level must be in 0..22, got " + std::to_string(options.zstd_level));
  }
  const int threads = options.threads > 0 ? options.threads : tbb::info::default_concurrency();
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
  const size_t max_in_flight = options.max_in_flight > 0 ? options.max_in_flight : 64 * static_cast<size_t>(threads);

  DbWriterOptions wopts;
  wopts.path = options.db_path;
  wopts.schema = source.info.schema;
  wopts.shards_per_split = options.shards;
  wopts.overwrite = options.overwrite;
  StatusOr<std::unique_ptr<DbWriter>> writer = DbWriter::Create(wopts);
  if (!writer.ok()) return writer.status();

  BuildSummary summary;
  summary.threads = threads;
  std::shared_ptr<const CompressionDictionary> dictionary;
  if (!source.splits.empty()) {
    StatusOr<std::string> dict_bytes = MaybeTrainDictionary(*source.splits[0], options, &summary.dictionary_note);
    if (!dict_bytes.ok()) return dict_bytes.status();
    if (!dict_bytes->empty()) {
      GRANARY_RETURN_IF_ERROR(writer.value()->SetDictionary(dict_bytes.value()));
      summary.dictionary_bytes = dict_bytes->size();
      auto dict = CompressionDictionary::Create(std::move(dict_bytes).value(), options.zstd_level);
      if (!dict.ok()) return dict.status();
      dictionary = dict.value();
    }
  }
  for (const auto& split : source.splits) {
    SplitSummary split_summary;
    GRANARY_RETURN_IF_ERROR(BuildSplit(source.info, *split, options, max_in_flight, dictionary, writer->get(),
                                       &split_summary, &summary));
    summary.raw_bytes += split->raw_bytes();
    summary.splits.push_back(split_summary);
  }

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
  m.build_options = options.recorded_options;
  m.rejected = summary.rejected;
  GRANARY_RETURN_IF_ERROR(writer.value()->Finish(m));

  StatusOr<std::unique_ptr<DbReader>> check = DbReader::Open(options.db_path);
  if (!check.ok()) return check.status().WithContext("reopening the new db");
  summary.content_hash = check.value()->manifest().content_hash;
  for (const SplitInfo& split : check.value()->manifest().splits) {
    for (const ShardInfo& shard : split.shards) summary.stored_bytes += shard.bytes;
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace granary
