#include "store/db.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>

#include <nlohmann/json.hpp>

#include "store/content_hash.h"
#include "store/file.h"
#include "store/format.h"
#include "store/lmdb_handles.h"

namespace granary {

namespace fs = std::filesystem;

std::string EncodeKey(uint64_t index) {
  std::string key(format::kKeyBytes, '\0');
  for (size_t i = 0; i < format::kKeyBytes; ++i) key[format::kKeyBytes - 1 - i] = static_cast<char>((index >> (8 * i)) & 0xFF);
  return key;
}

namespace {

// The manifest's check of the dictionary file: XXH64 of its bytes.
std::string DictionaryHash(const std::string& bytes) {
  return FormatHash(XXH64(bytes.data(), bytes.size(), format::kChecksumSeed));
}

uint64_t DecodeKey(const void* data) {
  uint64_t v = 0;
  for (size_t i = 0; i < format::kKeyBytes; ++i) v = (v << 8) | static_cast<const uint8_t*>(data)[i];
  return v;
}

std::string ShardRelPath(const std::string& split, int shard) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%0*d.mdb", format::kShardDigits, shard);
  return split + "/" + name;
}

Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, "open for fsync", errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::IOError(path, "fsync", err);
  return Status::OK();
}

constexpr char kJournalFile[] = "journal.json";

// Writes `contents` to `path`, fsynced when `sync` (before publishing a db;
// the journal only has to survive the process being killed, not the machine).
Status WriteWholeFile(const std::string& path, const std::string& contents, bool sync) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IOError(path, "create", errno);
  size_t n = std::fwrite(contents.data(), 1, contents.size(), f);
  int err = errno;
  if (n != contents.size()) {
    std::fclose(f);
    return Status::IOError(path, "write", err);
  }
  if (std::fflush(f) != 0 || (sync && ::fsync(fileno(f)) != 0)) {
    err = errno;
    std::fclose(f);
    return Status::IOError(path, "flush", err);
  }
  if (std::fclose(f) != 0) return Status::IOError(path, "close", errno);
  return Status::OK();
}

Status WriteFileSynced(const std::string& path, const std::string& contents) {
  return WriteWholeFile(path, contents, /*sync=*/true);
}

// Writes `contents` to a temporary file and renames it over `path`, so a kill
// leaves the old or the new contents, never a mix.
Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  GRANARY_RETURN_IF_ERROR(WriteWholeFile(tmp, contents, /*sync=*/false));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::IOError(path, "rename from " + tmp, errno);
  return Status::OK();
}

struct ShardWriter {
  std::string rel_path;
  std::string abs_path;
  lmdb::Env env;
  lmdb::Txn txn;
  MDB_dbi dbi = 0;
  uint64_t count = 0;  // samples
  size_t pending = 0;        // records since the last commit
  size_t pending_bytes = 0;  // value bytes since the last commit
};

}  // namespace

struct DbWriter::Impl {
  DbWriterOptions options;
  std::string partial;
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

  Status CommitShard(ShardWriter& shard) {
    if (shard.txn.get() == nullptr) return Status::OK();
    shard.pending = 0;
    shard.pending_bytes = 0;
    GRANARY_RETURN_IF_ERROR(shard.txn.Commit(shard.abs_path));
    return WriteJournal();
  }

  // Records what is safely written (docs/FORMAT.md does not cover it: the
  // journal lives only in "<db>.partial"): finished splits, the split in
  // progress with its committed samples, and the caller's checkpoint.
  // Invariant: called right after a commit, so every appended record is in it.
  Status WriteJournal() {
    if (!journaling) return Status::OK();
    Manifest finished;
    finished.format_version = format::kFormatVersion;
    finished.schema = options.schema;
    finished.splits = splits;
    nlohmann::json j = {{"fingerprint", fingerprint},
                        {"finished", nlohmann::json::parse(ManifestToJson(finished))},
                        {"split", in_split ? split_name : ""},
                        {"samples", in_split ? split_count : 0},
                        {"checkpoint", checkpoint ? checkpoint() : ""},
                        {"dictionary", !dictionary.empty()}};
    const std::string path = partial + "/" + kJournalFile;
    GRANARY_RETURN_IF_ERROR(WriteFileAtomically(path, j.dump()));
    return Status::OK();
  }
};

bool HasResumableBuild(const std::string& path) {
  std::error_code ec;
  return fs::exists(path + format::kPartialSuffix + "/" + kJournalFile, ec);
}

