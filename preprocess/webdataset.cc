#include "preprocess/webdataset.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "base/file.h"
#include "base/names_text.h"
#include "preprocess/class_labels.h"
#include "preprocess/folder_layout.h"
#include "preprocess/image.h"
#include "preprocess/image_facts.h"
#include "preprocess/stratified.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// A regular file inside a tar archive: its name and where its bytes lie.
struct TarMember {
  std::string name;
  uint64_t offset = 0, size = 0;
};

// The value of `key` in a pax extended header's records ("30 path=a/b.jpg\n"), or "".
std::string PaxValue(const std::string& records, const std::string& key) {
  for (size_t at = 0; at < records.size();) {
    const size_t space = records.find(' ', at);
    const uint64_t length = std::strtoull(records.c_str() + at, nullptr, 10);
    if (space == std::string::npos || length == 0 || at + length > records.size()) break;
    const std::string record = records.substr(space + 1, at + length - space - 2);  // without the '\n'
    if (record.compare(0, key.size() + 1, key + "=") == 0) return record.substr(key.size() + 1);
    at += length;
  }
  return "";
}

// The regular members of the tar file `file` (ustar, GNU long names, pax
// paths), at most `most`; Corruption naming `path` where a header is no tar
// header or a member runs past the end.
StatusOr<std::vector<TarMember>> TarMembers(const ReadOnlyFile& file, const std::string& path, size_t most) {
  std::vector<TarMember> members;
  std::string next_name;  // from a GNU long name or a pax header, for the member after it
  char header[512];
  for (uint64_t at = 0; at + 512 <= file.size_bytes() && members.size() < most;) {
    GRANARY_RETURN_IF_ERROR(file.ReadAt(at, sizeof(header), header));
    if (std::all_of(header, header + 512, [](char c) { return c == '\0'; })) break;  // the end
    if (std::memcmp(header + 257, "ustar", 5) != 0) {
      return Status::Corruption(path + ": no tar header at byte " + std::to_string(at));
    }
    const uint64_t size = std::strtoull(std::string(header + 124, 12).c_str(), nullptr, 8);
    const uint64_t data = at + 512;
    if (data + size > file.size_bytes()) {
      return Status::Corruption(path + ": cut short (a member of " + std::to_string(size) + " bytes at byte " +
                                std::to_string(data) + " of " + std::to_string(file.size_bytes()) + ")");
    }
    std::string name(header, strnlen(header, 100));
    const std::string prefix(header + 345, strnlen(header + 345, 155));
    if (!prefix.empty()) name = prefix + "/" + name;
    const char type = header[156];
    if ((type == 'L' || type == 'x') && size < (1 << 20)) {
      std::string text(static_cast<size_t>(size), '\0');
      GRANARY_RETURN_IF_ERROR(file.ReadAt(data, text.size(), text.data()));
      next_name = type == 'L' ? std::string(text.c_str()) : PaxValue(text, "path");
    } else {
      if (type == '0' || type == '\0') members.push_back({next_name.empty() ? name : next_name, data, size});
      next_name.clear();
    }
    at = data + (size + 511) / 512 * 512;
  }
  return members;
}

// The split a shard's name says (imagenet-train-000000.tar: "train"), else "train".
std::string SplitOfShard(const std::string& name) {
  const std::string lower = AsciiLower(name);
  for (const char* split : {"train", "val", "test"}) {
    if (lower.find(split) != std::string::npos) return split;
  }
  return "train";
}

