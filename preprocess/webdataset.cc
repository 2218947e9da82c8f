#include "preprocess/webdataset.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "base/file.h"
#include "base/names_text.h"
#include "preprocess/folder_layout.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// The names of the regular members of the tar file at `path` (ustar, with
// GNU long names; at most 1,000), or none where it is no tar file.
std::vector<std::string> TarMembers(const std::string& path) {
  ReadOnlyFile file;
  std::vector<std::string> names;
  if (!file.Open(path).ok()) return names;
  std::string long_name;
  char header[512];
  for (uint64_t at = 0; at + 512 <= file.size_bytes() && names.size() < 1000;) {
    if (!file.ReadAt(at, sizeof(header), header).ok() || header[0] == '\0') break;
    if (std::string(header + 257, 5) != "ustar") return {};
    const uint64_t size = std::strtoull(std::string(header + 124, 12).c_str(), nullptr, 8);
    std::string name(header, strnlen(header, 100));
    const std::string prefix(header + 345, strnlen(header + 345, 155));
    if (!prefix.empty()) name = prefix + "/" + name;
    const char type = header[156];
    if (type == 'L' && size < 4096) {  // GNU: the next member's name is this one's data
      long_name.assign(static_cast<size_t>(size), '\0');
      if (!file.ReadAt(at + 512, long_name.size(), long_name.data()).ok()) break;
      long_name.resize(strnlen(long_name.c_str(), long_name.size()));
    } else {
      if (type == '0' || type == '\0') names.push_back(long_name.empty() ? name : long_name);
      long_name.clear();
    }
    at += 512 + (size + 511) / 512 * 512;
  }
  return names;
}

// `text` in single quotes for the shell.
std::string ShellQuoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// The split a shard's name says (imagenet-train-000000.tar: "train"), or "".
std::string SplitOfShard(const std::string& name) {
  const std::string lower = AsciiLower(name);
  for (const char* split : {"train", "val", "test"}) {
    if (lower.find(split) != std::string::npos) return split;
  }
  return "";
}

}  // namespace

std::string WebDatasetAdvice(const std::string& raw, const std::string& db) {
  std::error_code ec;
  std::vector<std::string> shards;
  if (fs::is_regular_file(raw, ec) && LowerExtension(raw) == ".tar") {
    shards.push_back(raw);
  } else if (fs::is_directory(raw, ec)) {
    for (const auto& e : fs::directory_iterator(raw, ec)) {
      const std::string name = e.path().filename().string();
      if (IsHiddenOrSystem(name)) continue;
      if (!e.is_regular_file(ec) || LowerExtension(e.path()) != ".tar") return "";  // not a folder of shards alone
      shards.push_back(e.path().string());
    }
    std::sort(shards.begin(), shards.end());
  }
  if (shards.empty()) return "";
  // Samples: members grouped by their name up to the first '.' of the file name.
  std::map<std::string, std::set<std::string>> samples;
  for (const std::string& member : TarMembers(shards[0])) {
    const size_t slash = member.rfind('/'), dot = member.find('.', slash == std::string::npos ? 0 : slash + 1);
    if (dot == std::string::npos) continue;
    samples[member.substr(0, dot)].insert(AsciiLower(member.substr(dot + 1)));
  }
  std::set<std::string> image_extensions, others;
  size_t images = 0, labelled = 0;
  for (const auto& [key, extensions] : samples) {
    bool image = false;
    for (const std::string& e : extensions) {
      const bool is_image = HasImageExtension(fs::path("x." + e));
      (is_image ? image_extensions : others).insert(e);
      image = image || is_image;
    }
    images += image;
    labelled += image && extensions.count("cls") > 0;
  }
  if (images == 0) return "";
  const std::string what = raw + ": " + (shards.size() == 1 ? "a WebDataset shard" : "WebDataset shards (" +
                           std::to_string(shards.size()) + " .tar files)") + ": " + std::to_string(images) +
                           " images in " + shards[0].substr(shards[0].rfind('/') + 1) + ", each a sample of the files "
                           "named like it";
  if (labelled < images) {
    std::vector<std::string> named(others.begin(), others.end());
    return what + ", and no .cls class label beside " + std::to_string(images - labelled) + " of them (beside them: " +
           (named.empty() ? std::string("nothing") : NamesText(named)) + "): prep reads images labelled by class; "
           "write them from Python with granary.write (README, \"Any dataset from Python\")";
  }
  // Extract each split's shards, then move each image into the folder of its label: <split>/<label>/.
  std::map<std::string, std::string> globs;  // split -> its shards' pattern
  for (const std::string& shard : shards) {
    const std::string split = SplitOfShard(shard.substr(shard.rfind('/') + 1));
    globs[split.empty() ? "train" : split] = split.empty() ? "*.tar" : "*" + split + "*.tar";
  }
  const std::string base = db.empty() ? "wds" : fs::path(db).stem().string();
  const std::string folder = fs::is_directory(raw, ec) ? raw : fs::path(raw).parent_path().string();
  std::string commands;
  for (const auto& [split, glob] : globs) {
    const std::string pattern = fs::is_regular_file(raw, ec) ? ShellQuoted(raw) : ShellQuoted(folder) + "/" + glob;
    commands += "mkdir -p " + base + "-tar/" + split + " && for s in " + pattern + "; do tar xf \"$s\" -C " + base +
                "-tar/" + split + "; done && ";
  }
  std::string exts;
  for (const std::string& e : image_extensions) exts += (exts.empty() ? "" : " ") + e;
  commands += "find " + base + "-tar -name '*.cls' | while read -r c; do p=\"${c#" + base + "-tar/}\"; d=\"" + base +
              "-classes/${p%%/*}/$(printf %05d \"$(cat \"$c\")\")\"; mkdir -p \"$d\" && for e in " + exts +
              "; do [ ! -e \"${c%.cls}.$e\" ] || mv \"${c%.cls}.$e\" \"$d\"/; done; done && prep build " + base +
              "-classes " + (db.empty() ? "DB" : db);
  return what + " and its class in a .cls file: prep reads class folders; these lines make them (a folder a label, "
                "its number zero-padded so that the folders' order is the labels'), then build: " + commands;
}

}  // namespace granary
