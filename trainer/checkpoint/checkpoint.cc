#include "trainer/checkpoint/checkpoint.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/file.h"
#include "base/json_text.h"
#include "store/manifest.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'G', 'R', 'N', 'Y', 'C', 'K', 'P', 'T'};
constexpr int kVersion = 1;
constexpr uint32_t kMaxHeaderBytes = 16 << 20;
constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".ckpt";
// In a checkpoint directory: the run it belongs to (see ClaimCheckpointDir).
constexpr const char* kRunFile = "granary-run.json";
constexpr size_t kMaxRunFileBytes = 64 << 10;

// "step-0000000120.ckpt" for step 120; -1 for any other name.
int64_t StepOfName(const std::string& name) {
  const size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (name.size() != prefix + 10 + suffix || name.compare(0, prefix, kPrefix) != 0 ||
      name.compare(prefix + 10, suffix, kSuffix) != 0) {
    return -1;
  }
  int64_t step = 0;
  for (size_t i = prefix; i < prefix + 10; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// How every file in a checkpoint directory is written: never through a
// link, and durably.
AtomicWriteOptions OwnFile() {
  AtomicWriteOptions o;
  o.through_links = false;
  o.sync = true;
  return o;
}

std::string NameOfStep(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%010lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return name;
}

// The checkpoints in `dir` (of any run), oldest first.
std::vector<std::pair<int64_t, fs::path>> Checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code error;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, error)) {
    const int64_t step = StepOfName(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(error)) out.emplace_back(step, e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json PositionJson(const RunPosition& p) {
  return {{"global_step", p.global_step}, {"epoch", p.epoch},
          {"position", p.position},       {"world", p.world},
          {"loss_sums", p.loss_sums},     {"sample_counts", p.sample_counts}};
}

Status Damaged(const std::string& path, const std::string& why) {
  return Status::Corruption(path + ": not a usable checkpoint: " + why);
}

// XXH64 of the header's members other than "header_hash", as DumpJson
// writes them (sorted, on one line): a step or a loss edited in the header is
// found as a payload byte is.
std::string HeaderHash(nlohmann::json header) {
  header.erase("header_hash");
  const std::string text = DumpJson(header);
  return FormatHash(XXH64(text.data(), text.size(), 0));
}

// Reads the checkpoint at `path`: its header, and its payload if `payload`.
// Only a regular file is opened (a FIFO would block, a device never end), and
// every length is checked against the file's size before anything is read.
StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path, bool payload) {
  Checkpoint c;
  c.path = path;
  ReadOnlyFile file;
  if (Status opened = file.Open(path); !opened.ok()) {
    if (opened.code() == Status::Code::kIOError && !fs::exists(path)) return Status::NotFound(path + ": no such file");
    return opened;
  }
  const uint64_t size = file.size_bytes();
  char head[sizeof(kMagic) + 4];
  if (size < sizeof(head)) return Damaged(path, "no checkpoint magic at its start");
  GRANARY_RETURN_IF_ERROR(file.ReadAt(0, sizeof(head), head));
  if (std::memcmp(head, kMagic, sizeof(kMagic)) != 0) return Damaged(path, "no checkpoint magic at its start");
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>(head[8 + i])) << (8 * i);
  if (length > kMaxHeaderBytes || sizeof(head) + static_cast<uint64_t>(length) > size) {
    return Damaged(path, "header length " + std::to_string(length) + " runs past the file");
  }
  std::string text(length, '\0');
  GRANARY_RETURN_IF_ERROR(file.ReadAt(sizeof(head), length, text.data()));
  const nlohmann::json header = ParseJson(text);
  if (header.is_discarded()) return Damaged(path, "header is " + WhyNotJson(text));
  if (!header.is_object()) return Damaged(path, "header is not a JSON object");
  const uint64_t payload_at = sizeof(head) + length;
  try {
    if (header.at("format") != "granary-checkpoint") return Damaged(path, "format is not granary-checkpoint");
    // Integers are checked to fit before they are read: nlohmann would cast
    // a float or an out-of-range integer (see JsonIntegerFits).
    const nlohmann::json& at = header.at("at");
    const auto mistyped = [&](const char* key) {
      return Damaged(path, std::string("\"") + key + "\" is out of range");
    };
    if (!JsonIntegerFits<int32_t>(header.at("version"))) return mistyped("version");
    if (!JsonIntegerFits<int32_t>(at.at("world"))) return mistyped("world");
    if (!JsonIntegerFits<int64_t>(at.at("global_step"))) return mistyped("global_step");
    for (const char* key : {"epoch", "position"}) {
      if (!JsonIntegerFits<uint64_t>(at.at(key))) return mistyped(key);
    }
    if (!JsonIntegerFits<uint64_t>(header.at("payload_bytes"))) return mistyped("payload_bytes");
    const int version = header.at("version").get<int>();
    if (version > kVersion) {
      return Status::FailedPrecondition(path + ": checkpoint version " + std::to_string(version) +
                                        " is newer than this train's " + std::to_string(kVersion));
    }
    StatusOr<TrainConfig> config = TrainConfig::FromJson(DumpJson(header.at("config")));
    if (!config.ok()) return Damaged(path, config.status().message());
    c.header.config = config.value();
    c.header.db_content_hash = header.at("db_content_hash").get<std::string>();
    c.header.run = header.value("run", "");  // written since runs own their directory; absent before
    RunPosition& p = c.header.at;
    p.global_step = at.at("global_step").get<int64_t>();
    p.epoch = at.at("epoch").get<uint64_t>();
    p.position = at.at("position").get<uint64_t>();
    p.world = at.at("world").get<int>();
    p.loss_sums = at.at("loss_sums").get<std::vector<double>>();
    p.sample_counts = at.at("sample_counts").get<std::vector<double>>();
    if (p.world < 1 || p.global_step < 0 || p.loss_sums.size() != static_cast<size_t>(p.world) ||
        p.sample_counts.size() != p.loss_sums.size()) {
      return Damaged(path, "position fields disagree (world " + std::to_string(p.world) + ")");
    }
    // Written since headers have a hash; a file without one is from before.
    if (header.contains("header_hash") && header["header_hash"] != HeaderHash(header)) {
      return Damaged(path, "header hash mismatch (the header was changed)");
    }
    const uint64_t bytes = header.at("payload_bytes").get<uint64_t>();
    if (bytes != size - payload_at) {
      return Damaged(path, "payload is " + std::to_string(size - payload_at) + " bytes, header says " +
                               std::to_string(bytes) + " (truncated?)");
    }
    if (!payload) return c;
    c.payload.resize(bytes);
    GRANARY_RETURN_IF_ERROR(file.ReadAt(payload_at, bytes, c.payload.data()));
    if (FormatHash(XXH64(c.payload.data(), c.payload.size(), 0)) != header.at("payload_hash").get<std::string>()) {
      return Damaged(path, "payload hash mismatch");
    }
  } catch (const nlohmann::json::exception& e) {
    return Damaged(path, std::string("header: ") + e.what());
  }
  return c;
}