DbWriter::DbWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DbWriter::~DbWriter() {
  if (impl_->finished) return;
  for (ShardWriter& shard : impl_->shards) {
    shard.txn.Abort();
    shard.env.Close();
  }
  if (impl_->journaling) return;  // resumable: keep it for --resume
  std::error_code ec;
  fs::remove_all(impl_->partial, ec);
}

const std::string& DbWriter::partial_path() const { return impl_->partial; }
uint64_t DbWriter::split_count() const { return impl_->split_count; }

StatusOr<std::unique_ptr<DbWriter>> DbWriter::Create(DbWriterOptions options, ResumePoint* resume) {
  GRANARY_RETURN_IF_ERROR(options.schema.Validate());
  if (options.path.empty()) return Status::InvalidArgument("db path is empty");
  if (options.shards_per_split < 1) {
    return Status::InvalidArgument("--shards must be at least 1, got " + std::to_string(options.shards_per_split));
  }
  while (options.path.size() > 1 && options.path.back() == '/') options.path.pop_back();
  std::error_code ec;
  if (fs::exists(options.path, ec) && !options.overwrite) {
    return Status::FailedPrecondition(options.path + ": already exists (pass --force to replace it)");
  }
  auto impl = std::make_unique<Impl>();
  impl->partial = options.path + format::kPartialSuffix;
  impl->options = std::move(options);
  const std::string journal_path = impl->partial + "/" + kJournalFile;
  if (resume != nullptr && HasResumableBuild(impl->options.path)) {
    std::string text;
    GRANARY_RETURN_IF_ERROR(ReadFile(journal_path, &text));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Status::Corruption(journal_path + ": not valid JSON");
    try {
      auto finished = ParseManifest(j.at("finished").dump(), journal_path);
      if (!finished.ok()) return finished.status();
      impl->resume.finished = finished->splits;
      impl->resume.split = j.at("split").get<std::string>();
      impl->resume.samples = j.at("samples").get<uint64_t>();
      impl->resume.checkpoint = j.at("checkpoint").get<std::string>();
      impl->resume.fingerprint = j.at("fingerprint").get<std::string>();
      if (j.at("dictionary").get<bool>()) {
        GRANARY_RETURN_IF_ERROR(ReadFile(impl->partial + "/" + format::kDictionaryFile, &impl->resume.dictionary));
        if (impl->resume.dictionary.empty()) return Status::Corruption(impl->partial + ": dictionary is empty");
      }
    } catch (const nlohmann::json::exception& e) {
      return Status::Corruption(journal_path + ": " + e.what());
    }
    impl->resume.resuming = true;
    *resume = impl->resume;
    return std::unique_ptr<DbWriter>(new DbWriter(std::move(impl)));
  }
  fs::remove_all(impl->partial, ec);
  if (ec) return Status::IOError(impl->partial, "remove stale partial db", ec.value());
  fs::create_directories(impl->partial, ec);
  if (ec) return Status::IOError(impl->partial, "create directory", ec.value());
  return std::unique_ptr<DbWriter>(new DbWriter(std::move(impl)));
}

Status DbWriter::StartJournal(const std::string& fingerprint, std::function<std::string()> checkpoint) {
  Impl& s = *impl_;
  if (s.resume.resuming && s.resume.fingerprint != fingerprint) {
    return Status::FailedPrecondition(s.partial + ": the interrupted build used other inputs or options; "
                                      "start again without --resume");
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
    if (!resuming) fs::remove(shard.abs_path, ec);  // a stale file of an unfinished split
    GRANARY_RETURN_IF_ERROR(shard.env.Open(shard.abs_path, MDB_NOSYNC, s.options.map_bytes));
    lmdb::Txn txn;
    GRANARY_RETURN_IF_ERROR(txn.Begin(shard.env.get(), 0, shard.abs_path));
    int rc = mdb_dbi_open(txn.get(), nullptr, MDB_CREATE, &shard.dbi);
    if (rc != 0) return lmdb::Error(shard.abs_path, "open database", rc);
    GRANARY_RETURN_IF_ERROR(txn.Commit(shard.abs_path));
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
    GRANARY_RETURN_IF_ERROR(s.CommitShard(s.shards[s.current_shard]));
    ++s.current_shard;
  }
  ShardWriter& shard = s.shards[s.current_shard];
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
  if (++shard.pending >= s.options.records_per_commit || shard.pending_bytes >= s.options.bytes_per_commit) {
    GRANARY_RETURN_IF_ERROR(s.CommitShard(shard));
  }
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
    GRANARY_RETURN_IF_ERROR(s.CommitShard(shard));
    int rc = mdb_env_sync(shard.env.get(), 1);
    if (rc != 0) return lmdb::Error(shard.abs_path, "sync", rc);
    shard.env.Close();
    struct stat st;
    if (::stat(shard.abs_path.c_str(), &st) != 0) return Status::IOError(shard.abs_path, "stat", errno);
    // Shards hold consecutive ranges, so each starts where the previous ends.
    const uint64_t first = info.shards.empty() ? 0 : info.shards.back().first + info.shards.back().count;
    info.shards.push_back({shard.rel_path, first, shard.count, static_cast<uint64_t>(st.st_size)});
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
  GRANARY_RETURN_IF_ERROR(WriteFileSynced(s.partial + "/" + format::kManifestFile, ManifestToJson(manifest)));
  for (const SplitInfo& split : s.splits) GRANARY_RETURN_IF_ERROR(FsyncPath(s.partial + "/" + split.name));
  GRANARY_RETURN_IF_ERROR(FsyncPath(s.partial));

  const std::string& path = s.options.path;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    fs::remove_all(path, ec);
    if (ec) return Status::IOError(path, "remove existing db", ec.value());
  }
  if (std::rename(s.partial.c_str(), path.c_str()) != 0) return Status::IOError(path, "rename from " + s.partial, errno);
  s.finished = true;
  fs::path parent = fs::absolute(path).parent_path();
  return FsyncPath(parent.string());
}

