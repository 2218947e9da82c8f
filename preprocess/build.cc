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

#include "base/json_text.h"
#include "preprocess/build_resume.h"
#include "preprocess/dictionary_choice.h"
#include "preprocess/inputs.h"
#include "preprocess/packing.h"
#include "preprocess/progress.h"
#include "store/db.h"
#include "store/db_writer.h"
#include "store/record.h"

namespace granary {

std::string NowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Status MeasureDb(const std::string& path, std::string* content_hash, uint64_t* stored_bytes) {
  StatusOr<std::unique_ptr<DbReader>> check = DbReader::Open(path);
  if (!check.ok()) return check.status().WithContext("reopening the new db");
  *content_hash = check.value()->manifest().content_hash;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path, ec)) {
    if (entry.is_regular_file(ec)) *stored_bytes += entry.file_size(ec);
  }
  return Status::OK();
}

namespace {

// More of the split rejected than --max-rejects allows, naming the first
// rejects (so the line says why); OK while within it. Checked as the items
// are read: once past the bound the build fails whatever the rest holds, so
// it stops there instead of reading them all.
Status CheckRejects(const SplitSource& split, const BuildOptions& options, const SplitSummary& summary,
                    const std::vector<RejectedItem>& rejected) {
  const uint64_t n = split.size();
  if (n == 0 || static_cast<double>(summary.rejected) <= options.max_reject_fraction * static_cast<double>(n)) {
    return Status::OK();
  }
  std::string first;
  int shown = 0;
  for (const RejectedItem& r : rejected) {
    if (r.split != split.name() || shown == 3) continue;
    first += (shown++ == 0 ? "; first: " : ", ") + r.item + ": " + r.reason;
  }
  const std::string of_n = " of " + std::to_string(n), read = std::to_string(summary.read);
  const std::string count =
      summary.rejected < summary.read
          ? std::to_string(summary.rejected) + of_n + " items rejected" +
                (summary.read < n ? " (stopped after the first " + read + ")" : "")
          : std::string(kEveryItemRejected) +
                (summary.read < n ? " (the first " + read + of_n + "; the build stopped there)"
                                  : " (" + read + of_n + ")");
  return Status::InvalidArgument("split '" + split.name() + "': " + count + ", " + kMoreThanMaxRejects + " " +
                                 nlohmann::json(options.max_reject_fraction).dump() + " allows" + first);
}

// After a split's graph: every item read, and no more rejected than --max-rejects allows.
Status CheckSplitRead(const SplitSource& split, const BuildOptions& options, const SplitSummary& summary,
                      const std::vector<RejectedItem>& rejected) {
  const uint64_t n = split.size();
  if (summary.read != n) {
    return Status::FailedPrecondition("split '" + split.name() + "': read " + std::to_string(summary.read) + " of " +
                                      std::to_string(n) + " items");
  }
  return CheckRejects(split, options, summary, rejected);
}

// The writer's account of a block's items, in order: read, payload bytes,
// progress, and each rejected item named. With --on-error fail, the first
// rejection's error.
Status TallyItems(const Block& block, const SplitSource& split, const BuildOptions& options, ProgressLine* progress,
                  SplitSummary* summary, BuildSummary* total) {
  Status first;
  for (const EncodedPtr& e : block.items) {
    ++summary->read;
    total->payload_bytes += e->payload_bytes;
    progress->Add(1, e->payload_bytes);
    if (e->reject.empty()) continue;
    ++summary->rejected;
    total->rejected.push_back({split.name(), split.ItemName(e->index), e->reject});
    if (options.on_error == OnError::kFail && first.ok()) {
      first = Status::InvalidArgument(split.ItemName(e->index) + ": " + e->reject + " (--on-error fail)");
    }
  }
  return first;
}

// The graph's serial end, for each block in order: its items tallied (and
// rejections checked against the policy), then its record appended, and a
// warning the writer has for the user passed on. *next_item advances past it.
Status WriteBlock(const Block& block, const SourceInfo& info, const SplitSource& split, const BuildOptions& options,
                  ProgressLine* progress, DbWriter* writer, uint64_t* next_item, SplitSummary* summary,
                  BuildSummary* total) {
  GRANARY_RETURN_IF_ERROR(TallyItems(block, split, options, progress, summary, total));
  GRANARY_RETURN_IF_ERROR(CheckRejects(split, options, *summary, total->rejected));
  if (!block.error.empty()) return Status::InvalidArgument("split '" + split.name() + "': " + block.error);
  if (block.value.empty()) return Status::OK();
  // The journal's checkpoint (taken inside Append) must include this block.
  summary->written += block.payload_hashes.size();
  summary->statistics.Merge(block.statistics);
  summary->counts.Merge(block.counts);
  if (info.items_are_files) {
    summary->payload_hashes.insert(summary->payload_hashes.end(), block.payload_hashes.begin(),
                                   block.payload_hashes.end());
  }
  *next_item = block.items.back()->index + 1;
  Status appended = writer->Append(block.value, block.payload_hashes);
  if (std::string warning = writer->TakeDiskWarning(); !warning.empty()) {
    if (options.on_warning) options.on_warning(warning);
    total->warnings.push_back(std::move(warning));
  }
  return appended;
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
  if (start_item == 0) {
    summary->statistics = StatisticsAccumulator(schema);
    summary->counts = ValueCounter(schema);
  }
  tbb::enumerable_thread_specific<std::unique_ptr<EncodeScratch>> scratch(
      [&] {
        auto s = std::make_unique<EncodeScratch>(schema, options.zstd_level, dictionary);
        s->label_field = schema.FieldIndex(info.label_field);
        return s;
      });
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
    failure = WriteBlock(*block, info, split, options, &progress, writer, next_item, summary, total);
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
  GRANARY_RETURN_IF_ERROR(CheckSplitRead(split, options, *summary, total->rejected));
  return writer->EndSplit();
}

// The options' bounds, before any work.
Status CheckBuildOptions(const BuildOptions& options) {
  if (options.threads < 0) return Status::InvalidArgument("--threads must be >= 0");
  if (options.zstd_level < 0 || options.zstd_level > 22) {
    return Status::InvalidArgument("--zstd-level must be in 0..22, got " + std::to_string(options.zstd_level));
  }
  if (options.dictionary == DictionaryMode::kOn && options.zstd_level == 0) {
    return Status::InvalidArgument("--dictionary on needs compression: --zstd-level 0 stores records as they are");
  }
  if (options.shards < 1) {
    return Status::InvalidArgument("--shards must be at least 1, got " + std::to_string(options.shards));
  }
  return Status::OK();
}

// The build's dictionary: the interrupted build's when resuming, else one
// trained on the first split if it pays (MaybeTrainDictionary), stored in
// the db; null for none.
StatusOr<std::shared_ptr<const CompressionDictionary>> ChooseDictionary(const Source& source,
                                                                         const BuildOptions& options,
                                                                         size_t block_bytes, const ResumePoint& resume,
                                                                         DbWriter* writer, BuildSummary* summary) {
  std::string bytes;
  if (resume.resuming) {
    bytes = resume.dictionary;
    summary->dictionary_note = "as in the interrupted build";
  } else if (!source.splits.empty()) {
    StatusOr<std::string> trained =
        MaybeTrainDictionary(source.info.schema, *source.splits[0], options, block_bytes, &summary->dictionary_note);
    if (!trained.ok()) return trained.status();
    bytes = std::move(trained).value();
    if (!bytes.empty()) GRANARY_RETURN_IF_ERROR(writer->SetDictionary(bytes));
  }
  if (bytes.empty()) return std::shared_ptr<const CompressionDictionary>();
  summary->dictionary_bytes = bytes.size();
  auto dict = CompressionDictionary::Create(bytes, options.zstd_level);
  if (!dict.ok()) return dict.status();
  return std::shared_ptr<const CompressionDictionary>(dict.value());
}

// Splits in source order, whichever run built them.
void SortSplits(const Source& source, BuildSummary* summary) {
  auto rank = [&](const std::string& name) {
    for (size_t i = 0; i < source.splits.size(); ++i) {
      if (source.splits[i]->name() == name) return i;
    }
    return source.splits.size();
  };
  std::sort(summary->splits.begin(), summary->splits.end(),
            [&](const SplitSummary& a, const SplitSummary& b) { return rank(a.name) < rank(b.name); });
}

// The manifest of the finished build (the writer adds the splits, the
// schema and the content hashes).
Manifest MakeManifest(const Source& source, const BuildOptions& options, const BuildSummary& summary) {
  Manifest m;
  m.builder = std::string("granary prep ") + GRANARY_VERSION;
  m.created_utc = NowUtc();
  m.label_field = source.info.label_field;
  m.num_classes = source.info.num_classes;
  m.class_names = source.info.class_names;
  m.element_names = source.info.element_names;
  m.notes = source.info.notes;
  m.notes.insert(m.notes.end(), summary.notes.begin(), summary.notes.end());
  m.codec = options.zstd_level > 0 ? "zstd" : "none";
  m.zstd_level = options.zstd_level;
  m.source_kind = source.info.kind;
  m.source_path = source.info.path;
  m.build_options = RecordedOptions(source, options);
  m.build_options["dictionary_choice"] = summary.dictionary_note;
  m.rejected = summary.rejected;
  RecordStatistics(summary.splits, &m);
  return m;
}

}  // namespace