// The checkpoint file of `header`'s position: magic, header, the model's and
// the optimizer's state as they are now (a copy: they may change after).
StatusOr<std::string> CheckpointFile(const CheckpointHeader& header, const torch::nn::Module& model,
                                     const torch::optim::Optimizer& optimizer, const SavedCompression& compression) {
  std::ostringstream payload;
  GRANARY_RETURN_IF_ERROR(CatchTorch("checkpoint", [&] {
    torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
    model.save(model_archive);
    optimizer.save(optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    if (!compression.empty()) {
      torch::serialize::OutputArchive compression_archive, shared, ranks;
      for (const auto& [name, tensor] : compression.shared) shared.write(name, tensor);
      for (const auto& [name, tensor] : compression.ranks) ranks.write(name, tensor);
      compression_archive.write("shared", shared);
      compression_archive.write("ranks", ranks);
      archive.write("compression", compression_archive);
    }
    archive.save_to(payload);
  }));
  const std::string bytes = payload.str();
  nlohmann::json head = {{"format", "granary-checkpoint"},
                               {"version", kVersion},
                               {"run", header.run},
                               {"config", ParseJson(header.config.ToJson())},
                               {"db_content_hash", header.db_content_hash},
                               {"at", PositionJson(header.at)},
                               {"payload_bytes", bytes.size()},
                               {"payload_hash", FormatHash(XXH64(bytes.data(), bytes.size(), 0))}};
  head["header_hash"] = HeaderHash(head);
  const std::string text = DumpJson(head);
  std::string file(kMagic, sizeof(kMagic));
  const uint32_t length = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  file += text;
  file += bytes;
  return file;
}

// Whether the checkpoint at `path` is one of `run`'s (its header says so).
bool IsOfRun(const fs::path& path, const std::string& run) {
  StatusOr<Checkpoint> c = ReadCheckpointFile(path.string(), /*payload=*/false);
  return c.ok() && c->header.run == run;
}

// Writes `file` as `run`'s checkpoint of `step` in `dir` (created if
// missing), durably, then keeps only the newest `keep` of `run`'s
// checkpoints there. A file of another run is never replaced or deleted.
// Whether `s` is a write the disk had no room for (or the user's quota).
bool IsDiskFull(const Status& s) {
  return s.message().find(std::strerror(ENOSPC)) != std::string::npos ||
         s.message().find(std::strerror(EDQUOT)) != std::string::npos;
}

Status StoreCheckpointFile(const std::string& dir, const std::string& run, int64_t step, const std::string& file,
                           int keep) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return Status::IOError(dir, "--checkpoint-dir: creating", error.value());
  const fs::path path = fs::path(dir) / NameOfStep(step);
  if (fs::exists(path, error) && !IsOfRun(path, run)) {
    return Status::FailedPrecondition(path.string() + ": a checkpoint of another run is there; not replacing it");
  }
  std::vector<std::pair<int64_t, fs::path>> ours;
  auto list_ours = [&] {
    ours = Checkpoints(dir);
    ours.erase(std::remove_if(ours.begin(), ours.end(), [&](const auto& c) { return !IsOfRun(c.second, run); }),
               ours.end());
  };
  Status written = WriteFileAtomically(path.string(), file, OwnFile());
  if (!written.ok() && IsDiskFull(written)) {
    list_ours();
    const std::string kept = ours.empty() ? "no checkpoint of this run is kept yet"
                                          : "--resume continues from " + ours.back().second.string();
    return written.WithNote(": the checkpoint of step " + std::to_string(step) + " (" +
                            ApproxBytes(static_cast<double>(file.size())) +
                            ") does not fit; make room, or pass a smaller --keep or another --checkpoint-dir (" + kept +
                            ")");
  }
  GRANARY_RETURN_IF_ERROR(written);

  list_ours();
  for (size_t i = 0; i + static_cast<size_t>(keep) < ours.size(); ++i) fs::remove(ours[i].second, error);
  // A write killed before its rename leaves a regular file named as a
  // checkpoint's temporary: ours by name, never a checkpoint. (A directory or
  // link so named is not ours.)
  for (const fs::directory_entry& e : fs::directory_iterator(dir, error)) {
    if (StepOfName(TemporaryNameBase(e.path().filename().string())) >= 0 && e.is_regular_file(error) &&
        !e.is_symlink(error)) {
      fs::remove(e.path(), error);
    }
  }
  return Status::OK();
}

