#include "preprocess/numpy_files.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <map>

#include "base/file.h"
#include "base/names_text.h"
#include "preprocess/folder_layout.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

constexpr char kNotArrays[] = "prep reads CSV tables, IDX files and image folders, not arrays";

uint32_t LittleEndian(std::string_view bytes, size_t at, int width) {
  uint32_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

// "'<f4'" after `key` in a .npy header's dict, up to and including `close`; "" if absent or long.
std::string HeaderValue(std::string_view header, std::string_view key, char open, char close) {
  size_t at = header.find(key);
  if (at == std::string_view::npos || (at = header.find_first_not_of(' ', at + key.size())) == std::string_view::npos ||
      header[at] != open) {
    return "";
  }
  const size_t end = header.find(close, at + 1);
  return end == std::string_view::npos || end - at > 60 ? "" : std::string(header.substr(at, end - at + 1));
}

// What a name says an array holds: "features", "labels" or "", and its split ("train", "val", "test" or "").
struct Role {
  std::string kind;
  std::string split;
};

Role RoleOf(const std::string& name) {
  static const std::map<std::string, std::string> kKinds = {
      {"x", "features"},        {"features", "features"}, {"feature", "features"}, {"data", "features"},
      {"images", "features"},   {"image", "features"},    {"inputs", "features"},  {"input", "features"},
      {"y", "labels"},          {"labels", "labels"},     {"label", "labels"},     {"targets", "labels"},
      {"target", "labels"}};
  static const std::map<std::string, std::string> kSplits = {
      {"train", "train"}, {"training", "train"}, {"val", "val"},    {"valid", "val"},
      {"validation", "val"}, {"dev", "val"},     {"test", "test"}, {"testing", "test"}};
  Role role;
  int kinds = 0, splits = 0, others = 0;
  const auto take = [&](const std::string& word) {
    if (auto k = kKinds.find(word); k != kKinds.end()) role.kind = k->second, ++kinds;
    if (auto s = kSplits.find(word); s != kSplits.end()) role.split = s->second, ++splits;
    return kKinds.count(word) + kSplits.count(word) > 0;
  };
  std::string word;
  for (const char c : AsciiLower(name) + "_") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += c;
      continue;
    }
    if (!word.empty() && !take(word)) {
      bool joined = false;  // "trainX", "xtest": a split word joined to x or y
      for (const auto& [split, _] : kSplits) {
        const size_t n = split.size();
        if (word.size() != n + 1) continue;
        const std::string rest = word.compare(0, n, split) == 0 ? word.substr(n)
                                 : word.compare(1, n, split) == 0 ? word.substr(0, 1) : "";
        if (!rest.empty() && take(rest) && take(split)) joined = true;
      }
      others += !joined;
    }
    word.clear();
  }
  return kinds == 1 && splits <= 1 && others == 0 ? role : Role{};  // "feature_names": neither
}

// The .npy and .npz files directly in `dir`, sorted; *others counts its other tables (CSV's excepted).
std::vector<std::string> NumpyFilesIn(const fs::path& dir, size_t* others) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string extension = LowerExtension(e.path());
    if (!e.is_regular_file(ec)) continue;
    if (extension == ".npy" || extension == ".npz") {
      found.push_back(e.path().filename().string());
    } else if (others != nullptr && HasOtherTableExtension(e.path())) {
      ++*others;
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// The advice for the .npz archive `path`: "" where it is none.
std::string ArchiveAdvice(const std::string& path, const std::string& db) {
  const std::vector<std::string> names = NumpyArchiveArrays(path);
  if (names.empty()) return "";
  std::vector<NamedArray> arrays;
  for (const std::string& name : names) arrays.push_back({name, "d[" + PythonString(name) + "]"});
  const std::string call = WriteArraysCall(arrays, db);
  return "a NumPy archive (.npz) of the arrays " + NamesText(names) + ": " + kNotArrays +
         "; write them from Python: import numpy as np, granary; d = np.load(" + PythonString(path) + "); " +
         (call.empty() ? "granary.write(" + PythonString(db) + ", zip(d['FEATURES'], d['LABELS']))" : call);
}

// The advice for the .npy files `files` of the folder `dir` (as the user spelled it).
std::string ArraysAdvice(const std::string& dir, const std::vector<std::string>& files, const std::string& db) {
  std::vector<NamedArray> arrays;
  for (const std::string& file : files) {
    if (LowerExtension(file) != ".npy") continue;
    arrays.push_back({fs::path(file).stem().string(), "np.load(" + PythonString(InFolder(dir, file)) + ")"});
  }
  const std::string call = WriteArraysCall(arrays, db);
  if (call.empty()) return "";
  return "write them from Python: import numpy as np, granary; " + call;
}

}  // namespace

