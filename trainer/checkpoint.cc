#include "trainer/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "store/file.h"
#include "store/json_text.h"
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

std::string NameOfStep(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%010lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return name;
}

bool StartsWithMagic(const fs::path& path) {
  char head[sizeof(kMagic)];
  std::ifstream in(path, std::ios::binary);
  return in.read(head, sizeof(head)) && std::memcmp(head, kMagic, sizeof(kMagic)) == 0;
}

// Our checkpoints in `dir`, oldest first.
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

// The checkpoint file of `header`'s position: magic, header, the model's and
// the optimizer's state as they are now (a copy: they may change after).
StatusOr<std::string> CheckpointFile(const CheckpointHeader& header, const torch::nn::Module& model,
                                     const torch::optim::Optimizer& optimizer) {
  std::ostringstream payload;
  GRANARY_RETURN_IF_ERROR(CatchTorch("checkpoint", [&] {
    torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
    model.save(model_archive);
    optimizer.save(optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    archive.save_to(payload);
  }));
  const std::string bytes = payload.str();
  const nlohmann::json head = {{"format", "granary-checkpoint"},
                               {"version", kVersion},
                               {"config", ParseJson(header.config.ToJson())},
                               {"db_content_hash", header.db_content_hash},
                               {"at", PositionJson(header.at)},
                               {"payload_bytes", bytes.size()},
                               {"payload_hash", FormatHash(XXH64(bytes.data(), bytes.size(), 0))}};
  const std::string text = DumpJson(head);
  std::string file(kMagic, sizeof(kMagic));
  const uint32_t length = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  file += text;
  file += bytes;
  return file;
}

// Writes `file` as the checkpoint of `step` in `dir` (created if missing),
// durably, then keeps only the newest `keep` checkpoints there.
Status StoreCheckpointFile(const std::string& dir, int64_t step, const std::string& file, int keep) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return Status::IOError(dir, "--checkpoint-dir: creating", error.value());
  const fs::path path = fs::path(dir) / NameOfStep(step);
  const std::string temporary = path.string() + ".tmp";
  GRANARY_RETURN_IF_ERROR(WriteFileSynced(temporary, file));
  if (::rename(temporary.c_str(), path.c_str()) != 0) return Status::IOError(path.string(), "rename", errno);
  GRANARY_RETURN_IF_ERROR(FsyncPath(dir));

  std::vector<std::pair<int64_t, fs::path>> all = Checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
    if (StartsWithMagic(all[i].second)) fs::remove(all[i].second, error);
  }
  // A write killed before its rename leaves step-*.ckpt.tmp: ours by name, never a checkpoint.
  for (const fs::directory_entry& e : fs::directory_iterator(dir, error)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
        StepOfName(name.substr(0, name.size() - 4)) >= 0 && e.path() != fs::path(temporary)) {
      fs::remove(e.path(), error);
    }
  }
  return Status::OK();
}

}  // namespace

Status WriteCheckpoint(const std::string& dir, const CheckpointHeader& header, const torch::nn::Module& model,
                       const torch::optim::Optimizer& optimizer, int keep) {
  StatusOr<std::string> file = CheckpointFile(header, model, optimizer);
  if (!file.ok()) return file.status();
  return StoreCheckpointFile(dir, header.at.global_step, file.value(), keep);
}

CheckpointWriter::~CheckpointWriter() { (void)Wait(); }

