#include "store/verify.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "base/json_text.h"
#include "store/content_hash.h"
#include "store/db.h"
#include "store/record.h"
#include "store/shard_index.h"

namespace granary {
namespace {

// What a split's shard walks found: payload hashes by index. Grown as
// samples are found, so a manifest that lies about the count costs nothing.
struct SplitState {
  std::vector<uint64_t> hashes;
  std::vector<bool> seen;
  uint64_t found = 0;

  void Add(uint64_t index, uint64_t hash) {
    if (index >= hashes.size()) {
      hashes.resize(index + 1);
      seen.resize(index + 1);
    }
    found += !seen[index];
    hashes[index] = hash;
    seen[index] = true;
  }
};

// What every shard walk needs, read once by the parent before any fork (it
// holds no LMDB environment: none may cross fork()).
struct DbFacts {
  std::string path;
  Manifest manifest;
  std::shared_ptr<const CompressionDictionary> dictionary;
};

// Child side of WalkShardInChild: walks shard `shard` of `split` and reports
// on `out`, one line per sample ("H <index> <payload hash hex>") or problem
// ("P <text>"). Opens only that shard's file.
[[noreturn]] void ReportShardWalk(const DbFacts& db, const SplitInfo& split, size_t shard, FILE* out) {
  if (out == nullptr) ::_exit(4);  // the parent sees no report and counts the samples missing
  auto problem = [&](const std::string& text) { std::fprintf(out, "P %s\n", text.c_str()); };
  const ShardInfo& shard_info = split.shards[shard];
  const Schema& schema = db.manifest.schema;
  std::vector<size_t> text_fields;  // checked to be UTF-8, as their layout says
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    if (schema.fields[i].IsText()) text_fields.push_back(i);
  }
  RecordDecoder decoder(schema, db.dictionary);
  DecodedRecord record;
  const uint64_t end = shard_info.first + shard_info.count;
  uint64_t next = shard_info.first;  // the key the next record should have
  bool resync = false;               // after an unreadable record its size is unknown
  Status walk = WalkShard(db.path + "/" + shard_info.path, shard_info.path, shard_info.bytes, decoder, &record,
                          [&](uint64_t key, const Status& decoded) {
    const std::string where = shard_info.path + ", key " + std::to_string(key);
    if (key < next || key >= end || (key != next && !resync)) {
      problem(where + ": expected key " + std::to_string(next) + " (shard holds samples " +
              std::to_string(shard_info.first) + ".." + std::to_string(end - 1) + ")");
    }
    if (!decoded.ok()) {
      problem(decoded.message());
      resync = true;
      next = key + 1;
      return;
    }
    resync = false;
    next = key + record.num_samples;
    for (uint32_t k = 0; k < record.num_samples && key + k < end; ++k) {
      std::fprintf(out, "H %" PRIu64 " %016" PRIx64 "\n", key + k, SamplePayloadHash(record, k));
      for (size_t i : text_fields) {
        const FieldView& f = record.sample(k)[i];
        if (!IsUtf8({reinterpret_cast<const char*>(f.data), f.bytes})) {
          problem(where + ": sample " + std::to_string(key + k) + ": field '" + schema.fields[i].name +
                  "' is not UTF-8 text, as its schema says (layout utf-8)");
        }
      }
    }
  });
  if (!walk.ok()) problem(walk.message());
  if (walk.ok() && !resync && next != end) {
    problem(shard_info.path + ": records hold samples up to " + std::to_string(next) + ", manifest says " +
            std::to_string(end));
  }
  std::fflush(out);
  ::_exit(walk.ok() ? 0 : 3);
}

// Forks the walk of one shard and folds its report into `state`.
Status WalkShardInChild(const DbFacts& db, const SplitInfo& split, size_t shard, SplitState* state,
                        VerifyReport* report) {
  int fds[2];
  if (::pipe(fds) != 0) return Status::IOError("pipe", "create", errno);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IOError("fork", "start shard walk", err);
  }
  if (pid == 0) {
    ::close(fds[0]);
    // A crash on damaged pages must reach the parent as death by signal,
    // whatever handler the process had (a sanitizer's, an embedding Python's).
    ::signal(SIGSEGV, SIG_DFL);
    ::signal(SIGBUS, SIG_DFL);
    ReportShardWalk(db, split, shard, ::fdopen(fds[1], "w"));
  }
  ::close(fds[1]);
  FILE* in = ::fdopen(fds[0], "r");
  if (in == nullptr) {
    const int err = errno;
    ::close(fds[0]);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status::IOError("pipe", "read the shard walk's report", err);
  }
  char* line = nullptr;
  size_t cap = 0;
  uint64_t records = 0;
  while (::getline(&line, &cap, in) > 0) {
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    uint64_t index = 0, hash = 0;
    if (std::sscanf(text.c_str(), "H %" SCNu64 " %" SCNx64, &index, &hash) == 2 && index < split.count) {
      state->Add(index, hash);
      ++records;
      ++report->samples_ok;
    } else if (text.size() > 2 && text[0] == 'P') {
      report->problems.push_back(text.substr(2));
    }
  }
  std::free(line);
  std::fclose(in);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(wstatus)) {
    report->problems.push_back(split.shards[shard].path + ": structural corruption: walking its LMDB pages crashed (" +
                               strsignal(WTERMSIG(wstatus)) + ") after " + std::to_string(records) + " records");
  }
  return Status::OK();
}

}  // namespace

StatusOr<VerifyReport> VerifyDb(const std::string& path,
                                const std::function<void(const std::string&, uint64_t)>& on_shard) {
  VerifyReport report;
  DbFacts facts;
  {
    auto db = DbReader::Open(path);
    if (!db.ok()) {
      report.problems.push_back(db.status().message());
      return report;
    }
    facts = {path, db.value()->manifest(), db.value()->dictionary()};
  }  // closed here: no MDB_env may cross fork()
  const Manifest& manifest = facts.manifest;

  std::vector<SplitInfo> recomputed = manifest.splits;
  for (size_t sp = 0; sp < manifest.splits.size(); ++sp) {
    const SplitInfo& split = manifest.splits[sp];
    report.samples_expected += split.count;
    SplitState state;
    for (size_t shard = 0; shard < split.shards.size(); ++shard) {
      if (on_shard) on_shard(split.shards[shard].path, split.shards[shard].count);
      GRANARY_RETURN_IF_ERROR(WalkShardInChild(facts, split, shard, &state, &report));
    }
    SplitHasher hasher;
    for (uint64_t i = 0; i < state.hashes.size(); ++i) {
      if (state.seen[i]) hasher.Add(state.hashes[i]);
    }
    const uint64_t missing = split.count - state.found;  // indices found are < split.count
    recomputed[sp].content_hash = hasher.Finish();
    if (missing > 0) {
      report.problems.push_back("split '" + split.name + "': " + std::to_string(missing) + " of " +
                                std::to_string(split.count) + " samples unreadable or missing");
    } else if (recomputed[sp].content_hash != split.content_hash) {
      report.problems.push_back("split '" + split.name + "': content hash " + recomputed[sp].content_hash +
                                " does not match the manifest's " + split.content_hash);
    }
  }
  report.content_hash = DatasetContentHash(recomputed);
  if (report.ok() && report.content_hash != manifest.content_hash) {
    report.problems.push_back("content hash " + report.content_hash + " does not match the manifest's " +
                              manifest.content_hash);
  }
  return report;
}

}  // namespace granary
