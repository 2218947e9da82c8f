#include "store/db_writer.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/json_text.h"
#include "store/build_journal.h"
#include "store/content_hash.h"
#include "store/db_directory.h"
#include "store/disk_room.h"
#include "store/format.h"
#include "store/lmdb_handles.h"
#include "store/shard_index.h"

namespace granary {

namespace fs = std::filesystem;

namespace {

// Room a shard's map keeps beyond its estimate of what the next record needs.
constexpr uint64_t kMapMarginBytes = uint64_t{1} << 20;
using format::kBuilderFile;

// One shard file of the split being written. Shards are written in order and
// only the current one is open, so a split of thousands of shards holds one
// file descriptor and one map at a time.
struct ShardWriter {
  std::string rel_path;
  std::string abs_path;
  lmdb::Env env;  // open while the shard is being written (or scanned on resume)
  lmdb::Txn txn;
  MDB_dbi dbi = 0;
  uint64_t count = 0;  // samples
  size_t pending = 0;        // records since the last commit
  size_t pending_bytes = 0;  // value bytes since the last commit
  uint64_t pending_stored = 0;  // what they take in the file (StoredBytesOfValue)
  bool done = false;         // synced and closed for good
  uint64_t bytes = 0;        // the file's size, once done
};

}  // namespace

struct DbWriter::Impl {
  DbWriterOptions options;
  std::string partial;
  DirectoryLock lock;  // on `partial`, for the writer's whole life
  std::vector<SplitInfo> splits;
  bool in_split = false;
  bool finished = false;
  std::string split_name;
  uint64_t split_count = 0;
  uint64_t split_expected = 0;
  size_t current_shard = 0;
  std::vector<ShardWriter> shards;
  std::unique_ptr<SplitHasher> split_hash;

  // Resuming: what the journal said, and whether the journal is being kept.
  ResumePoint resume;
  bool journaling = false;
  std::string fingerprint;
  std::string dictionary;
  std::function<std::string()> checkpoint;

  DiskRoomWatch room;  // for the samples still to come

  // Opens (creating if need be) the shard's file and its main database.
  Status OpenShard(ShardWriter& shard) {
    uint64_t map_bytes = options.initial_map_bytes;
    if (options.max_shard_bytes > 0) map_bytes = std::min(map_bytes, options.max_shard_bytes);
    // LMDB maps at least the file's committed pages (a resumed shard may be larger).
    GRANARY_RETURN_IF_ERROR(shard.env.Open(shard.abs_path, MDB_NOSYNC, map_bytes));
    lmdb::Txn txn;
    GRANARY_RETURN_IF_ERROR(txn.Begin(shard.env.get(), 0, shard.abs_path));
    int rc = mdb_dbi_open(txn.get(), nullptr, MDB_CREATE, &shard.dbi);
    if (rc != 0) return lmdb::Error(shard.abs_path, "open database", rc);
    return txn.Commit(shard.abs_path);
  }

  // Commits, syncs and closes the shard for good (an empty shard still gets
  // its file), and records the file's size.
  Status FinishShard(ShardWriter& shard) {
    if (shard.done) return Status::OK();
    if (shard.env.get() == nullptr) GRANARY_RETURN_IF_ERROR(OpenShard(shard));
    GRANARY_RETURN_IF_ERROR(CommitShard(shard));
    int rc = mdb_env_sync(shard.env.get(), 1);
    if (rc != 0) return lmdb::Error(shard.abs_path, "sync", rc);
    shard.env.Close();
    struct stat st;
    if (::stat(shard.abs_path.c_str(), &st) != 0) return Status::IOError(shard.abs_path, "stat", errno);
    shard.bytes = static_cast<uint64_t>(st.st_size);
    shard.done = true;
    return Status::OK();
  }

  Status CommitShard(ShardWriter& shard) {
    if (shard.txn.get() == nullptr) return Status::OK();
    shard.pending = 0;
    shard.pending_bytes = 0;
    shard.pending_stored = 0;
    GRANARY_RETURN_IF_ERROR(shard.txn.Commit(shard.abs_path));
    return WriteJournal();
  }

