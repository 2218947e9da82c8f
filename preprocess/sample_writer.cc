#include "preprocess/sample_writer.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "preprocess/dictionary_choice.h"
#include "preprocess/packing.h"
#include "preprocess/value_counts.h"
#include "store/db_writer.h"
#include "store/record.h"

namespace granary {
namespace {

// The samples held back for the dictionary, as the split source that
// MaybeTrainDictionary draws its training and trial samples from.
class HeldSamples : public SplitSource {
 public:
  HeldSamples(std::string name, const std::vector<Sample>& samples) : name_(std::move(name)), samples_(samples) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return samples_.size(); }
  std::string ItemName(uint64_t index) const override { return name_ + "[" + std::to_string(index) + "]"; }
  Status Produce(uint64_t index, Sample* sample) const override {
    *sample = samples_[index];
    return Status::OK();
  }
  uint64_t raw_bytes() const override { return 0; }

 private:
  std::string name_;
  const std::vector<Sample>& samples_;
};

// Who builds, as DbWriter's journal and messages name it.
constexpr char kBuilder[] = "granary.write (Python)";

uint64_t PayloadBytes(const std::vector<Sample>& samples) {
  uint64_t bytes = 0;
  for (const Sample& s : samples) {
    for (const std::string& f : s.fields) bytes += f.size();
  }
  return bytes;
}

Status CheckOptions(const SampleWriterOptions& o) {
  GRANARY_RETURN_IF_ERROR(o.schema.Validate());
  if (o.threads < 0) return Status::InvalidArgument("workers/threads must be >= 0");
  if (o.zstd_level < 0 || o.zstd_level > 22) {
    return Status::InvalidArgument("zstd_level must be in 0..22, got " + std::to_string(o.zstd_level));
  }
  if (o.dictionary == DictionaryMode::kOn && o.zstd_level == 0) {
    return Status::InvalidArgument("dictionary on needs compression: zstd_level 0 stores records as they are");
  }
  return Status::OK();
}

}  // namespace

struct SampleWriter::Impl {
  SampleWriterOptions o;
  size_t block_bytes = 0;
  tbb::task_arena arena;
  std::unique_ptr<DbWriter> writer;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  SampleWriterSummary summary;
  Status failure;  // once set, every call returns it

  // Resuming: where the interrupted write stopped, and its split in progress
  // as the journal left it. caller_state goes into every checkpoint.
  SampleWriterResume resumed;
  std::string resumed_builder, resumed_with;  // who left the interrupted build, and what resumes it
  SplitSummary resumed_split;
  std::string caller_state;

  // The dictionary is decided on the first split's first samples, held
  // until then; the encoders are made once it is.
  bool decided = false;
  std::vector<Sample> held;
  std::shared_ptr<const CompressionDictionary> dictionary;
  std::unique_ptr<tbb::enumerable_thread_specific<std::unique_ptr<EncodeScratch>>> scratch;

  // The split in progress.
  bool in_split = false;
  bool split_open = false;  // begun in the DbWriter
  uint64_t expected = 0;
  SplitSummary current;
  std::unique_ptr<Packer> packer;

  Impl(SampleWriterOptions options, int threads) : o(std::move(options)), arena(threads) {}

  Status Decide();
  void MakeEncoders() {
    scratch = std::make_unique<tbb::enumerable_thread_specific<std::unique_ptr<EncodeScratch>>>(
        [this] { return std::make_unique<EncodeScratch>(o.schema, o.zstd_level, dictionary); });
  }
  Status StartJournal();
  std::string Checkpoint() const;
  Status Resume(const ResumePoint& resume);
  Status Open();
  Status Write(std::vector<Sample> samples);
  Status WriteBlocks(std::vector<BlockPtr> blocks);
  Status Fail(Status s) {
    if (failure.ok()) failure = s;
    return failure;
  }
};

// Trains a dictionary on what is held, as prep does on the first split (and
// keeps it where it pays), then makes the encoders.
Status SampleWriter::Impl::Decide() {
  decided = true;
  BuildOptions b;
  b.zstd_level = o.zstd_level;
  b.dictionary = o.dictionary;
  // Half of what is held trains it and the other half tries it.
  b.dictionary_samples = held.size() >= 2 * o.dictionary_samples ? o.dictionary_samples : held.size();
  std::string bytes;
  if (!held.empty() || o.dictionary == DictionaryMode::kOff || o.zstd_level == 0) {
    const HeldSamples split(current.name, held);
    GRANARY_ASSIGN_OR_RETURN(bytes, arena.execute([&] {
      return MaybeTrainDictionary(o.schema, split, b, block_bytes, &summary.dictionary_note);
    }));
  } else {
    summary.dictionary_note = "none (no samples)";
  }
  if (!bytes.empty()) {
    GRANARY_RETURN_IF_ERROR(writer->SetDictionary(bytes));
    GRANARY_ASSIGN_OR_RETURN(auto dict, CompressionDictionary::Create(bytes, o.zstd_level));
    dictionary = std::move(dict);
    summary.dictionary_bytes = bytes.size();
  }
  MakeEncoders();
  return StartJournal();
}

