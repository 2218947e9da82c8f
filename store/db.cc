#include "store/db.h"

#include <endian.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstddef>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "base/file.h"
#include "base/json_text.h"
#include "base/mutex.h"
#include "store/build_journal.h"
#include "store/db_directory.h"
#include "store/format.h"
#include "store/lmdb_handles.h"
#include "store/shard_index.h"
#include "store/staged_spans.h"

namespace granary {

namespace fs = std::filesystem;

namespace {
// Bytes a record takes in its shard file at the least: LMDB's node header and
// key, and the value's fixed header and checksum.
constexpr uint64_t kMinRecordFileBytes =
    8 + format::kKeyBytes + format::kFixedHeaderBytes + format::kChecksumBytes;

// The manifest's range of a shard against its records: the first key is the
// range's start and the last record ends where the range does (its fixed
// header, read from `file`, gives its sample count). Readers size what they
// allocate by the count, so it must not be a lie.
Status CheckShardRange(const ShardInfo& shard, const ShardIndex& index, const ReadOnlyFile& file) {
  const uint64_t end = shard.first + shard.count;
  if (index.first.empty()) {
    if (shard.count == 0) return Status::OK();
    return Status::Corruption(shard.path + ": no records, the manifest says " + std::to_string(shard.count) + " samples");
  }
  uint32_t last_samples = 0;
  if (index.bytes.back() >= format::kFixedHeaderBytes) {
    char header[format::kFixedHeaderBytes];
    GRANARY_RETURN_IF_ERROR(file.ReadAt(index.offset.back(), sizeof(header), header));
    std::memcpy(&last_samples, header + offsetof(format::RecordFixedHeader, sample_count), sizeof(last_samples));
    last_samples = le32toh(last_samples);
  }
  const uint64_t last = index.first.back();
  if (index.first.front() != shard.first || last >= end || end - last != last_samples) {
    return Status::Corruption(shard.path + ": records hold samples " + std::to_string(index.first.front()) + ".." +
                              std::to_string(last + last_samples - 1) + ", the manifest says " +
                              std::to_string(shard.first) + ".." + std::to_string(end - 1));
  }
  return Status::OK();
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
  // The spans SplitReader::Stage read, per split.
  std::vector<std::unique_ptr<StagedSpans>> staged;

  // indexes[split][shard], built on first use (see ShardIndex).
  mutable Mutex index_mu;
  mutable std::vector<std::unique_ptr<const std::vector<ShardIndex>>> indexes GRANARY_GUARDED_BY(index_mu);

  // The index of split `id`, built by the first caller (others wait for it).
  StatusOr<const std::vector<ShardIndex>*> Index(size_t id) const {
    MutexLock lock(&index_mu);
    if (indexes[id] == nullptr) {
      auto shards = std::make_unique<std::vector<ShardIndex>>(envs[id].size());
      for (size_t i = 0; i < shards->size(); ++i) {
        const ShardInfo& shard = manifest.splits[id].shards[i];
        ShardIndex& index = (*shards)[i];
        GRANARY_RETURN_IF_ERROR(BuildShardIndex(envs[id][i].get(), shard.path, shard.bytes, &index));
        GRANARY_RETURN_IF_ERROR(CheckShardRange(shard, index, files[id][i]));
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

namespace {

// For a db that is not there: "; being built by process N (DB.partial)", or
// what an interrupted build left; "" if there is no DB.partial either.
std::string BuildInProgressNote(const std::string& path) {
  const std::string partial = path + format::kPartialSuffix;
  std::error_code ec;
  if (!fs::is_directory(partial, ec)) return "";
  const std::string builder = BuilderOf(partial);
  const long pid = std::strtol(builder.c_str(), nullptr, 10);
  if (pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) {
    return " yet: it is being built by process " + builder + " (" + partial + ")";
  }
  const std::string resume_with = ResumeCommandOf(partial);
  return " (" + partial + " holds an interrupted build: " +
         (resume_with.empty() ? "prep build --resume" : Printable(resume_with)) + " continues it)";
}

// For a path that is no db: "; it looks like raw data: `prep build PATH DB`
// makes a db of it" where it looks like what prep reads (a table; a folder
// of images, of class folders of them, of IDX or CIFAR files, a train.csv),
// by the first 256 entries of two levels; "" otherwise.
std::string RawDataNote(const std::string& path) {
  const auto lower_ext = [](const fs::path& p) {
    std::string ext = p.extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ext;
  };
  const auto is_raw_file = [&](const fs::path& p) {
    const std::string ext = lower_ext(p), name = p.filename().string();
    return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".webp" || ext == ".csv" || ext == ".tsv" ||
           name.find("-ubyte") != std::string::npos || name.rfind("data_batch_", 0) == 0;
  };
  std::error_code ec;
  bool raw = fs::is_regular_file(path, ec) && (is_raw_file(path) || lower_ext(path) == ".gz");
  int seen = 0;  // a home folder given as a db is not walked whole
  for (fs::directory_iterator it(path, ec), end; !raw && !ec && it != end && seen < 256; it.increment(ec), ++seen) {
    raw = is_raw_file(it->path());
    int inside = 0;
    for (fs::directory_iterator in(it->path(), ec), e2; !raw && !ec && in != e2 && inside < 256;
         in.increment(ec), ++inside) {
      raw = is_raw_file(in->path());  // a class folder's images
    }
    ec.clear();
  }
  return raw ? "; it looks like raw data: `prep build " + path + " DB` makes a db of it" : "";
}

// For a path inside a db (its split folder, a shard): "; it lies inside the
// db DB: name the db itself", by the manifest one or two levels up; "" otherwise.
std::string InsideDbNote(const std::string& path) {
  fs::path up = fs::path(path).lexically_normal();
  if (!up.has_filename()) up = up.parent_path();  // "db/train/" names db/train
  for (int level = 0; level < 2 && up.has_parent_path(); ++level) {
    up = up.parent_path();
    std::error_code ec;
    if (fs::is_regular_file(up / format::kManifestFile, ec)) {
      return "; it lies inside the db " + up.string() + ": name the db itself";
    }
  }
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<DbReader>> DbReader::Open(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    if (!fs::exists(path, ec)) return Status::NotFound(path + ": no such db directory" + BuildInProgressNote(path));
    std::string hint = InsideDbNote(path);
    if (hint.empty()) hint = RawDataNote(path);
    return Status::InvalidArgument(path + ": is not a granary db (not a directory)" + hint);
  }
  const std::string manifest_path = path + "/" + format::kManifestFile;
  std::string text;
  Status read = ReadBoundedFile(manifest_path, format::kMaxManifestBytes, &text);
  if (read.code() == Status::Code::kNotFound) {
    std::string hint = fs::exists(path + format::kPartialSuffix, ec) ? " (a build of it did not finish)"
                                                                    : InsideDbNote(path);
    if (hint.empty()) hint = RawDataNote(path);
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
      if (IsGitLfsPointer(bytes)) return Status::Corruption(dict_path + ": is " + kGitLfsAdvice);
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
        if (IsGitLfsPointer(ReadFileEdge(shard_path, 64))) {
          return Status::Corruption(shard_path + ": is " + kGitLfsAdvice);
        }
        return Status::Corruption(shard_path + ": " + std::to_string(st.st_size) + " bytes, manifest says " +
                                  std::to_string(shard.bytes));
      }
      // A record takes at least kMinRecordFileBytes of its file and holds at
      // most kMaxRecordSamples: a count beyond that is a lie, and would make
      // readers allocate for samples that are not there.
      const uint64_t most = (shard.bytes / kMinRecordFileBytes + 1) * format::kMaxRecordSamples;
      if (shard.count > most) {
        return Status::Corruption(shard_path + ": the manifest says " + std::to_string(shard.count) +
                                  " samples, more than a file of " + std::to_string(shard.bytes) +
                                  " bytes can hold (" + std::to_string(most) + ")");
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
  {
    MutexLock lock(&impl->index_mu);  // (no other thread has the reader yet)
    impl->indexes.resize(impl->manifest.splits.size());
  }
  for (size_t i = 0; i < impl->manifest.splits.size(); ++i) impl->staged.push_back(std::make_unique<StagedSpans>());
  return std::unique_ptr<DbReader>(new DbReader(std::move(impl)));
}

// ---------------------------------------------------------------------------

struct SplitReader::Impl {
  const DbReader::Impl* db = nullptr;
  size_t split_id = 0;
  const SplitInfo* split = nullptr;
  const std::vector<ShardIndex>* shard_indexes = nullptr;  // on first use
  std::unique_ptr<RecordDecoder> decoder;
  // The last record read, as stored: in `value`, or in the staged span
  // `staged_value` (held while the record's views are in use).
  std::string_view stored;
  std::unique_ptr<char[]> value;
  size_t value_capacity = 0;
  std::shared_ptr<const StagedSpans::Span> staged_value;
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
    assert(k < shards.size() && index >= shards[k].first && (k + 1 == shards.size() || index < shards[k + 1].first));
    return k;
  }

  Status LoadIndex() {
    if (shard_indexes != nullptr) return Status::OK();
    GRANARY_ASSIGN_OR_RETURN(const std::vector<ShardIndex>* built, db->Index(split_id));
    shard_indexes = built;
    // A buffer for the largest record, so reads never allocate.
    size_t largest = 0;
    for (const ShardIndex& shard : *shard_indexes) largest = std::max<size_t>(largest, shard.max_bytes);
    if (largest > value_capacity) {
      value.reset(new char[largest]);
      value_capacity = largest;
    }
    return Status::OK();
  }

  // Reads the record holding sample `index` as stored into `value` (the
  // cache no longer valid): its shard, and the first sample it holds.
  Status ReadValue(uint64_t index, size_t* shard, uint64_t* first) {
    size_t record = 0;
    GRANARY_RETURN_IF_ERROR(Find(index, shard, &record));
    const ShardIndex& at = (*shard_indexes)[*shard];
    *first = at.first[record];
    const size_t bytes = at.bytes[record];
    cache_valid = false;
    if (value_capacity < bytes) {
      value.reset(new char[bytes]);
      value_capacity = bytes;
    }
    staged_value = db->staged[split_id]->Find(*shard, at.offset[record], bytes);
    if (staged_value != nullptr) {
      stored = std::string_view(staged_value->read.data() + (at.offset[record] - staged_value->read.first()), bytes);
      return Status::OK();
    }
    Status read = db->files[split_id][*shard].ReadAt(at.offset[record], bytes, value.get());
    if (!read.ok()) return read.WithContext("reading key " + std::to_string(*first));
    stored = std::string_view(value.get(), bytes);
    return Status::OK();
  }

  template <typename Visit>
  void ForEachShardSpan(uint64_t first, uint64_t end, Visit visit);

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
  if (id == splits.size()) return NoSuchSplit(d.manifest, d.path, split);
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
  size_t shard = 0;
  uint64_t first = 0;
  GRANARY_RETURN_IF_ERROR(s.ReadValue(index, &shard, &first));
  const std::string& path = s.split->shards[shard].path;
  Status decoded = s.decoder->Decode(s.stored, &s.cached);
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

std::string_view SplitReader::StoredRecord() const {
  return impl_->cache_valid ? impl_->stored : std::string_view();
}

uint32_t SplitReader::StoredRecordSamples() const { return impl_->cache_valid ? impl_->cached.num_samples : 0; }

Status SplitReader::ReadStored(uint64_t index, std::string_view* value, uint32_t* samples, uint64_t* payload_bytes) {
  Impl& s = *impl_;
  size_t shard = 0;
  uint64_t first = 0;
  GRANARY_RETURN_IF_ERROR(s.ReadValue(index, &shard, &first));
  *value = s.stored;
  Status checked = s.decoder->Check(*value, samples, payload_bytes);
  if (!checked.ok()) return checked.WithContext(s.split->shards[shard].path + ", key " + std::to_string(first));
  if (index - first >= *samples) {
    return Status::Corruption(s.split->shards[shard].path + ", sample " + std::to_string(index) + ": no record holds it");
  }
  return Status::OK();
}

// The records holding samples [first, end) (clamped to the split), a shard
// at a time: visit(shard, record, last, lo, hi, bytes) for records record ..
// last of the shard, which lie in file bytes [lo, hi) and take `bytes` of
// them. Stops at an index it cannot find (Read reports it).
template <typename Visit>
void SplitReader::Impl::ForEachShardSpan(uint64_t first, uint64_t end, Visit visit) {
  end = std::min(end, split->count);
  while (first < end) {
    size_t shard = 0, record = 0;
    if (!Find(first, &shard, &record).ok()) return;
    const ShardIndex& at = (*shard_indexes)[shard];
    const auto& shards = split->shards;
    const uint64_t stop = std::min(end, shard + 1 < shards.size() ? shards[shard + 1].first : split->count);
    // Records record .. last hold samples first .. stop - 1.
    const size_t last =
        static_cast<size_t>(std::lower_bound(at.first.begin(), at.first.end(), stop) - at.first.begin()) - 1;
    uint64_t lo = UINT64_MAX, hi = 0, bytes = 0;
    for (size_t r = record; r <= last; ++r) {
      lo = std::min(lo, at.offset[r]);
      hi = std::max(hi, at.offset[r] + at.bytes[r]);
      bytes += at.bytes[r];
    }
    visit(shard, record, last, lo, hi, bytes);
    first = stop;
  }
}

namespace {
// A writer appending keys in order (every granary writer) lays the records
// out in that order, with a B-tree page here and there: their span is read
// whole. Records scattered over the file (another writer) are not.
bool Contiguous(uint64_t lo, uint64_t hi, uint64_t bytes) { return hi - lo <= 2 * bytes + (64 << 10); }
}  // namespace

void SplitReader::Advise(uint64_t first, uint64_t end, Advice advice) {
  Impl& s = *impl_;
  s.ForEachShardSpan(first, end, [&](size_t shard, size_t record, size_t last, uint64_t lo, uint64_t hi,
                                     uint64_t bytes) {
    const ShardIndex& at = (*s.shard_indexes)[shard];
    const ReadOnlyFile& file = s.db->files[s.split_id][shard];
    const auto advise = [&](uint64_t offset, uint64_t length) {
      if (advice == Advice::kWillNeed) {
        file.WillNeed(offset, length);
      } else {
        file.WontNeed(offset, length);
      }
    };
    if (Contiguous(lo, hi, bytes)) {
      advise(lo, hi - lo);
    } else {
      for (size_t r = record; r <= last; ++r) advise(at.offset[r], at.bytes[r]);
    }
  });
}

Status SplitReader::Stage(uint64_t first, uint64_t end, uint64_t max_staged_bytes) {
  Impl& s = *impl_;
  StagedSpans& staged = *s.db->staged[s.split_id];
  Status status;
  s.ForEachShardSpan(first, end, [&](size_t shard, size_t, size_t, uint64_t lo, uint64_t hi, uint64_t bytes) {
    if (!status.ok() || !Contiguous(lo, hi, bytes)) return;
    // A span larger than the budget (records far larger than the split's
    // average) is not read into memory at all: only what is staged leaves.
    std::shared_ptr<StagedSpans::Span> span;
    if (hi - lo + 2 * DirectRead::kAlignment <= max_staged_bytes) {
      span = staged.NewSpan();
      span->shard = shard;
      status = s.db->files[s.split_id][shard].ReadDirect(lo, static_cast<size_t>(hi - lo), &span->read);
      if (!status.ok()) return;
    }
    staged.Add(std::move(span), max_staged_bytes);
  });
  return status;
}

void SplitReader::Unstage() { impl_->db->staged[impl_->split_id]->Clear(); }

}  // namespace granary