// ---------------------------------------------------------------------------

namespace {

// Where each record of a shard lies in its file, read once from the B-tree.
// Random reads use it with pread instead of reading through LMDB's map: a
// page fault on a file mapping maps the page cache's whole folio around the
// page (up to 2 MiB on Linux 6.18, for files written or read in large chunks),
// so random reads through the map grew the RSS with the db's size. pread
// copies the record (a few KiB, next to decompressing it) and maps nothing.
struct ShardIndex {
  std::vector<uint64_t> first;   // keys: first sample index, ascending
  std::vector<uint64_t> offset;  // of the value in the shard file
  std::vector<uint32_t> bytes;   // of the value
  uint32_t max_bytes = 0;        // of the largest value
};

// Drops what this process has mapped of the map [map, map + bytes). The page
// cache keeps the pages; a read-only file mapping loses nothing. Cheap where
// little is mapped: the kernel skips empty page tables.
void ReleaseMap(uintptr_t map, size_t bytes) { ::madvise(reinterpret_cast<void*>(map), bytes, MADV_DONTNEED); }

// Walks a shard's B-tree in key order, in a read transaction of its own,
// calling visit(key, value, the value's offset in the file) for each record.
// Errors name the shard file. LMDB trusts its pages, so a damaged B-tree can
// crash a walk (which is why VerifyDb walks in a child process). At each new leaf page
// the walk drops all it has mapped of the shard, so it maps a few folios at a
// time however big the shard.
Status WalkShard(MDB_env* env, const std::string& path, uint64_t file_bytes,
                 const std::function<Status(uint64_t, std::string_view, uint64_t)>& visit) {
  lmdb::Txn txn;
  GRANARY_RETURN_IF_ERROR(txn.Begin(env, MDB_RDONLY, path));
  MDB_dbi dbi;
  int rc = mdb_dbi_open(txn.get(), nullptr, 0, &dbi);
  if (rc != 0) return lmdb::Error(path, "open database", rc);
  lmdb::Cursor cursor;
  GRANARY_RETURN_IF_ERROR(cursor.Open(txn.get(), dbi, path));
  MDB_envinfo info;
  mdb_env_info(env, &info);
  MDB_stat stat;
  mdb_env_stat(env, &stat);
  const uintptr_t page_bytes = stat.ms_psize;
  uintptr_t map = 0;   // where LMDB mapped the file, from the first leaf page
  uintptr_t leaf = 0;  // the leaf page holding the current key
  MDB_val k, v;
  for (rc = mdb_cursor_get(cursor.get(), &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor.get(), &k, &v, MDB_NEXT)) {
    if (k.mv_size != format::kKeyBytes) {
      return Status::Corruption(path + ": a key of " + std::to_string(k.mv_size) + " bytes");
    }
    const uintptr_t page = reinterpret_cast<uintptr_t>(k.mv_data) & ~(page_bytes - 1);
    if (map == 0) {
      // LMDB does not say where it mapped the file, but each page of the
      // file starts with its page number (a size_t: LMDB's MDB_page header),
      // and the map starts at offset 0: map = page - number * page size.
      // Finding the page by alignment needs the map aligned to LMDB's page
      // size: true when the db's pages are no larger than this OS's (mmap
      // aligns to those). The result is checked too: page 0 is a meta page,
      // whose MDB_meta (after the 16-byte page header) starts with LMDB's
      // magic number.
      static const uintptr_t os_page_bytes = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
      if (page_bytes > os_page_bytes) {
        return Status::FailedPrecondition(path + ": LMDB pages of " + std::to_string(page_bytes) +
                                          " bytes, larger than this system's " + std::to_string(os_page_bytes));
      }
      size_t number;
      std::memcpy(&number, reinterpret_cast<const void*>(page), sizeof(number));
      if (number > file_bytes / page_bytes) return Status::Corruption(path + ": a leaf page with a bad page number");
      map = page - number * page_bytes;
      constexpr uint32_t kLmdbMagic = 0xBEEFC0DE;
      uint32_t magic;
      std::memcpy(&magic, reinterpret_cast<const void*>(map + 16), sizeof(magic));
      if (magic != kLmdbMagic) {
        return Status::Corruption(path + ": page 0 is not an LMDB meta page where the leaf pages place it");
      }
    } else if (page != leaf) {
      ReleaseMap(map, info.me_mapsize);  // the last leaf, its values and the branch pages above it
    }
    leaf = page;
    const uint64_t key = DecodeKey(k.mv_data);
    const uintptr_t value = reinterpret_cast<uintptr_t>(v.mv_data);
    if (value < map || value - map > file_bytes || v.mv_size > file_bytes - (value - map)) {
      return Status::Corruption(path + ", key " + std::to_string(key) + ": the value lies outside the file");
    }
    GRANARY_RETURN_IF_ERROR(visit(key, std::string_view(static_cast<const char*>(v.mv_data), v.mv_size), value - map));
  }
  if (map != 0) ReleaseMap(map, info.me_mapsize);
  if (rc != MDB_NOTFOUND) return lmdb::Error(path, "walk the B-tree", rc);
  return Status::OK();
}

Status BuildShardIndex(MDB_env* env, const std::string& path, uint64_t file_bytes, ShardIndex* index) {
  return WalkShard(env, path, file_bytes, [&](uint64_t key, std::string_view value, uint64_t offset) {
    if (!index->first.empty() && key <= index->first.back()) {
      return Status::Corruption(path + ", key " + std::to_string(key) + ": keys out of order");
    }
    if (value.size() > UINT32_MAX) {
      return Status::Corruption(path + ", key " + std::to_string(key) + ": a value of " +
                                std::to_string(value.size()) + " bytes");
    }
    index->first.push_back(key);
    index->offset.push_back(offset);
    index->bytes.push_back(static_cast<uint32_t>(value.size()));
    index->max_bytes = std::max(index->max_bytes, index->bytes.back());
    return Status::OK();
  });
}

}  // namespace