// Makes the write resumable from here on (or, resuming, checks that it is
// the same write): the fingerprint holds what must not change.
Status SampleWriter::Impl::StartJournal() {
  nlohmann::json fields = nlohmann::json::array();
  for (const FieldSpec& f : o.schema.fields) fields.push_back({f.name, DTypeName(f.dtype), f.shape, f.layout});
  // The caller's description as JSON where it is JSON, so that a difference is named by its key.
  nlohmann::json caller = ParseJson(o.fingerprint);
  if (caller.is_discarded()) caller = o.fingerprint;
  const nlohmann::json fingerprint = {{"caller", caller},           {"fields", fields},
                                      {"zstd_level", o.zstd_level}, {"dictionary", DictionaryModeName(o.dictionary)},
                                      {"block_bytes", block_bytes}};
  Status s = writer->StartJournal(DumpJson(fingerprint), [this] { return Checkpoint(); });
  if (!s.ok() && resumed.resuming) {
    if (resumed_builder != kBuilder) {
      return Status::FailedPrecondition(writer->partial_path() + ": left by an interrupted " + resumed_builder +
                                        ", not by granary.write; resume it with " + resumed_with +
                                        ", or write again without resume to replace it");
    }
    return Status::FailedPrecondition(s.message() +
                                      "; resume with the same samples and options, or write again without resume to "
                                      "replace it");
  }
  return s;
}

// The writer's state for the journal, taken right after a commit: the
// finished splits and the one in progress as far as its written records go.
std::string SampleWriter::Impl::Checkpoint() const {
  nlohmann::json j = {{"payload_bytes", summary.payload_bytes},
                      {"dictionary_note", summary.dictionary_note},
                      {"splits", nlohmann::json::array()},
                      {"current", nullptr},
                      {"caller", caller_state}};
  for (const SplitSummary& split : summary.splits) j["splits"].push_back(SplitSummaryToJson(split));
  if (in_split && split_open) {  // a split not begun in the DbWriter has no record there yet
    SplitSummary written = current;
    written.read = written.written;  // samples still in the packer are handed over again
    j["current"] = SplitSummaryToJson(written);
  }
  return DumpJson(j);
}

// Continues from the journal `resume`: the finished splits' summaries, the
// split in progress, the dictionary, the caller's state.
Status SampleWriter::Impl::Resume(const ResumePoint& resume) {
  resumed.resuming = true;
  resumed_builder = resume.builder;
  resumed_with = resume.resume_with;
  // The same samples and options first: another build's journal is named, not misread.
  GRANARY_RETURN_IF_ERROR(StartJournal());
  const nlohmann::json j = ParseJson(resume.checkpoint);
  try {
    summary.payload_bytes = j.at("payload_bytes").get<uint64_t>();
    summary.dictionary_note = j.at("dictionary_note").get<std::string>();
    caller_state = j.at("caller").get<std::string>();
    for (const auto& split : j.at("splits")) {
      GRANARY_ASSIGN_OR_RETURN(SplitSummary done, SplitSummaryFromJson(split, o.schema));
      summary.splits.push_back(std::move(done));
    }
    if (!j.at("current").is_null()) {
      GRANARY_ASSIGN_OR_RETURN(resumed_split, SplitSummaryFromJson(j.at("current"), o.schema));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(writer->partial_path() + ": build journal checkpoint: " + e.what());
  }
  // A checkpoint taken before the split in progress reached the db (as writers before 2026-12-07 took one when
  // the dictionary was decided) holds none of its records.
  if (resume.split.empty() && resumed_split.written == 0) resumed_split = SplitSummary();
  // A checkpoint taken as a split ended still holds that split as current.
  if (!resumed_split.name.empty() && resumed_split.name != resume.split) {
    summary.splits.push_back(std::exchange(resumed_split, SplitSummary()));
  }
  if (resumed_split.name != resume.split || resumed_split.written != resume.samples ||
      summary.splits.size() != resume.finished.size()) {
    return Status::Corruption(writer->partial_path() + ": the build journal's checkpoint disagrees with its splits");
  }
  for (const SplitSummary& split : summary.splits) resumed.finished.emplace_back(split.name, split.written);
  resumed.split = resume.split;
  resumed.samples = resume.samples;
  resumed.caller_state = caller_state;
  decided = true;
  if (!resume.dictionary.empty()) {
    GRANARY_ASSIGN_OR_RETURN(auto dict, CompressionDictionary::Create(resume.dictionary, o.zstd_level));
    dictionary = std::move(dict);
    summary.dictionary_bytes = resume.dictionary.size();
  }
  MakeEncoders();
  return Status::OK();
}

Status SampleWriter::Impl::Open() {
  if (split_open) return Status::OK();
  GRANARY_RETURN_IF_ERROR(writer->BeginSplit(current.name, expected));
  split_open = true;
  return Status::OK();
}

// Encodes `samples` alone in parallel, packs them in order, and writes the
// blocks that are complete.
Status SampleWriter::Impl::Write(std::vector<Sample> samples) {
  GRANARY_RETURN_IF_ERROR(Open());
  const uint64_t first = current.read;
  std::vector<EncodedPtr> items(samples.size());
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, samples.size(), [&](size_t k) {
      auto e = std::make_shared<Encoded>();
      e->index = first + k;
      e->sample = std::move(samples[k]);
      EncodeProduced(o.schema, Status::OK(), *scratch->local(), e.get());
      items[k] = std::move(e);
    });
  });
  std::vector<BlockPtr> blocks;
  for (const EncodedPtr& e : items) {
    if (!e->reject.empty()) {
      return Status::InvalidArgument("split '" + current.name + "', sample " + std::to_string(e->index) + ": " +
                                     e->reject);
    }
    for (BlockPtr& block : packer->Add(e)) blocks.push_back(std::move(block));
  }
  current.read += items.size();
  return WriteBlocks(std::move(blocks));
}