// The shards of `raw`: itself, or the .tar files directly in it, sorted;
// none where it holds anything else.
std::vector<std::string> ShardsOf(const std::string& raw) {
  std::error_code ec;
  std::vector<std::string> shards;
  if (fs::is_regular_file(raw, ec)) return LowerExtension(raw) == ".tar" ? std::vector<std::string>{raw} : shards;
  for (const auto& e : fs::directory_iterator(raw, ec)) {
    if (IsHiddenOrSystem(e.path().filename().string())) continue;
    if (!e.is_regular_file(ec) || LowerExtension(e.path()) != ".tar") return {};
    shards.push_back(e.path().string());
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

// A sample of a shard: its image member and the label its .cls holds.
struct WdsItem {
  std::string name;  // shard.tar:KEY
  uint32_t shard = 0;
  bool image = false;
  uint64_t offset = 0, size = 0;  // of the image
  std::string value;              // the .cls text, trimmed
  int64_t label = -1;
  std::string why;  // not "": why it is rejected
};

// One shard's samples (members grouped by their name up to the first '.'
// of the file name, in order), appended to *items; the extensions beside
// images that were no .cls, into *others.
Status ReadShard(const ReadOnlyFile& file, const std::string& path, uint32_t shard, std::vector<WdsItem>* items,
                 std::set<std::string>* others) {
  GRANARY_ASSIGN_OR_RETURN(const std::vector<TarMember> members, TarMembers(file, path, SIZE_MAX));
  std::unordered_map<std::string, size_t> at;  // key -> its item
  const std::string shard_name = fs::path(path).filename().string();
  std::vector<std::set<std::string>> extensions;
  const size_t first = items->size();
  for (const TarMember& m : members) {
    const size_t slash = m.name.rfind('/'), dot = m.name.find('.', slash == std::string::npos ? 0 : slash + 1);
    if (dot == std::string::npos) continue;
    const std::string key = m.name.substr(0, dot), extension = AsciiLower(m.name.substr(dot + 1));
    auto [found, fresh] = at.emplace(key, items->size());
    if (fresh) {
      items->push_back({shard_name + ":" + key, shard});
      extensions.emplace_back();
    }
    WdsItem& item = (*items)[found->second];
    extensions[found->second - first].insert(extension);
    if (HasImageExtension(fs::path("x." + extension)) && !item.image) {
      item.image = true;
      item.offset = m.offset;
      item.size = m.size;
    } else if (extension == "cls" && m.size <= 64) {
      item.value.assign(static_cast<size_t>(m.size), '\0');
      GRANARY_RETURN_IF_ERROR(file.ReadAt(m.offset, item.value.size(), item.value.data()));
      const size_t a = item.value.find_first_not_of(" \t\r\n"), b = item.value.find_last_not_of(" \t\r\n");
      item.value = a == std::string::npos ? "" : item.value.substr(a, b - a + 1);
    }
  }
  for (size_t i = first; i < items->size(); ++i) {
    WdsItem& item = (*items)[i];
    const std::set<std::string>& has = extensions[i - first];
    if (!item.image) {
      item.why = "no image (.jpg, .jpeg, .png, .webp) among its files (" + NamesText({has.begin(), has.end()}) + ")";
    } else if (item.value.empty()) {
      item.why = "no .cls label beside its image";
      for (const std::string& e : has) {
        if (!HasImageExtension(fs::path("x." + e))) others->insert(e);
      }
    }
  }
  return Status::OK();
}

class WdsSplit : public SplitSource {
 public:
  WdsSplit(std::string name, std::shared_ptr<const std::vector<ReadOnlyFile>> shards, std::vector<WdsItem> items,
           uint64_t raw_bytes, ImageTransform transform)
      : name_(std::move(name)), shards_(std::move(shards)), items_(std::move(items)), raw_bytes_(raw_bytes),
        transform_(transform) {}

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return items_.size(); }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override { return items_[index].name; }
  int64_t ItemLabel(uint64_t index) const override { return items_[index].label; }

  Status Produce(uint64_t index, Sample* sample) const override {
    const WdsItem& item = items_[index];
    if (!item.why.empty()) return Status::InvalidArgument(item.why);
    thread_local std::string bytes;
    bytes.resize(static_cast<size_t>(item.size));
    GRANARY_RETURN_IF_ERROR((*shards_)[item.shard].ReadAt(item.offset, bytes.size(), bytes.data()));
    return DecodeImageItem(bytes, item.label, transform_, index, &facts_, sample);
  }

  const ImageFacts& facts() const { return facts_; }

 private:
  std::string name_;
  std::shared_ptr<const std::vector<ReadOnlyFile>> shards_;
  std::vector<WdsItem> items_;
  uint64_t raw_bytes_;
  ImageTransform transform_;
  mutable ImageFacts facts_{items_.size()};
};

}  // namespace

bool IsWebDataset(const std::string& raw) {
  const std::vector<std::string> shards = ShardsOf(raw);
  ReadOnlyFile file;
  if (shards.empty() || !file.Open(shards[0]).ok()) return false;
  const StatusOr<std::vector<TarMember>> members = TarMembers(file, shards[0], 1000);
  return members.ok() && std::any_of(members->begin(), members->end(), [](const TarMember& m) {
           return HasImageExtension(fs::path(m.name));
         });
}