struct DbReader::Impl {
  std::string path;
  Manifest manifest;
  std::shared_ptr<const CompressionDictionary> dictionary;
  // envs[split][shard] and files[split][shard] (the same shard files, for
  // pread), in manifest order.
  std::vector<std::vector<lmdb::Env>> envs;
  std::vector<std::vector<ReadOnlyFile>> files;
  // indexes[split][shard], built on first use (see ShardIndex).
  mutable std::mutex index_mu;
  mutable std::vector<std::unique_ptr<const std::vector<ShardIndex>>> indexes;

  // The index of split `id`, built by the first caller (others wait for it).
  StatusOr<const std::vector<ShardIndex>*> Index(size_t id) const {
    std::lock_guard<std::mutex> lock(index_mu);
    if (indexes[id] == nullptr) {
      auto shards = std::make_unique<std::vector<ShardIndex>>(envs[id].size());
      for (size_t i = 0; i < shards->size(); ++i) {
        const ShardInfo& shard = manifest.splits[id].shards[i];
        GRANARY_RETURN_IF_ERROR(BuildShardIndex(envs[id][i].get(), shard.path, shard.bytes, &(*shards)[i]));
      }
      indexes[id] = std::move(shards);
    }
    return indexes[id].get();
  }
};

DbReader::DbReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DbReader::~DbReader() = default;
const std::string& DbReader::path() const { return impl_->path; }
const Manifest& DbReader::manifest() const { return impl_->manifest; }
const std::shared_ptr<const CompressionDictionary>& DbReader::dictionary() const { return impl_->dictionary; }