Status SampleWriter::Impl::WriteBlocks(std::vector<BlockPtr> blocks) {
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, blocks.size(), [&](size_t k) { EncodeBlock(o.schema, *scratch->local(), blocks[k].get()); });
  });
  for (const BlockPtr& block : blocks) {
    if (!block->error.empty()) return Status::InvalidArgument("split '" + current.name + "': " + block->error);
    if (block->value.empty()) continue;
    // The journal's checkpoint (taken inside Append) must include this block.
    for (const EncodedPtr& e : block->items) summary.payload_bytes += e->payload_bytes;
    current.written += block->payload_hashes.size();
    current.statistics.Merge(block->statistics);
    current.counts.Merge(block->counts);
    GRANARY_RETURN_IF_ERROR(writer->Append(block->value, block->payload_hashes));
  }
  return Status::OK();
}

SampleWriter::SampleWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SampleWriter::~SampleWriter() = default;

StatusOr<std::unique_ptr<SampleWriter>> SampleWriter::Create(SampleWriterOptions options) {
  GRANARY_RETURN_IF_ERROR(CheckOptions(options));
  const int threads = options.threads > 0 ? options.threads : tbb::info::default_concurrency();
  auto impl = std::make_unique<Impl>(std::move(options), threads);
  impl->summary.threads = threads;
  impl->block_bytes = impl->o.block_bytes > 0 ? impl->o.block_bytes : ValueBytesFillingPages(2);
  DbWriterOptions w;
  w.path = impl->o.db_path;
  w.schema = impl->o.schema;
  w.overwrite = impl->o.overwrite;
  w.builder = kBuilder;
  w.resume_with = "granary.write(..., resume=True)";
  if (impl->o.records_per_commit > 0) w.records_per_commit = impl->o.records_per_commit;
  w.expected_samples = impl->o.expected_samples;
  ResumePoint resume;
  GRANARY_ASSIGN_OR_RETURN(impl->writer, DbWriter::Create(w, impl->o.resume ? &resume : nullptr));
  if (resume.resuming) GRANARY_RETURN_IF_ERROR(impl->Resume(resume));
  return std::unique_ptr<SampleWriter>(new SampleWriter(std::move(impl)));
}

const SampleWriterResume& SampleWriter::resumed() const { return impl_->resumed; }

void SampleWriter::SetCallerState(std::string state) { impl_->caller_state = std::move(state); }

std::string SampleWriter::TakeDiskWarning() { return impl_->writer->TakeDiskWarning(); }

Status SampleWriter::BeginSplit(const std::string& name, uint64_t expected) {
  Impl& m = *impl_;
  GRANARY_RETURN_IF_ERROR(m.failure);
  if (m.in_split) return Status::FailedPrecondition("split '" + m.current.name + "' is still being written");
  if (name.empty()) return Status::InvalidArgument("a split needs a name");
  for (const SplitSummary& s : m.summary.splits) {
    if (s.name == name) return Status::InvalidArgument("split '" + name + "' was written already");
  }
  m.in_split = true;
  m.split_open = false;
  m.expected = expected;
  m.current = SplitSummary();
  m.current.name = name;
  m.current.statistics = StatisticsAccumulator(m.o.schema);
  m.current.counts = ValueCounter(m.o.schema);
  if (m.resumed.resuming && name == m.resumed.split) {
    m.current = m.resumed_split;  // Open continues its shard
    m.current.read = m.current.written;
  }
  m.packer = std::make_unique<Packer>(m.o.schema, Packer::kUnknown, m.block_bytes);
  return Status::OK();
}