StatusOr<Source> OpenWebDatasetSource(const std::string& raw, const ImageFolderOptions& options) {
  if (!options.labels.empty() || options.label_from_name || !options.label_column.empty()) {
    return Status::InvalidArgument(raw + ": WebDataset shards are labelled by each sample's .cls file, not by "
                                   "--labels, --label or --label-from-name");
  }
  const std::vector<std::string> paths = ShardsOf(raw);
  if (paths.empty()) return Status::InvalidArgument(raw + ": no WebDataset shards (a .tar file, or a folder of them)");
  auto shards = std::make_shared<std::vector<ReadOnlyFile>>(paths.size());
  std::vector<WdsItem> items;
  std::set<std::string> others;
  std::vector<std::string> split_of(paths.size());  // each shard's
  std::map<std::string, uint64_t> split_bytes;
  for (size_t s = 0; s < paths.size(); ++s) {
    GRANARY_RETURN_IF_ERROR((*shards)[s].Open(paths[s]));
    GRANARY_RETURN_IF_ERROR(ReadShard((*shards)[s], paths[s], static_cast<uint32_t>(s), &items, &others));
    split_of[s] = SplitOfShard(fs::path(paths[s]).filename().string());
    split_bytes[split_of[s]] += (*shards)[s].size_bytes();
  }
  std::set<std::string> values;
  for (const WdsItem& item : items) {
    if (item.why.empty()) values.insert(item.value);
  }
  if (values.empty()) {
    return Status::InvalidArgument(raw + ": WebDataset shards of " + std::to_string(items.size()) + " samples, none "
                                   "with a .cls class label (beside the images: " +
                                   (others.empty() ? "nothing" : NamesText({others.begin(), others.end()})) +
                                   "): prep reads images labelled by class; write them from Python with "
                                   "granary.write (README, \"Any dataset from Python\")");
  }
  Source source;
  SourceInfo& info = source.info;
  info.kind = "webdataset";
  info.path = raw;
  info.label_field = "label";
  info.schema.fields = {{"image", DType::kUInt8, {options.height, options.width, options.channels}, "HWC"},
                        {"label", DType::kInt64, {}, ""}};
  const std::map<std::string, int64_t> classes =
      options.like.path.empty() ? ChooseClasses(values, &info.class_names)
                                : ClassesLike(options.like, ".cls", values, &info.class_names, &info.notes);
  info.num_classes = static_cast<int64_t>(info.class_names.size());
  std::map<std::string, std::vector<WdsItem>> splits;
  for (WdsItem& item : items) {
    if (item.why.empty()) {
      const auto found = classes.find(item.value);
      item.label = found == classes.end() ? -1 : found->second;
      if (found == classes.end()) item.why = "label '" + item.value + "' (its .cls) is none of the classes";
    }
    std::string split = split_of[item.shard];
    if (split == "train" && options.val_fraction > 0) {  // held out by a hash of its key: stable as shards grow
      const uint64_t h = XXH64(item.name.data(), item.name.size(), 0);
      if (static_cast<double>(h % 1000000) < options.val_fraction * 1e6) split = "val";
    }
    splits[split].push_back(std::move(item));
  }
  if (options.val_fraction > 0 && split_bytes.count("val") > 0) {
    return Status::InvalidArgument("--val-fraction: " + raw + " has val shards already");
  }
  const ImageTransform transform{options.width, options.height, options.channels, options.max_decode_bytes};
  std::vector<const ImageFacts*> facts;
  for (const char* name : {"train", "val", "test"}) {
    auto split = splits.find(name);
    if (split == splits.end()) continue;
    KeepStratified(&split->second, options.limit, [](const WdsItem& i) { return i.label; });
    const uint64_t bytes = split_bytes.count(name) > 0 ? split_bytes[name] : 0;
    auto written = std::make_unique<WdsSplit>(name, shards, std::move(split->second), bytes, transform);
    facts.push_back(&written->facts());
    source.splits.push_back(std::move(written));
  }
  source.produced_notes = [facts, transform] { return DecodedImageNotes(facts, transform); };
  info.notes.push_back(std::to_string(paths.size()) + " WebDataset shard(s) of " + std::to_string(items.size()) +
                       " samples, each an image and its .cls label, read in place");
  return source;
}

}  // namespace granary