const char* DictionaryModeName(DictionaryMode mode) {
  switch (mode) {
    case DictionaryMode::kOn: return "on";
    case DictionaryMode::kOff: return "off";
    case DictionaryMode::kAuto: break;
  }
  return "auto";
}

void RecordStatistics(const std::vector<SplitSummary>& splits, Manifest* manifest) {
  for (const SplitSummary& split : splits) {
    if (auto statistics = split.statistics.Result(); !statistics.empty()) manifest->statistics[split.name] = statistics;
    const std::map<int64_t, uint64_t>* labels = split.counts.Counts(manifest->label_field);
    if (labels == nullptr || manifest->num_classes <= 0) continue;
    if (std::vector<uint64_t> classes = ClassCountsOf(*labels, manifest->num_classes); !classes.empty()) {
      manifest->class_counts[split.name] = std::move(classes);
    }
  }
}

nlohmann::json SplitSummaryToJson(const SplitSummary& s) {
  return {{"name", s.name},
          {"read", s.read},
          {"written", s.written},
          {"rejected", s.rejected},
          {"statistics", s.statistics.ToJson()},
          {"counts", s.counts.ToJson()}};
}

StatusOr<SplitSummary> SplitSummaryFromJson(const nlohmann::json& j, const Schema& schema) {
  try {
    SplitSummary out{j.at("name").get<std::string>(), j.at("read").get<uint64_t>(), j.at("written").get<uint64_t>(),
                     j.at("rejected").get<uint64_t>(), {}};
    GRANARY_ASSIGN_OR_RETURN(out.statistics, StatisticsAccumulator::FromJson(j.at("statistics"), schema));
    // (A journal of a granary before counts: none, so no partial counts.)
    GRANARY_ASSIGN_OR_RETURN(out.counts, ValueCounter::FromJson(j.value("counts", nlohmann::json()), schema));
    return out;
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("build journal checkpoint: ") + e.what());
  }
}