// A new run's identity: 16 hex digits, from the clock and the OS's entropy.
std::string NewRunId() {
  std::random_device entropy;
  const uint64_t mixed =
      (static_cast<uint64_t>(entropy()) << 32 | entropy()) ^
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
      (static_cast<uint64_t>(::getpid()) << 16);
  char id[17];
  std::snprintf(id, sizeof(id), "%016llx", static_cast<unsigned long long>(mixed));
  return id;
}

// DIR/granary-run.json, an object with a string "run"; null if missing or unusable.
nlohmann::json ReadRunFile(const std::string& dir) {
  std::string text;
  if (!ReadBoundedFile(dir + "/" + kRunFile, kMaxRunFileBytes, &text).ok()) return nullptr;
  nlohmann::json j = ParseJson(text);
  if (!j.is_object() || !j.contains("run") || !j["run"].is_string()) return nullptr;
  return j;
}

// "run 5c1d0e6a9b2f4c71 (started 2026-12-02T01:10:00Z by pid 4242 on host h)",
// from `dir`'s run file where it names `run`; "an earlier run without an
// identity" for checkpoints written before runs had one.
std::string DescribeRun(const std::string& dir, const std::string& run) {
  if (run.empty()) return "an earlier run without an identity";
  const std::string text = "run " + run;
  const nlohmann::json j = ReadRunFile(dir);
  if (j.is_null() || j["run"] != run) return text;
  try {
    return text + " (started " + j.at("started_utc").get<std::string>() + " by pid " +
           std::to_string(j.at("pid").get<int64_t>()) + " on " + j.at("host").get<std::string>() + ")";
  } catch (const nlohmann::json::exception&) {
    return text;
  }
}