  // Makes sure the shard's map has room for a record of `value_bytes` after
  // what is committed and pending: twice what they store (leaf and branch
  // pages, copy-on-write) plus a margin. If not, commits and doubles the map
  // (at least to what is needed), within max_shard_bytes.
  Status EnsureMapRoom(ShardWriter& shard, size_t value_bytes) {
    MDB_envinfo info;
    MDB_stat stat;
    mdb_env_info(shard.env.get(), &info);
    mdb_env_stat(shard.env.get(), &stat);
    const uint64_t committed = (static_cast<uint64_t>(info.me_last_pgno) + 1) * stat.ms_psize;
    const uint64_t record = StoredBytesOfValue(value_bytes);
    if (committed + 2 * (shard.pending_stored + record) + kMapMarginBytes <= info.me_mapsize) return Status::OK();
    // The map changes only between transactions. No journal update here: the
    // caller's checkpoint may already count the record being appended; the
    // next commit's journal covers these records, and a resume before it drops them.
    if (shard.txn.get() != nullptr) GRANARY_RETURN_IF_ERROR(shard.txn.Commit(shard.abs_path));
    shard.pending_stored = 0;
    mdb_env_info(shard.env.get(), &info);
    const uint64_t needed =
        (static_cast<uint64_t>(info.me_last_pgno) + 1) * stat.ms_psize + 2 * record + kMapMarginBytes;
    if (needed <= info.me_mapsize) return Status::OK();
    uint64_t grown = std::max<uint64_t>(needed, 2 * info.me_mapsize);
    if (options.max_shard_bytes > 0) {
      if (needed > options.max_shard_bytes) {
        return Status::FailedPrecondition(shard.abs_path + ": the shard would outgrow --max-shard-mb " +
                                          std::to_string(options.max_shard_bytes >> 20) +
                                          " (use more --shards, or a larger --max-shard-mb)");
      }
      grown = std::min(grown, options.max_shard_bytes);
    }
    const int rc = mdb_env_set_mapsize(shard.env.get(), grown);
    if (rc != 0) {
      return Status::IOError(shard.abs_path,
                             "map " + std::to_string(grown >> 20) + " MiB of address space (" + mdb_strerror(rc) +
                                 ": raise the limit, ulimit -v, or use more --shards)",
                             0);
    }
    return Status::OK();
  }

  // Renames the complete partial directory to the db path. An existing db
  // there (checked again: it may have changed since Create) is exchanged
  // atomically with it, so a crash leaves the old db or the new one, and then
  // removed.
  Status Publish() {
    const std::string& path = options.path;
    if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0) return Status::OK();
    if (errno != EEXIST) return Status::IOError(path, "rename from " + partial, errno);
    if (!options.overwrite || !IsGranaryDb(path)) {
      return Status::FailedPrecondition(path + ": appeared during the build (not a db this build may replace)");
    }
    if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) != 0) {
      return Status::IOError(path, "exchange with " + partial, errno);
    }
    std::error_code ec;
    fs::remove_all(partial, ec);  // the replaced db
    if (ec) return Status::IOError(partial, "remove the replaced db (now here)", ec.value());
    return Status::OK();
  }

  // Records what is safely written (docs/FORMAT.md does not cover it: the
  // journal lives only in "<db>.partial"): finished splits, the split in
  // progress with its committed samples, and the caller's checkpoint.
  // Invariant: called right after a commit, so every appended record is in it.
  Status WriteJournal() {
    assert(std::all_of(shards.begin(), shards.end(), [](const ShardWriter& s) { return s.pending == 0; }) &&
           "the journal would count records not yet committed");
    if (!journaling) return Status::OK();
    return WriteBuildJournal(partial, {fingerprint, options.schema, splits, in_split ? split_name : "",
                                       in_split ? split_count : 0, checkpoint ? checkpoint() : "",
                                       !dictionary.empty(), options.builder, options.resume_with});
  }
};

bool HasResumableBuild(const std::string& path) {
  std::error_code ec;
  return fs::exists(path + format::kPartialSuffix + "/" + kJournalFile, ec);
}

bool IsGranaryDb(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  std::string text;
  if (!ReadBoundedFile(path + "/" + format::kManifestFile, format::kMaxManifestBytes, &text).ok()) return false;
  const nlohmann::json j = ParseJson(text);
  return j.is_object() && j.contains("format") && j["format"] == format::kFormatName;
}

DbWriter::DbWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DbWriter::~DbWriter() {
  if (impl_->finished) return;
  for (ShardWriter& shard : impl_->shards) {
    shard.txn.Abort();
    shard.env.Close();
  }
  // Resumable, or the interrupted build a --resume was refused on: its work is kept.
  if (impl_->journaling || impl_->resume.resuming) return;
  std::error_code ec;
  fs::remove_all(impl_->partial, ec);
}

const std::string& DbWriter::partial_path() const { return impl_->partial; }
uint64_t DbWriter::split_count() const { return impl_->split_count; }