Status CheckpointWriter::Write(const std::string& dir, const CheckpointHeader& header, const torch::nn::Module& model,
                               const torch::optim::Optimizer& optimizer, int keep) {
  GRANARY_RETURN_IF_ERROR(Wait());
  StatusOr<std::string> file = CheckpointFile(header, model, optimizer);
  if (!file.ok()) return file.status();
  done_ = false;
  thread_ = std::thread([this, dir, step = header.at.global_step, file = std::move(file).value(), keep] {
    stored_ = StoreCheckpointFile(dir, step, file, keep);
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

StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  Checkpoint c;
  c.path = path;
  std::string file;
  GRANARY_RETURN_IF_ERROR(ReadFile(path, &file));
  if (file.size() < sizeof(kMagic) + 4 || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return Damaged(path, "no checkpoint magic at its start");
  }
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>(file[8 + i])) << (8 * i);
  if (length > kMaxHeaderBytes || 12 + static_cast<size_t>(length) > file.size()) {
    return Damaged(path, "header length " + std::to_string(length) + " runs past the file");
  }
  const nlohmann::json head = ParseJson(std::string_view(file).substr(12, length));
  if (head.is_discarded() || !head.is_object()) return Damaged(path, "header is not JSON");
  try {
    if (head.at("format") != "granary-checkpoint") return Damaged(path, "format is not granary-checkpoint");
    // Integers are checked to fit before they are read: nlohmann would cast
    // a float or an out-of-range integer (see JsonIntegerFits).
    const nlohmann::json& at = head.at("at");
    const auto mistyped = [&](const char* key) {
      return Damaged(path, std::string("\"") + key + "\" is out of range");
    };
    if (!JsonIntegerFits<int32_t>(head.at("version"))) return mistyped("version");
    if (!JsonIntegerFits<int32_t>(at.at("world"))) return mistyped("world");
    if (!JsonIntegerFits<int64_t>(at.at("global_step"))) return mistyped("global_step");
    for (const char* key : {"epoch", "position"}) {
      if (!JsonIntegerFits<uint64_t>(at.at(key))) return mistyped(key);
    }
    if (!JsonIntegerFits<uint64_t>(head.at("payload_bytes"))) return mistyped("payload_bytes");
    const int version = head.at("version").get<int>();
    if (version > kVersion) {
      return Status::FailedPrecondition(path + ": checkpoint version " + std::to_string(version) +
                                        " is newer than this train's " + std::to_string(kVersion));
    }
    StatusOr<TrainConfig> config = TrainConfig::FromJson(DumpJson(head.at("config")));
    if (!config.ok()) return Damaged(path, config.status().message());
    c.header.config = config.value();
    c.header.db_content_hash = head.at("db_content_hash").get<std::string>();
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
    const uint64_t bytes = head.at("payload_bytes").get<uint64_t>();
    if (bytes != file.size() - 12 - length) {
      return Damaged(path, "payload is " + std::to_string(file.size() - 12 - length) + " bytes, header says " +
                               std::to_string(bytes) + " (truncated?)");
    }
    c.payload = file.substr(12 + length);
    if (FormatHash(XXH64(c.payload.data(), c.payload.size(), 0)) != head.at("payload_hash").get<std::string>()) {
      return Damaged(path, "payload hash mismatch");
    }
  } catch (const nlohmann::json::exception& e) {
    return Damaged(path, std::string("header: ") + e.what());
  }
  return c;
}

Status RestoreCheckpoint(const Checkpoint& checkpoint, torch::nn::Module* model, torch::optim::Optimizer* optimizer) {
  return CatchTorch(("restoring " + checkpoint.path).c_str(), [&] {
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    archive.load_from(checkpoint.payload.data(), checkpoint.payload.size());
    if (model != nullptr) {
      archive.read("model", model_archive);
      model->load(model_archive);
    }
    if (optimizer != nullptr) {
      archive.read("optimizer", optimizer_archive);
      optimizer->load(optimizer_archive);
    }
  });
}

StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> all = Checkpoints(dir);
  if (all.empty()) return Status::NotFound("--resume: no checkpoint (step-*.ckpt) in " + dir);
  return all.back().second.string();
}

StatusOr<Checkpoint> ResolveResume(const std::string& db_content_hash, TrainConfig* config) {
  std::string& resume = config->checkpoint.resume;
  if (resume == "latest") {
    StatusOr<std::string> latest = LatestCheckpoint(config->checkpoint.dir);
    if (!latest.ok()) return latest.status();
    resume = latest.value();
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
  const char* const may_change[] = {"dist.",    "optim.epochs:",        "output.",       "checkpoint.",
                                    "data.db:", "data.loader_threads:", "data.prefetch:"};
  for (const std::string& d : saved.Differences(resumed)) {
    const bool allowed = std::any_of(std::begin(may_change), std::end(may_change),
                                     [&](const char* prefix) { return d.rfind(prefix, 0) == 0; });
    if (!allowed) return Status::InvalidArgument("--resume: the checkpoint's run differs in " + d);
  }
  return Status::OK();
}

}  // namespace granary