std::string Hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

Status WriteCheckpoint(const std::string& dir, const CheckpointHeader& header, const torch::nn::Module& model,
                       const torch::optim::Optimizer& optimizer, int keep, const SavedCompression& compression) {
  GRANARY_ASSIGN_OR_RETURN(std::string file, CheckpointFile(header, model, optimizer, compression));
  return StoreCheckpointFile(dir, header.run, header.at.global_step, file, keep);
}

uint64_t CheckpointRoomNeeded(const std::string& dir, uint64_t bytes, int keep) {
  const auto there = static_cast<int64_t>(Checkpoints(dir).size());
  return bytes * static_cast<uint64_t>(std::max<int64_t>(keep + 1 - there, 1));
}

// Only a run that is ending by another error gets here with a write in
// flight (the checkpointer waits for its last one): that write finishes
// (whole or not at all) and its outcome is dropped for the error reported.
CheckpointWriter::~CheckpointWriter() { Wait().PermitUncheckedError(); }

Status CheckpointWriter::Write(const std::string& dir, const CheckpointHeader& header, const torch::nn::Module& model,
                               const torch::optim::Optimizer& optimizer, int keep,
                               const SavedCompression& compression) {
  GRANARY_RETURN_IF_ERROR(Wait());
  StatusOr<std::string> file = CheckpointFile(header, model, optimizer, compression);
  if (!file.ok()) return file.status();
  done_ = false;
  thread_ = std::thread([this, dir, run = header.run, step = header.at.global_step, file = std::move(file).value(),
                         keep] {
    stored_ = StoreCheckpointFile(dir, run, step, file, keep);
    done_ = true;
  });
  return Status::OK();
}

Status CheckpointWriter::Wait() {
  if (thread_.joinable()) thread_.join();
  Status stored = stored_;
  stored_ = Status::OK();
  return stored;
}

StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) { return ReadCheckpointFile(path, /*payload=*/true); }

StatusOr<CheckpointArchive> CheckpointArchive::Parse(const Checkpoint& checkpoint) {
  auto archive = std::make_shared<torch::serialize::InputArchive>();
  GRANARY_RETURN_IF_ERROR(CatchTorch(("reading " + checkpoint.path).c_str(), [&] {
    archive->load_from(checkpoint.payload.data(), checkpoint.payload.size());
  }));
  return CheckpointArchive(checkpoint.path, std::move(archive));
}

Status CheckpointArchive::RestoreModel(torch::nn::Module& model) const {
  return CatchTorch(("restoring the model of " + path_).c_str(), [&] {
    torch::serialize::InputArchive part;
    archive_->read("model", part);
    model.load(part);
  });
}

Status CheckpointArchive::RestoreOptimizer(torch::optim::Optimizer& optimizer) const {
  return CatchTorch(("restoring the optimizer of " + path_).c_str(), [&] {
    torch::serialize::InputArchive part;
    archive_->read("optimizer", part);
    optimizer.load(part);
  });
}

StatusOr<SavedCompression> CheckpointArchive::Compression() const {
  SavedCompression out;
  GRANARY_RETURN_IF_ERROR(CatchTorch(("restoring the gradient compression of " + path_).c_str(), [&] {
    torch::serialize::InputArchive compression;
    if (!archive_->try_read("compression", compression)) return;
    for (auto [part, into] : {std::pair{"shared", &out.shared}, std::pair{"ranks", &out.ranks}}) {
      torch::serialize::InputArchive tensors;
      compression.read(part, tensors);
      for (const std::string& name : tensors.keys()) {  // (the keys include the module's "training" flag)
        torch::Tensor t;
        if (tensors.try_read(name, t)) (*into)[name] = t;
      }
    }
  }));
  return out;
}

StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> all = Checkpoints(dir);
  if (all.empty()) return Status::NotFound("--resume: no checkpoint (step-*.ckpt) in " + dir);
  return all.back().second.string();
}