std::string DbWriter::TakeDiskWarning() { return impl_->room.TakeWarning(); }

StatusOr<std::unique_ptr<DbWriter>> DbWriter::Create(DbWriterOptions options, ResumePoint* resume) {
  GRANARY_RETURN_IF_ERROR(options.schema.Validate());
  if (options.path.empty()) return Status::InvalidArgument("db path is empty");
  if (options.shards_per_split < 1) {
    return Status::InvalidArgument("shards per split must be at least 1, got " +
                                   std::to_string(options.shards_per_split));
  }
  while (options.path.size() > 1 && options.path.back() == '/') options.path.pop_back();
  const std::string partial = options.path + format::kPartialSuffix;
  GRANARY_RETURN_IF_ERROR(CheckApartFromInputs(options.path, options.inputs));
  GRANARY_RETURN_IF_ERROR(CheckApartFromInputs(partial, options.inputs));
  std::error_code ec;
  if (fs::exists(fs::symlink_status(options.path, ec))) {
    if (!options.overwrite) {
      return Status::FailedPrecondition(options.path + ": already exists");
    }
    if (!IsGranaryDb(options.path)) {
      return Status::FailedPrecondition(options.path + ": exists and is not a granary db (no " +
                                        format::kManifestFile + " of format " + format::kFormatName +
                                        "); refusing to replace it");
    }
  }

  auto impl = std::make_unique<Impl>();
  impl->partial = partial;
  impl->room = DiskRoomWatch(partial, options.expected_samples, options.resume_with);
  impl->options = std::move(options);
  const bool made = ::mkdir(partial.c_str(), 0777) == 0;
  if (!made && errno != EEXIST) return Status::IOError(partial, "create directory", errno);
  if (!made && !fs::is_directory(fs::symlink_status(partial, ec))) {
    return Status::FailedPrecondition(partial + ": exists and is not a build's directory; refusing to replace it");
  }
  Status locked = impl->lock.TryLock(partial);
  if (locked.code() == Status::Code::kBusy) {
    return Status::Busy(impl->options.path + ": being built by process " + BuilderOf(partial) + " (" + partial +
                        " is locked)");
  }
  GRANARY_RETURN_IF_ERROR(locked);

  if (resume != nullptr && HasResumableBuild(impl->options.path)) {
    GRANARY_RETURN_IF_ERROR(ReadBuildJournal(partial, &impl->resume));
    impl->resume.resuming = true;
    *resume = impl->resume;
  } else {
    if (!IsBuildLeftover(partial)) {
      return Status::FailedPrecondition(partial + ": exists and was not made by a build (no " + kBuilderFile +
                                        "); refusing to replace it");
    }
    GRANARY_RETURN_IF_ERROR(EmptyDirectory(partial));
  }
  GRANARY_RETURN_IF_ERROR(
      WriteFileAtomically(partial + "/" + kBuilderFile, std::to_string(::getpid()) + "\n", InPartial()));
  return std::unique_ptr<DbWriter>(new DbWriter(std::move(impl)));
}

Status DbWriter::StartJournal(const std::string& fingerprint, std::function<std::string()> checkpoint) {
  Impl& s = *impl_;
  if (s.resume.resuming && s.resume.fingerprint != fingerprint) {
    return Status::FailedPrecondition(s.partial + ": the interrupted build used other inputs or options (" +
                                      JsonDifference(ParseJson(s.resume.fingerprint), ParseJson(fingerprint)) + ")");
  }
  s.fingerprint = fingerprint;
  s.checkpoint = std::move(checkpoint);
  s.journaling = true;
  if (s.resume.resuming) {
    s.splits = s.resume.finished;
    s.dictionary = s.resume.dictionary;  // its file is already in the partial directory
    return Status::OK();
  }
  return s.WriteJournal();
}

Status DbWriter::AddFile(const std::string& name, const std::string& bytes) {
  Impl& s = *impl_;
  const bool own = name == format::kManifestFile || name == format::kDictionaryFile || name == kJournalFile ||
                   name == kBuilderFile;
  bool split = false;
  for (const SplitInfo& info : s.splits) split = split || info.name == name;
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos || own || split) {
    return Status::InvalidArgument("'" + name + "' cannot be a file of the db");
  }
  return WriteFileSynced(s.partial + "/" + name, bytes);
}

