#include "preprocess/other_media.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <utility>
#include <vector>

#include "base/file.h"
#include "base/names_text.h"
#include "preprocess/folder_layout.h"
#include "preprocess/numpy_files.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

bool IsAudio(const std::string& extension) {
  static const char* const kAudio[] = {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a"};
  return std::any_of(std::begin(kAudio), std::end(kAudio), [&](const char* a) { return extension == a; });
}

// What the files below a folder are (hidden ones and linked folders aside).
struct Counts {
  size_t text = 0, audio = 0, images = 0;
  std::string first_wav;
};

// Adds the files below `dir` to *counts, looking at no more than *budget entries.
void CountBelow(const fs::path& dir, Counts* counts, size_t* budget) {
  std::vector<fs::path> pending = {dir};
  while (!pending.empty() && *budget > 0) {
    const fs::path current = std::move(pending.back());
    pending.pop_back();
    std::error_code ec;
    for (fs::directory_iterator it(current, ec), end; !ec && it != end && *budget > 0; it.increment(ec), --*budget) {
      if (IsHiddenOrSystem(it->path().filename().string())) continue;
      if (it->is_directory(ec)) {
        if (!it->is_symlink(ec)) pending.push_back(it->path());
        continue;
      }
      const std::string extension = LowerExtension(it->path());
      counts->text += extension == ".txt";
      counts->audio += IsAudio(extension);
      counts->images += HasImageExtension(it->path()) || HasOtherImageExtension(it->path());
      if (extension == ".wav" && counts->first_wav.empty()) counts->first_wav = it->path().string();
    }
  }
}

// A folder beside the classes that holds no class: unlabelled data (aclImdb's unsup/) or extras (_background_noise_/).
bool NoClass(const std::string& name) {
  const std::string n = AsciiLower(name);
  return name[0] == '_' || n == "unsup" || n == "unlabeled" || n == "unlabelled";
}

// Whether the WAV file at `path` holds 16-bit PCM samples (its "fmt " chunk says so).
bool Is16BitPcm(const std::string& path) {
  const std::string head = ReadFileEdge(path, 4096);
  if (head.size() < 12 || head.compare(0, 4, "RIFF") != 0 || head.compare(8, 4, "WAVE") != 0) return false;
  const auto u16 = [&](size_t at) { return static_cast<unsigned>(static_cast<unsigned char>(head[at])) |
                                           static_cast<unsigned>(static_cast<unsigned char>(head[at + 1])) << 8; };
  for (size_t at = 12; at + 24 <= head.size();) {
    const size_t size = u16(at + 4) | static_cast<size_t>(u16(at + 6)) << 16;
    if (head.compare(at, 4, "fmt ") == 0) return (u16(at + 8) == 1 || u16(at + 8) == 0xFFFE) && u16(at + 22) == 16;
    at += 8 + size + (size & 1);
  }
  return false;
}

// The Python list literal of `names`: ['neg', 'pos'].
std::string PythonList(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + PythonString(name);
  return "[" + list + "]";
}

// The val and test splits a folder's lists name (Speech Commands' validation_list.txt, testing_list.txt).
std::vector<std::pair<std::string, std::string>> SplitLists(const std::string& raw) {
  std::vector<std::pair<std::string, std::string>> lists;
  std::error_code ec;
  for (const auto& [split, file] : {std::pair<const char*, const char*>{"val", "validation_list.txt"},
                                    std::pair<const char*, const char*>{"test", "testing_list.txt"}}) {
    if (fs::is_regular_file(fs::path(raw) / file, ec)) lists.emplace_back(split, InFolder(raw, file));
  }
  return lists;
}

}  // namespace