StatusOr<std::unique_ptr<DbReader>> DbReader::Open(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    if (!fs::exists(path, ec)) return Status::NotFound(path + ": no such db directory");
    return Status::InvalidArgument(path + ": is not a granary db (not a directory)");
  }
  const std::string manifest_path = path + "/" + format::kManifestFile;
  std::string text;
  Status read = ReadFile(manifest_path, &text);
  if (read.code() == Status::Code::kNotFound) {
    std::string hint = fs::exists(path + format::kPartialSuffix, ec) ? " (a build of it did not finish)" : "";
    return Status::NotFound(path + ": is not a granary db: " + format::kManifestFile + " not found" + hint);
  }
  GRANARY_RETURN_IF_ERROR(read);
  StatusOr<Manifest> manifest = ParseManifest(text, manifest_path);
  if (!manifest.ok()) return manifest.status();

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->manifest = std::move(manifest).value();
  const Manifest& m = impl->manifest;
  if (!m.dictionary_path.empty()) {
    const std::string dict_path = path + "/" + m.dictionary_path;
    std::string bytes;
    GRANARY_RETURN_IF_ERROR(ReadFile(dict_path, &bytes));
    if (bytes.size() != m.dictionary_bytes || DictionaryHash(bytes) != m.dictionary_hash) {
      return Status::Corruption(dict_path + ": size or hash does not match the manifest");
    }
    auto dict = CompressionDictionary::Create(std::move(bytes), 0);
    if (!dict.ok()) return dict.status().WithContext(dict_path);
    impl->dictionary = dict.value();
  }
  for (const SplitInfo& split : impl->manifest.splits) {
    std::vector<lmdb::Env> envs;
    std::vector<ReadOnlyFile> files;
    for (const ShardInfo& shard : split.shards) {
      const std::string shard_path = path + "/" + shard.path;
      struct stat st;
      if (::stat(shard_path.c_str(), &st) != 0) return Status::IOError(shard_path, "stat shard", errno);
      if (static_cast<uint64_t>(st.st_size) != shard.bytes) {
        return Status::Corruption(shard_path + ": " + std::to_string(st.st_size) + " bytes, manifest says " +
                                  std::to_string(shard.bytes));
      }
      lmdb::Env env;
      GRANARY_RETURN_IF_ERROR(
          env.Open(shard_path, MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD, static_cast<size_t>(st.st_size)));
      envs.push_back(std::move(env));
      files.emplace_back();
      GRANARY_RETURN_IF_ERROR(files.back().Open(shard_path));
    }
    impl->envs.push_back(std::move(envs));
    impl->files.push_back(std::move(files));
  }
  impl->indexes.resize(impl->manifest.splits.size());
  return std::unique_ptr<DbReader>(new DbReader(std::move(impl)));
}

// ---------------------------------------------------------------------------

struct SplitReader::Impl {
  const DbReader::Impl* db = nullptr;
  size_t split_id = 0;
  const SplitInfo* split = nullptr;
  const std::vector<ShardIndex>* shard_indexes = nullptr;  // on first use
  std::unique_ptr<RecordDecoder> decoder;
  std::unique_ptr<char[]> value;  // the last record read, as stored
  size_t value_capacity = 0;
  // The last record decoded: samples cached_first .. cached_first + cached.num_samples - 1.
  DecodedRecord cached;
  uint64_t cached_first = 0;
  bool cache_valid = false;

  // The shard whose range holds `index` (precondition: index < split->count).
  size_t ShardOf(uint64_t index) const {
    const auto& shards = split->shards;
    auto it = std::upper_bound(shards.begin(), shards.end(), index,
                               [](uint64_t i, const ShardInfo& sh) { return i < sh.first; });
    size_t k = static_cast<size_t>(it - shards.begin()) - 1;
    // Invariant: an empty shard's first equals the next shard's, so upper_bound
    // never stops right after one unless it is at the end (first == count).
    return k;
  }

  Status LoadIndex() {
    if (shard_indexes != nullptr) return Status::OK();
    StatusOr<const std::vector<ShardIndex>*> built = db->Index(split_id);
    if (!built.ok()) return built.status();
    shard_indexes = built.value();
    // A buffer for the largest record, so reads never allocate.
    size_t largest = 0;
    for (const ShardIndex& shard : *shard_indexes) largest = std::max<size_t>(largest, shard.max_bytes);
    if (largest > value_capacity) {
      value.reset(new char[largest]);
      value_capacity = largest;
    }
    return Status::OK();
  }