Status DbWriter::SetDictionary(const std::string& bytes) {
  Impl& s = *impl_;
  if (s.in_split || !s.splits.empty()) {
    return Status::FailedPrecondition("SetDictionary after a split began");
  }
  GRANARY_RETURN_IF_ERROR(WriteFileSynced(s.partial + "/" + format::kDictionaryFile, bytes));
  s.dictionary = bytes;
  return Status::OK();
}

Status DbWriter::BeginSplit(const std::string& name, uint64_t expected_samples) {
  Impl& s = *impl_;
  if (s.in_split) return Status::FailedPrecondition("split '" + s.split_name + "' is still open");
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return Status::InvalidArgument("bad split name '" + name + "'");
  }
  for (const SplitInfo& done : s.splits) {
    if (done.name == name) return Status::InvalidArgument("split '" + name + "' written twice");
  }
  std::error_code ec;
  fs::create_directories(s.partial + "/" + name, ec);
  if (ec) return Status::IOError(s.partial + "/" + name, "create directory", ec.value());
  s.shards.clear();
  s.shards.resize(s.options.shards_per_split);
  for (int i = 0; i < s.options.shards_per_split; ++i) {
    ShardWriter& shard = s.shards[i];
    shard.rel_path = ShardRelPath(name, i);
    shard.abs_path = s.partial + "/" + shard.rel_path;
    const bool resuming = s.resume.resuming && name == s.resume.split;
    if (!resuming && !fs::remove(shard.abs_path, ec) && ec) {  // a stale file of an unfinished split
      return Status::IOError(shard.abs_path, "remove stale shard", ec.value());
    }
  }
  s.split_name = name;
  s.split_count = 0;
  s.split_expected = expected_samples;
  s.current_shard = 0;
  s.in_split = true;
  s.split_hash = std::make_unique<SplitHasher>();
  if (s.resume.resuming && name == s.resume.split) return ResumeSplit();
  return Status::OK();
}

// Drops records past the journal's committed samples (written after its last
// update), then recounts the shards and re-hashes the samples kept.
Status DbWriter::ResumeSplit() {
  Impl& s = *impl_;
  std::shared_ptr<const CompressionDictionary> dict;
  if (!s.dictionary.empty()) {
    auto d = CompressionDictionary::Create(s.dictionary, 0);
    if (!d.ok()) return d.status();
    dict = d.value();
  }
  RecordDecoder decoder(s.options.schema, dict);
  DecodedRecord record;
  for (size_t k = 0; k < s.shards.size(); ++k) {
    ShardWriter& shard = s.shards[k];
    if (!fs::exists(shard.abs_path)) break;  // shards are written in order: none after this one either
    GRANARY_RETURN_IF_ERROR(s.OpenShard(shard));
    lmdb::Txn txn;
    GRANARY_RETURN_IF_ERROR(txn.Begin(shard.env.get(), 0, shard.abs_path));
    lmdb::Cursor cursor;
    GRANARY_RETURN_IF_ERROR(cursor.Open(txn.get(), shard.dbi, shard.abs_path));
    MDB_val key, val;
    int rc;
    for (rc = mdb_cursor_get(cursor.get(), &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cursor.get(), &key, &val, MDB_NEXT)) {
      const uint64_t first = DecodeKey(key.mv_data);
      if (first >= s.resume.samples) {
        // After a delete, LMDB's MDB_NEXT yields the record that followed.
        rc = mdb_cursor_del(cursor.get(), 0);
        if (rc != 0) return lmdb::Error(shard.abs_path, "drop key " + std::to_string(first), rc);
        continue;
      }
      if (first != s.split_count) {
        return Status::Corruption(shard.abs_path + ", key " + std::to_string(first) + ": cannot resume, expected key " +
                                  std::to_string(s.split_count));
      }
      Status decoded = decoder.Decode(std::string_view(static_cast<const char*>(val.mv_data), val.mv_size), &record);
      if (!decoded.ok()) return decoded.WithContext(shard.abs_path + ", key " + std::to_string(first));
      for (uint32_t i = 0; i < record.num_samples; ++i) s.split_hash->Add(SamplePayloadHash(record, i));
      shard.count += record.num_samples;
      s.split_count += record.num_samples;
      s.current_shard = k;
    }
    cursor.Close();  // before its transaction ends
    GRANARY_RETURN_IF_ERROR(txn.Commit(shard.abs_path));
    shard.env.Close();  // Append reopens the shard it continues
  }
  if (s.split_count != s.resume.samples) {
    return Status::Corruption(s.partial + ": split '" + s.split_name + "' holds " + std::to_string(s.split_count) +
                              " samples, the journal says " + std::to_string(s.resume.samples));
  }
  return Status::OK();
}