std::string OtherMediaAdvice(const std::string& raw, const std::string& db_path) {
  const std::string db = PythonString(db_path.empty() ? "db" : db_path);
  std::error_code ec;
  if (!fs::is_directory(raw, ec)) return "";
  const std::vector<std::string> top = SortedSubdirs(raw);
  const std::string train = FolderOfSplit(top, "train");
  std::vector<std::string> classes, left_out;
  for (const std::string& name : SortedSubdirs(train.empty() ? fs::path(raw) : fs::path(raw) / train)) {
    (NoClass(name) ? left_out : classes).push_back(name);
  }
  if (classes.size() < 2 || classes.size() > 100) return "";
  std::vector<std::pair<std::string, std::string>> splits;  // split, its folder as the user spells it
  if (train.empty()) splits.emplace_back("train", raw);
  for (const char* split : {"train", "val", "test"}) {  // the splits layout: those holding a class folder
    const std::string folder = train.empty() ? "" : FolderOfSplit(top, split);
    const auto holds = [&](const std::string& c) { return fs::is_directory(fs::path(raw) / folder / c, ec); };
    if (!folder.empty() && std::any_of(classes.begin(), classes.end(), holds)) {
      splits.emplace_back(split, InFolder(raw, folder));
    }
  }
  Counts counts;
  size_t budget = 100000;
  for (const auto& [split, folder] : splits) {
    for (const std::string& c : classes) CountBelow(fs::path(folder) / c, &counts, &budget);
  }
  if (counts.images > 0 || counts.text + counts.audio == 0) return "";
  const bool text = counts.text >= counts.audio;
  std::string message = raw + ": its class folders (" + NamesText(classes, "/") + ") hold " +
                        std::to_string(text ? counts.text : counts.audio) + (text ? " .txt files" : " audio files") +
                        " and no image: " + (text ? "text" : "audio") + ", which prep does not read (it reads " +
                        "images, CSV tables, IDX and CIFAR files)" +
                        (left_out.empty() ? "" : "; " + NamesText(left_out, "/") + " left out (no class)");
  const bool wav16 = !text && !counts.first_wav.empty() && Is16BitPcm(counts.first_wav);
  if (!text && !wav16) {
    return message + "; write it from Python: decode each clip to an array (soundfile.read, torchaudio.load) and "
                     "write {'audio': clip, 'label': k}, with schema={'audio': ('float32', [-1]), 'label': ('int64', "
                     "[])} for clips of any length (README, \"Any dataset from Python\")";
  }
  const std::string value = text ? "'text': f.read_text()" : "'audio': np.frombuffer(wave.open(str(f)).readframes(-1), "
                                                             "np.int16)";
  const std::string files = text ? "'*.txt'" : "'*.wav'";
  const std::string options =
      ", classes=classes" + std::string(text ? "" : ", schema={'audio': ('int16', [-1]), 'label': ('int64', [])}");
  std::string code = std::string("import granary, pathlib") + (text ? "" : ", wave, numpy as np") +
                     "; classes = " + PythonList(classes) + "; ";
  const auto lists = SplitLists(raw);
  if (train.empty() && !lists.empty()) {  // one folder of classes, its held-out files listed
    const std::string root = PythonString(raw);
    std::string held, names = "'train'";
    for (const auto& [split, list] : lists) {
      held += (held.empty() ? "" : ", ") + std::string("**dict.fromkeys(open(") + PythonString(list) +
              ").read().split(), '" + split + "')";
      names += ", '" + split + "'";
    }
    code += "held = {" + held + "}; rows = lambda s: [{" + value + ", 'label': k} for k, c in enumerate(classes) " +
            "for f in sorted((pathlib.Path(" + root + ") / c).rglob(" + files + ")) if held.get(f.relative_to(" +
            root + ").as_posix(), 'train') == s]; granary.write(" + db + ", {s: rows(s) for s in (" + names + ")}" +
            options + ")";
  } else {
    std::string written;
    for (const auto& [split, folder] : splits) {
      written += (written.empty() ? "" : ", ") + PythonString(split) + ": rows(" + PythonString(folder) + ")";
    }
    code += "rows = lambda d: [{" + value + ", 'label': k} for k, c in enumerate(classes) for f in " +
            "sorted((pathlib.Path(d) / c).rglob(" + files + "))]; granary.write(" + db + ", {" + written + "}" +
            options + ")";
  }
  return message + "; write it from Python, each " + (text ? "file a str (a text field)" : "clip's 16-bit samples") +
         ": " + code;
}

}  // namespace granary