std::map<std::string, std::string> RecordedOptions(const Source& source, const BuildOptions& o) {
  std::map<std::string, std::string> recorded = source.info.options;
  recorded["zstd_level"] = std::to_string(o.zstd_level);
  recorded["dictionary"] = DictionaryModeName(o.dictionary);
  recorded["shards"] = std::to_string(o.shards);
  recorded["block_bytes"] = std::to_string(o.block_bytes);
  return recorded;
}

StatusOr<BuildSummary> BuildDb(const Source& source, const BuildOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GRANARY_RETURN_IF_ERROR(CheckBuildOptions(options));
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
  wopts.shards_per_split = options.shards;
  wopts.max_shard_bytes = options.max_shard_mb << 20;
  wopts.overwrite = options.overwrite;
  wopts.inputs = {source.info.path};
  if (options.records_per_commit > 0) wopts.records_per_commit = options.records_per_commit;
  for (const auto& split : source.splits) wopts.expected_samples += split->size();
  ResumePoint resume;
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<DbWriter> writer,
                           DbWriter::Create(wopts, options.resume ? &resume : nullptr));

  // The state a resumed build continues from: what every split has read,
  // written and rejected, and the next item of the split in progress.
  BuildSummary summary;
  summary.threads = threads;
  SplitSummary current;
  uint64_t next_item = 0;
  auto checkpoint = [&] { return CheckpointJson(summary, current, next_item); };
  auto start_journal = [&]() -> Status {
    Status journal = writer->StartJournal(Fingerprint(source, options, block_bytes), checkpoint);
    if (!journal.ok() && resume.resuming) {
      if (resume.builder != wopts.builder) {
        return Status::FailedPrecondition(writer->partial_path() + ": left by an interrupted " + resume.builder +
                                          ", not by prep build; resume it with " + resume.resume_with +
                                          ", or build again without --resume to replace it");
      }
      const std::string changed = SplitsDifference(resume.fingerprint, source);
      return Status::FailedPrecondition(
          (changed.empty() ? journal.message()
                           : writer->partial_path() + ": the interrupted build read other inputs: " + changed) +
          "; resume with the same ones, or build again without --resume to replace it");
    }
    return journal;
  };
  if (resume.resuming) {
    // The same inputs and options first: another build's journal is named, not misread.
    GRANARY_RETURN_IF_ERROR(start_journal());
    GRANARY_RETURN_IF_ERROR(RestoreCheckpoint(resume.checkpoint, source.info.schema, &summary, &current, &next_item));
    // A checkpoint taken as a split ended still holds that split as current.
    if (!current.name.empty() && current.name != resume.split) {
      summary.splits.push_back(current);
      current = SplitSummary();
    }
  }

  StatusOr<std::shared_ptr<const CompressionDictionary>> dictionary =
      ChooseDictionary(source, options, block_bytes, resume, writer.get(), &summary);
  if (!dictionary.ok()) return dictionary.status();
  if (!resume.resuming) GRANARY_RETURN_IF_ERROR(start_journal());  // once the dictionary is in the db

  for (const auto& split : source.splits) {
    summary.raw_bytes += split->raw_bytes();
    bool finished = false;
    for (const SplitInfo& done : resume.finished) finished = finished || done.name == split->name();
    if (finished) continue;
    if (!(resume.resuming && split->name() == resume.split)) {
      current = SplitSummary();
      next_item = 0;
    }
    GRANARY_RETURN_IF_ERROR(BuildSplit(source.info, *split, options, max_in_flight, block_bytes, dictionary.value(),
                                       writer.get(), &next_item, &current, &summary));
    summary.splits.push_back(current);
    current = SplitSummary();
  }
  SortSplits(source, &summary);
  if (source.produced_notes) summary.notes = source.produced_notes();
  // The manifest vouches for inputs.json (its hash): `--update` copies samples by it.
  const std::string inputs = InputsJson(source, options, summary);
  GRANARY_RETURN_IF_ERROR(writer->AddFile(kInputsFile, inputs));
  Manifest manifest = MakeManifest(source, options, summary);
  std::vector<std::string> notes = ClassGapNotes(manifest);
  if (std::string imbalance = ImbalanceNote(manifest); !imbalance.empty()) notes.insert(notes.begin(), imbalance);
  manifest.notes.insert(manifest.notes.end(), notes.begin(), notes.end());
  summary.notes.insert(summary.notes.end(), notes.begin(), notes.end());
  manifest.build_options[kInputsHashOption] = InputsHash(inputs);
  GRANARY_RETURN_IF_ERROR(writer->Finish(std::move(manifest)));

  GRANARY_RETURN_IF_ERROR(MeasureDb(options.db_path, &summary.content_hash, &summary.stored_bytes));
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace granary