Status DbWriter::Append(std::string_view value, const std::vector<uint64_t>& payload_hashes) {
  Impl& s = *impl_;
  if (!s.in_split) return Status::FailedPrecondition("Append outside a split");
  if (payload_hashes.empty()) return Status::InvalidArgument("a record holds at least one sample");
  const uint64_t first = s.split_count;
  // Shard k takes the records starting before (k + 1) / K of the expected samples.
  const uint64_t shards = s.shards.size();
  while (s.current_shard + 1 < shards && first >= (s.current_shard + 1) * s.split_expected / shards) {
    GRANARY_RETURN_IF_ERROR(s.FinishShard(s.shards[s.current_shard]));
    ++s.current_shard;
  }
  ShardWriter& shard = s.shards[s.current_shard];
  if (shard.env.get() == nullptr) GRANARY_RETURN_IF_ERROR(s.OpenShard(shard));
  GRANARY_RETURN_IF_ERROR(s.EnsureMapRoom(shard, value.size()));
  if (shard.txn.get() == nullptr) GRANARY_RETURN_IF_ERROR(shard.txn.Begin(shard.env.get(), 0, shard.abs_path));
  std::string key = EncodeKey(first);
  MDB_val k{key.size(), key.data()};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  int rc = mdb_put(shard.txn.get(), shard.dbi, &k, &v, MDB_APPEND);
  if (rc != 0) return lmdb::Error(shard.abs_path, "put key " + std::to_string(first), rc);
  for (uint64_t h : payload_hashes) s.split_hash->Add(h);
  shard.count += payload_hashes.size();
  s.split_count += payload_hashes.size();
  shard.pending_bytes += value.size();
  const uint64_t stored = StoredBytesOfValue(value.size());
  shard.pending_stored += stored;
  if (++shard.pending >= s.options.records_per_commit || shard.pending_bytes >= s.options.bytes_per_commit) {
    GRANARY_RETURN_IF_ERROR(s.CommitShard(shard));
  }
  uint64_t written = s.split_count;
  for (const SplitInfo& done : s.splits) written += done.count;
  s.room.Appended(payload_hashes.size(), stored, written, shard.pending_stored);
  return Status::OK();
}

Status DbWriter::EndSplit() {
  Impl& s = *impl_;
  if (!s.in_split) return Status::FailedPrecondition("EndSplit without BeginSplit");
  SplitInfo info;
  info.name = s.split_name;
  info.count = s.split_count;
  info.content_hash = s.split_hash->Finish();
  for (ShardWriter& shard : s.shards) {
    GRANARY_RETURN_IF_ERROR(s.FinishShard(shard));
    // Shards hold consecutive ranges, so each starts where the previous ends.
    const uint64_t first = info.shards.empty() ? 0 : info.shards.back().first + info.shards.back().count;
    info.shards.push_back({shard.rel_path, first, shard.count, shard.bytes});
  }
  s.shards.clear();
  s.splits.push_back(std::move(info));
  s.in_split = false;
  return s.WriteJournal();
}

Status DbWriter::Finish(Manifest manifest) {
  Impl& s = *impl_;
  if (s.in_split) return Status::FailedPrecondition("split '" + s.split_name + "' is still open");
  if (s.splits.empty()) return Status::FailedPrecondition("no split was written");
  manifest.format_version = format::kFormatVersion;
  manifest.schema = s.options.schema;
  manifest.splits = s.splits;
  manifest.content_hash = DatasetContentHash(manifest.splits);
  manifest.dictionary_path = s.dictionary.empty() ? "" : format::kDictionaryFile;
  manifest.dictionary_bytes = s.dictionary.size();
  manifest.dictionary_hash = s.dictionary.empty() ? "" : DictionaryHash(s.dictionary);
  std::error_code journal_ec;
  fs::remove(s.partial + "/" + kJournalFile, journal_ec);
  fs::remove(s.partial + "/" + kBuilderFile, journal_ec);
  GRANARY_RETURN_IF_ERROR(WriteFileSynced(s.partial + "/" + format::kManifestFile, ManifestToJson(manifest)));
  for (const SplitInfo& split : s.splits) GRANARY_RETURN_IF_ERROR(FsyncPath(s.partial + "/" + split.name));
  GRANARY_RETURN_IF_ERROR(FsyncPath(s.partial));

  GRANARY_RETURN_IF_ERROR(s.Publish());
  s.finished = true;
  return FsyncPath(fs::absolute(s.options.path).parent_path().string());
}


}  // namespace granary