std::string NumpyArrayFacts(std::string_view head) {
  if (head.substr(0, 6) != "\x93NUMPY") return "";
  const std::string_view header = head.substr(std::min<size_t>(head.size(), 10));  // after the version and length
  const std::string dtype = HeaderValue(header, "'descr':", '\'', '\'');
  const std::string shape = HeaderValue(header, "'shape':", '(', ')');
  if (dtype.empty() || shape.empty()) return "a NumPy array (.npy)";
  return "a NumPy array (dtype " + dtype + ", shape " + shape + ")";
}

std::vector<std::string> NumpyArchiveArrays(const std::string& path) {
  const std::string tail = ReadFileEdge(path, 1 << 20, /*from_end=*/true);
  // The zip's end of central directory record: its signature, and the directory's size 12 bytes on.
  const size_t end_record = tail.size() < 22 ? std::string::npos : tail.rfind("PK\x05\x06", tail.size() - 22);
  if (end_record == std::string::npos) return {};
  size_t end = end_record;
  if (end >= 20 + 56 && tail.compare(end - 20, 4, "PK\x06\x07") == 0) end -= 20 + 56;  // ZIP64's record and locator
  const uint32_t directory = LittleEndian(tail, end_record + 12, 4);
  if (directory > end) return {};
  std::vector<std::string> names;
  for (size_t at = end - directory; at < end;) {
    if (at + 46 > end || tail.compare(at, 4, "PK\x01\x02") != 0) return {};
    const size_t name = LittleEndian(tail, at + 28, 2);
    const std::string entry = tail.substr(at + 46, std::min(name, end - at - 46));
    if (entry.size() <= 4 || entry.compare(entry.size() - 4, 4, ".npy") != 0) return {};
    names.push_back(entry.substr(0, entry.size() - 4));
    at += 46 + name + LittleEndian(tail, at + 30, 2) + LittleEndian(tail, at + 32, 2);
  }
  return names;
}

std::string WriteArraysCall(const std::vector<NamedArray>& arrays, const std::string& db) {
  std::map<std::string, std::map<std::string, std::string>> splits;  // split -> kind -> expression
  for (const NamedArray& array : arrays) {
    const Role role = RoleOf(array.name);
    if (role.kind.empty()) continue;
    if (!splits[role.split].emplace(role.kind, array.expression).second) return "";  // two of a kind: ambiguous
  }
  std::vector<std::pair<std::string, std::string>> pairs;  // split, "zip(features, labels)"
  for (const char* split : {"", "train", "val", "test"}) {
    const auto it = splits.find(split);
    if (it == splits.end() || it->second.size() != 2) continue;
    pairs.emplace_back(split, "zip(" + it->second["features"] + ", " + it->second["labels"] + ")");
  }
  if (pairs.empty() || (pairs.size() > 1 && pairs[0].first.empty())) return "";
  if (pairs[0].first.empty()) return "granary.write(" + PythonString(db) + ", " + pairs[0].second + ")";
  std::string dict;
  for (const auto& [split, samples] : pairs) dict += (dict.empty() ? "" : ", ") + PythonString(split) + ": " + samples;
  return "granary.write(" + PythonString(db) + ", {" + dict + "})";
}

std::string InFolder(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + (dir.back() == '/' ? "" : "/") + name;
}

std::string PythonString(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\\' || c == '\'') quoted += '\\';
    quoted += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return quoted + "'";
}

std::string NumpyAdvice(const std::string& raw, const std::string& db_path) {
  const std::string db = db_path.empty() ? "db" : db_path;
  std::error_code ec;
  if (fs::is_directory(raw, ec)) {
    size_t others = 0;
    const std::vector<std::string> files = NumpyFilesIn(raw, &others);
    if (files.empty() || others > 0) return "";
    if (files.size() == 1 && LowerExtension(files[0]) == ".npz") {
      const std::string archive = ArchiveAdvice(InFolder(raw, files[0]), db);
      return archive.empty() ? "" : raw + ": holds " + files[0] + ", " + archive;
    }
    const std::string advice = ArraysAdvice(raw, files, db);
    const std::string rows = "write their rows from Python: granary.write(" + PythonString(db) +
                             ", zip(features, labels))";
    return raw + ": holds NumPy arrays (" + NamesText(files) + "): " + kNotArrays + "; " +
           (advice.empty() ? rows : advice);
  }
  if (!fs::is_regular_file(raw, ec)) return "";
  if (const std::string facts = NumpyArrayFacts(ReadFileEdge(raw, 4096)); !facts.empty()) {
    const std::string dir = fs::path(raw).parent_path().string();
    const std::string advice = ArraysAdvice(dir, NumpyFilesIn(dir.empty() ? "." : dir, nullptr), db);
    return raw + ": is " + facts + ": " + kNotArrays + "; " +
           (advice.empty() ? "write its rows from Python with their labels: import numpy as np, granary; "
                             "granary.write(" + PythonString(db) + ", zip(np.load(" + PythonString(raw) +
                             "), labels))"
                           : advice);
  }
  const std::string archive = ArchiveAdvice(raw, db);
  return archive.empty() ? "" : raw + ": is " + archive;
}

}  // namespace granary