  // The shard and the position in its index of the record holding `index`:
  // the one with the largest key <= index.
  Status Find(uint64_t index, size_t* shard, size_t* record) {
    if (index >= split->count) {
      return Status::NotFound("split '" + split->name + "': index " + std::to_string(index) + " out of range (" +
                              std::to_string(split->count) + " samples)");
    }
    GRANARY_RETURN_IF_ERROR(LoadIndex());
    *shard = ShardOf(index);
    const std::vector<uint64_t>& first = (*shard_indexes)[*shard].first;
    auto it = std::upper_bound(first.begin(), first.end(), index);
    if (it == first.begin()) {
      return Status::Corruption(split->shards[*shard].path + ", sample " + std::to_string(index) +
                                ": no record holds it");
    }
    *record = static_cast<size_t>(it - first.begin()) - 1;
    return Status::OK();
  }
};

SplitReader::SplitReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SplitReader::~SplitReader() = default;
uint64_t SplitReader::size() const { return impl_->split->count; }
const std::string& SplitReader::split() const { return impl_->split->name; }
size_t SplitReader::num_shards() const { return impl_->split->shards.size(); }

StatusOr<std::unique_ptr<SplitReader>> SplitReader::Create(const DbReader& db, const std::string& split) {
  const DbReader::Impl& d = *db.impl_;
  const auto& splits = d.manifest.splits;
  size_t id = 0;
  while (id < splits.size() && splits[id].name != split) ++id;
  if (id == splits.size()) return Status::NotFound(d.path + ": no split '" + split + "'");
  auto impl = std::make_unique<Impl>();
  impl->db = &d;
  impl->split_id = id;
  impl->split = &splits[id];
  impl->decoder = std::make_unique<RecordDecoder>(d.manifest.schema, d.dictionary);
  return std::unique_ptr<SplitReader>(new SplitReader(std::move(impl)));
}

Status SplitReader::Read(uint64_t index, const FieldView** fields) {
  Impl& s = *impl_;
  if (s.cache_valid && index >= s.cached_first && index - s.cached_first < s.cached.num_samples) {
    *fields = s.cached.sample(index - s.cached_first);
    return Status::OK();
  }
  size_t shard = 0, record = 0;
  GRANARY_RETURN_IF_ERROR(s.Find(index, &shard, &record));
  const ShardIndex& at = (*s.shard_indexes)[shard];
  const uint64_t first = at.first[record];
  const size_t bytes = at.bytes[record];
  const std::string& path = s.split->shards[shard].path;
  s.cache_valid = false;
  if (s.value_capacity < bytes) {
    s.value.reset(new char[bytes]);
    s.value_capacity = bytes;
  }
  Status read = s.db->files[s.split_id][shard].ReadAt(at.offset[record], bytes, s.value.get());
  if (!read.ok()) return read.WithContext("reading key " + std::to_string(first));
  Status decoded = s.decoder->Decode(std::string_view(s.value.get(), bytes), &s.cached);
  if (!decoded.ok()) return decoded.WithContext(path + ", key " + std::to_string(first));
  if (index - first >= s.cached.num_samples) {
    return Status::Corruption(path + ", sample " + std::to_string(index) + ": no record holds it");
  }
  s.cached_first = first;
  s.cache_valid = true;
  *fields = s.cached.sample(index - first);
  return Status::OK();
}

Status SplitReader::LoadIndex() { return impl_->LoadIndex(); }

void SplitReader::WillNeed(uint64_t index) {
  Impl& s = *impl_;
  size_t shard = 0, record = 0;
  if (!s.Find(index, &shard, &record).ok()) return;  // Read reports it
  const ShardIndex& at = (*s.shard_indexes)[shard];
  s.db->files[s.split_id][shard].WillNeed(at.offset[record], at.bytes[record]);
}

Status SplitReader::ScanShard(size_t shard, const std::function<void(uint64_t, const Status&)>& on_record,
                              DecodedRecord* record) {
  Impl& s = *impl_;
  if (shard >= num_shards()) return Status::InvalidArgument("no shard " + std::to_string(shard));
  const ShardInfo& info = s.split->shards[shard];
  return WalkShard(s.db->envs[s.split_id][shard].get(), info.path, info.bytes,
                   [&](uint64_t key, std::string_view value, uint64_t) {
                     Status decoded = s.decoder->Decode(value, record);
                     on_record(key, decoded.WithContext(info.path + ", key " + std::to_string(key)));
                     return Status::OK();
                   });
}

}  // namespace granary