Status SampleWriter::Add(std::vector<Sample> samples) {
  Impl& m = *impl_;
  GRANARY_RETURN_IF_ERROR(m.failure);
  if (!m.in_split) return Status::FailedPrecondition("no split begun");
  if (m.decided) return m.Fail(m.Write(std::move(samples)));
  for (Sample& s : samples) m.held.push_back(std::move(s));
  // Records that are not small get no dictionary: decided on a few, so that
  // large samples (photos) are not held by the thousand.
  const bool large = m.held.size() >= 16 && PayloadBytes(m.held) / m.held.size() > kSmallRecordBytes;
  const bool off = m.o.dictionary == DictionaryMode::kOff || m.o.zstd_level == 0;
  if (!(large || off || m.held.size() >= 2 * m.o.dictionary_samples)) return Status::OK();
  Status s = m.Decide();
  if (s.ok()) s = m.Write(std::exchange(m.held, {}));
  return m.Fail(s);
}

Status SampleWriter::EndSplit() {
  Impl& m = *impl_;
  GRANARY_RETURN_IF_ERROR(m.failure);
  if (!m.in_split) return Status::FailedPrecondition("no split begun");
  Status s;
  if (!m.decided) s = m.Decide();
  if (s.ok()) s = m.Write(std::exchange(m.held, {}));
  if (s.ok()) {
    std::vector<BlockPtr> rest;
    if (BlockPtr block = m.packer->Rest()) rest.push_back(std::move(block));
    s = m.WriteBlocks(std::move(rest));
  }
  if (s.ok()) s = m.writer->EndSplit();
  GRANARY_RETURN_IF_ERROR(m.Fail(s));
  m.in_split = false;
  m.summary.splits.push_back(m.current);
  return Status::OK();
}

StatusOr<SampleWriterSummary> SampleWriter::Finish(const SampleLabels& labels) {
  Impl& m = *impl_;
  GRANARY_RETURN_IF_ERROR(m.failure);
  if (!labels.label_field.empty() && m.o.schema.FieldIndex(labels.label_field) < 0) {
    return Status::InvalidArgument("label field '" + labels.label_field + "' is not in the schema");
  }
  if (m.in_split) return Status::FailedPrecondition("split '" + m.current.name + "' is still being written");
  if (m.summary.splits.empty()) return Status::InvalidArgument("no split was written");
  if (m.resumed.resuming && !m.resumed.split.empty() &&
      std::none_of(m.summary.splits.begin(), m.summary.splits.end(),
                   [&](const SplitSummary& s) { return s.name == m.resumed.split; })) {
    return Status::FailedPrecondition("split '" + m.resumed.split +
                                      "', which the interrupted write had begun, was not written: a resumed write "
                                      "needs the same samples");
  }
  Manifest manifest;
  manifest.builder = m.o.builder + " " + GRANARY_VERSION;
  manifest.created_utc = NowUtc();
  manifest.label_field = labels.label_field;
  manifest.num_classes = labels.num_classes;
  manifest.class_names = labels.class_names;
  manifest.notes = labels.notes;
  manifest.codec = m.o.zstd_level > 0 ? "zstd" : "none";
  manifest.zstd_level = m.o.zstd_level;
  manifest.source_kind = m.o.source_kind;
  manifest.source_path = m.o.source_path;
  manifest.build_options = m.o.options;
  manifest.build_options["zstd_level"] = std::to_string(m.o.zstd_level);
  manifest.build_options["dictionary"] = DictionaryModeName(m.o.dictionary);
  manifest.build_options["block_bytes"] = std::to_string(m.o.block_bytes);
  manifest.build_options["dictionary_choice"] = m.summary.dictionary_note;
  RecordStatistics(m.summary.splits, &manifest);
  m.summary.notes = ClassGapNotes(manifest);
  manifest.notes.insert(manifest.notes.end(), m.summary.notes.begin(), m.summary.notes.end());
  GRANARY_RETURN_IF_ERROR(m.Fail(m.writer->Finish(manifest)));
  GRANARY_RETURN_IF_ERROR(MeasureDb(m.o.db_path, &m.summary.content_hash, &m.summary.stored_bytes));
  m.summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m.start).count();
  return m.summary;
}

}  // namespace granary