StatusOr<Checkpoint> ResolveResume(const std::string& db_content_hash, TrainConfig* config) {
  std::string& resume = config->checkpoint.resume;
  if (resume == "latest") {
    GRANARY_ASSIGN_OR_RETURN(std::string latest, LatestCheckpoint(config->checkpoint.dir));
    resume = latest;
  }
  StatusOr<Checkpoint> c = ReadCheckpoint(resume);
  if (!c.ok()) return c.status().WithContext("--resume");
  if (c->header.db_content_hash != db_content_hash) {
    return Status::InvalidArgument("--resume " + resume + ": the checkpoint is of another db (content " +
                                   c->header.db_content_hash + ", " + config->data.db + " has " + db_content_hash +
                                   ")");
  }
  GRANARY_RETURN_IF_ERROR(CheckResumable(c->header.config, *config).WithContext(resume));
  return c;
}

Status CheckResumable(const TrainConfig& saved, const TrainConfig& resumed) {
  // shrink.*: quantizing follows training; a pruned model's shapes come
  // from the checkpoint itself, so a new pruning schedule starts from them.
  const char* const may_change[] = {"dist.",          "optim.epochs:",        "output.",
                                    "checkpoint.",    "data.db:",             "data.loader_threads:",
                                    "data.prefetch:", "shrink.",
                                    "optim.stop_at_accuracy:"};
  TrainConfig saved_used = saved, resumed_used = resumed;
  saved_used.ClearUnused();
  resumed_used.ClearUnused();
  std::vector<std::string> differences = saved_used.Differences(resumed_used);
  // Another optimizer changes its defaults too (lr, weight decay): name the cause first.
  std::stable_partition(differences.begin(), differences.end(),
                        [](const std::string& d) { return d.rfind("optim.optimizer:", 0) == 0; });
  for (const std::string& d : differences) {
    const bool allowed = std::any_of(std::begin(may_change), std::end(may_change),
                                     [&](const char* prefix) { return d.rfind(prefix, 0) == 0; });
    if (!allowed) return Status::InvalidArgument("--resume: the checkpoint's run differs in " + d);
  }
  return Status::OK();
}

StatusOr<std::string> ClaimCheckpointDir(const std::string& dir, const Checkpoint* resumed, DirectoryLock* lock) {
  const auto refused = [&](const std::string& why) {
    return Status::FailedPrecondition("--checkpoint-dir " + dir + ": " + why);
  };
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return Status::IOError(dir, "--checkpoint-dir: creating", error.value());
  if (Status locked = lock->TryLock(dir); !locked.ok()) {
    if (locked.code() != Status::Code::kBusy) return locked;
    const nlohmann::json owner = ReadRunFile(dir);
    return refused("in use by " + (owner.is_null() ? "another run" : DescribeRun(dir, owner["run"])));
  }
  const std::string run = resumed != nullptr ? resumed->header.run : NewRunId();
  for (const auto& [step, path] : Checkpoints(dir)) {
    StatusOr<Checkpoint> c = ReadCheckpointFile(path.string(), /*payload=*/false);
    if (!c.ok()) {
      return refused("holds " + path.filename().string() + ", which is not a usable checkpoint (" +
                     c.status().message() + "); move it away or choose another directory");
    }
    if (c->header.run != run) {
      return refused("holds the checkpoints of " + DescribeRun(dir, c->header.run) + ", e.g. " +
                     path.filename().string() +
                     "; continue that run with --resume latest, or choose another directory");
    }
  }
  const nlohmann::json record = {{"format", "granary-checkpoint-dir"},
                                 {"run", run},
                                 {"started_utc", UtcNow()},
                                 {"pid", static_cast<int64_t>(::getpid())},
                                 {"host", Hostname()}};
  GRANARY_RETURN_IF_ERROR(
      WriteFileAtomically(dir + "/" + kRunFile, DumpJson(record) + "\n", OwnFile()).WithContext("--checkpoint-dir"));
  return run;
}

StatusOr<std::string> CheckpointDirRun(const std::string& dir) {
  const nlohmann::json owner = ReadRunFile(dir);
  if (owner.is_null()) {
    return Status::Corruption(dir + "/" + kRunFile + ": does not name the run that owns the directory");
  }
  return owner["run"].get<std::string>();
}

}  // namespace granary
