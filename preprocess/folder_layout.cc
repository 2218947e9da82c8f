#include "preprocess/folder_layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "base/names_text.h"
#include "store/output_path.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// Whether any image lies below `dir` (following links, each folder once).
bool HoldsImages(const fs::path& dir) {
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<fs::path> pending = {dir};
  while (!pending.empty()) {
    const fs::path current = std::move(pending.back());
    pending.pop_back();
    struct stat st;
    if (::stat(current.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
    std::error_code ec;
    for (fs::directory_iterator it(current, ec), end; !ec && it != end; it.increment(ec)) {
      if (IsHiddenOrSystem(it->path().filename().string())) continue;
      if (it->is_directory(ec)) {
        pending.push_back(it->path());
      } else if (it->is_regular_file(ec) && HasImageExtension(it->path())) {
        return true;
      }
    }
  }
  return false;
}

bool HasNoClassOf(const fs::path& dir, const std::vector<std::string>& classes) {
  for (const std::string& sub : SortedSubdirs(dir)) {
    if (std::find(classes.begin(), classes.end(), sub) != classes.end()) return false;
  }
  return true;
}

// The one table directly in `dir` (.csv, .tsv, .txt; .csv.gz, .csv.zst);
// "" where there is none, or more than one.
std::string LabelsTableIn(const fs::path& dir) {
  std::vector<std::string> tables;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = AsciiLower(it->path().filename().string());
    if (name[0] == '.' || !it->is_regular_file(ec)) continue;
    for (const char* ext : {".csv", ".tsv", ".txt", ".csv.gz", ".csv.zst"}) {
      const std::string e(ext);
      if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
        tables.push_back(it->path().string());
        break;
      }
    }
  }
  return tables.size() == 1 ? tables[0] : "";
}

}  // namespace

std::map<std::string, std::string> TableLabelledSplits(const fs::path& raw, const std::vector<std::string>& splits,
                                                       std::vector<std::string>* unlabelled) {
  std::map<std::string, std::string> tables;
  const std::vector<std::string> train_classes = SortedSubdirs(raw / FolderOfSplit(splits, "train"));
  std::vector<std::string> without, flat;  // flat: its images directly in it, in no folder
  for (const std::string& name : splits) {
    if (SplitOfFolder(name) == "train" || !HasNoClassOf(raw / name, train_classes) || !HoldsImages(raw / name)) {
      continue;
    }
    const std::string table = LabelsTableIn(raw / name);
    if (table.empty()) {
      without.push_back(name);
      if (SortedSubdirs(raw / name).empty()) flat.push_back(name);
    } else {
      tables[name] = table;
    }
  }
  if (unlabelled != nullptr) *unlabelled = tables.empty() ? flat : without;
  return tables;
}

std::string AsciiLower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string LowerExtension(const fs::path& p) { return AsciiLower(p.extension().string()); }

std::string SplitOfFolder(const std::string& name) {
  std::string n;
  for (char c : name) {
    if (c != '_' && c != '-') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (n == "train" || n == "training" || n == "trainset") return "train";
  if (n == "val" || n == "valid" || n == "validation" || n == "valset") return "val";
  if (n == "test" || n == "testing" || n == "testset") return "test";
  return "";
}

std::string FolderOfSplit(const std::vector<std::string>& folders, const std::string& split) {
  for (const std::string& name : folders) {
    if (SplitOfFolder(name) == split) return name;
  }
  return "";
}

bool HasImageExtension(const fs::path& p) {
  const std::string ext = LowerExtension(p);
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".webp";
}

bool HasOtherImageExtension(const fs::path& p) {
  static const char* const kOthers[] = {".bmp", ".gif", ".tif", ".tiff", ".ppm", ".pgm", ".pbm",
                                        ".heic", ".heif", ".avif", ".jxl", ".jp2"};
  const std::string ext = LowerExtension(p);
  return std::any_of(std::begin(kOthers), std::end(kOthers), [&](const char* other) { return ext == other; });
}

bool HasOtherTableExtension(const fs::path& p) {
  static const char* const kOthers[] = {".jsonl", ".ndjson", ".json", ".parquet", ".xlsx", ".xlsm", ".xls", ".ods",
                                        ".feather", ".arrow", ".h5", ".hdf5", ".npy", ".npz", ".pkl", ".pickle"};
  const std::string ext = LowerExtension(p);
  return std::any_of(std::begin(kOthers), std::end(kOthers), [&](const char* other) { return ext == other; });
}

bool IsHiddenOrSystem(const std::string& name) {
  static const char* const kSystem[] = {"lost+found", "__MACOSX", "@eaDir", "$RECYCLE.BIN",
                                        "System Volume Information"};
  return name.empty() || name[0] == '.' ||
         std::any_of(std::begin(kSystem), std::end(kSystem), [&](const char* system) { return name == system; });
}

std::vector<std::string> SortedSubdirs(const fs::path& dir, std::vector<std::string>* hidden,
                                       std::vector<std::string>* dbs) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(ec)) continue;
    const std::string name = e.path().filename().string();
    if (IsHiddenOrSystem(name)) {
      if (hidden != nullptr) hidden->push_back(name);
    } else if (IsDbOrPartial(e.path().string())) {
      if (dbs != nullptr) dbs->push_back(name);
    } else {
      names.push_back(name);
    }
  }
  for (std::vector<std::string>* list : {&names, hidden, dbs}) {
    if (list != nullptr) std::sort(list->begin(), list->end());
  }
  return names;
}

std::vector<std::string> LooseImages(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!IsHiddenOrSystem(name) && e.is_regular_file(ec) && HasImageExtension(e.path())) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ClassFromName(const std::string& path) {
  std::string name = fs::path(path).stem().string();
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
  if (end == name.size()) return "";  // no number: no class followed by one
  while (end > 0 && std::string("._- ").find(name[end - 1]) != std::string::npos) --end;
  return name.substr(0, end);
}

namespace {

// "their names say a class (cat, dog: 2 by the name without its number)"
// where every one of `images` has a class by its name and they make from 2
// to 1,000 classes; "" otherwise.
std::string NamesSayClasses(const std::vector<std::string>& images) {
  std::set<std::string> classes;
  for (const std::string& image : images) {
    const std::string c = ClassFromName(image);
    if (c.empty()) return "";
    classes.insert(c);
  }
  if (classes.size() < 2 || classes.size() > 1000) return "";
  std::string named;
  for (auto it = classes.begin(); it != classes.end() && std::distance(classes.begin(), it) < 3; ++it) {
    named += (named.empty() ? "" : ", ") + *it;
  }
  return "their names say a class (" + named + (classes.size() > 3 ? ", ..." : "") + ": " +
         std::to_string(classes.size()) + " by the name without its number)";
}

}  // namespace

StatusOr<FolderLayout> ChooseLayout(const fs::path& raw, const std::vector<std::string>& top, FolderLayout requested,
                                    std::vector<std::string>* notes) {
  std::vector<std::string> splits, others;  // top folders by what their name says
  for (const std::string& name : top) (SplitOfFolder(name).empty() ? others : splits).push_back(name);
  const std::string train_folder = FolderOfSplit(splits, "train");
  const bool has_train = !train_folder.empty();
  std::string twice;  // two folders of one split (val/ and validation/)
  for (size_t i = 0; i < splits.size() && twice.empty(); ++i) {
    for (size_t j = i + 1; j < splits.size() && twice.empty(); ++j) {
      if (SplitOfFolder(splits[i]) == SplitOfFolder(splits[j])) {
        twice = "both " + splits[i] + "/ and " + splits[j] + "/: which one is the " + SplitOfFolder(splits[i]) +
                " split?";
      }
    }
  }
  if (requested == FolderLayout::kClasses) return requested;
  const std::string where = raw.string();
  if (requested == FolderLayout::kSplits) {
    if (!has_train) return Status::InvalidArgument(where + ": --layout splits needs a train/ folder");
    if (!others.empty()) {
      return Status::InvalidArgument(where + ": --layout splits: " + NamesText(others, "/") +
                                     " beside " + train_folder + "/ would be left out (split folders are "
                                     "train, val, test, in any case, or training, validation, testing; --layout "
                                     "classes reads every folder as a class)");
    }
  }
  if (!has_train) return FolderLayout::kClasses;
  if (!twice.empty()) return Status::InvalidArgument(where + ": " + twice);
  // Splits labelled by a table in them (Tiny ImageNet's val/images/ beside
  // val/val_annotations.txt), and beside those, splits without labels (its
  // test/): their folders are no classes.
  std::vector<std::string> unlabelled;
  const std::map<std::string, std::string> tables = TableLabelledSplits(raw, splits, &unlabelled);
  const auto by_table = [&](const std::string& name) {
    return tables.count(name) > 0 || std::find(unlabelled.begin(), unlabelled.end(), name) != unlabelled.end();
  };
  for (const std::string& name : unlabelled) {
    notes->push_back(name + "/: neither class folders nor a table of labels (a test set without labels): its "
                     "images are left out (a model train saves predicts them: granary.load_image)");
  }
  // What reading train/ (val/, test/) as splits would leave out.
  std::vector<std::string> left_out;
  for (const std::string& name : others) {
    if (HoldsImages(raw / name)) left_out.push_back(name + "/");
  }
  for (const std::string& name : splits) {
    if (!by_table(name) && !LooseImages(raw / name).empty()) left_out.push_back("the images directly in " + name + "/");
  }
  std::vector<std::string> train_classes = SortedSubdirs(raw / train_folder);
  if (requested == FolderLayout::kSplits) {
    if (!left_out.empty()) notes->push_back("--layout splits leaves out " + NamesText(left_out));
    return requested;
  }
  if (!left_out.empty()) {
    const std::vector<std::string> loose = LooseImages(raw / train_folder);
    if (train_classes.empty() && !loose.empty()) {
      const std::string said = NamesSayClasses(loose), train = (raw / train_folder).string();
      notes->push_back("read as class folders (" + NamesText(top) + "), as torchvision's ImageFolder would; " +
                       train_folder + "/ holds its " + std::to_string(loose.size()) +
                       " images directly, in no class folder" +
                       (said.empty() ? ": labelled by a table? prep build " + train + " DB --labels TABLE"
                                     : "; " + said + ": prep build " + train + " DB --label-from-name"));
    } else if (!train_classes.empty()) {
      const bool one = splits.size() == 1;
      notes->push_back("read as class folders (" + NamesText(top) + "), as torchvision's ImageFolder would: " +
                       NamesText(splits, "/") + (one ? " is a class" : " are classes") + " here, since reading " +
                       (one ? "it as a split" : "them as splits") + " would leave out " + NamesText(left_out) +
                       " (--layout splits says otherwise)");
    }
    return FolderLayout::kClasses;
  }
  // Every image is in a split's class folders: the splits reading, unless
  // folders without images stand beside them or a split names a class
  // train/ lacks, where either reading may be meant.
  std::string doubt;
  if (!others.empty()) doubt = NamesText(others, "/") + " beside them hold no images";
  for (const std::string& name : splits) {
    if (by_table(name)) continue;
    for (const std::string& c : SortedSubdirs(raw / name)) {
      if (doubt.empty() && std::find(train_classes.begin(), train_classes.end(), c) == train_classes.end()) {
        doubt = name + "/" + c + "/ is not a class of " + train_folder + "/";
      }
    }
  }
  if (doubt.empty()) return FolderLayout::kSplits;
  return Status::InvalidArgument(where + ": ambiguous layout: read as splits, " + NamesText(splits, "/") +
                                 " hold class folders (" + train_folder + "/'s: " + NamesText(train_classes) +
                                 "); read as classes, the classes are " + NamesText(top) + "; " + doubt +
                                 ". Say which with --layout splits or --layout classes");
}

namespace {

// " (kg/train.csv beside it?)": the CSV files in `dir` and beside it (the
// first three), which may label its images; "" for none.
std::string TablesNear(const fs::path& dir) {
  std::vector<std::string> tables;
  for (const fs::path& where : {dir, dir.parent_path().empty() ? fs::path(".") : dir.parent_path()}) {
    std::error_code ec;
    for (fs::directory_iterator it(where, ec), end; !ec && it != end; it.increment(ec)) {
      if (LowerExtension(it->path()) == ".csv" && it->is_regular_file(ec)) tables.push_back(it->path().string());
    }
  }
  std::sort(tables.begin(), tables.end());
  if (tables.empty()) return "";
  std::string text;
  for (size_t i = 0; i < tables.size() && i < 3; ++i) text += (i == 0 ? "" : ", ") + tables[i];
  return " (" + text + (tables.size() > 3 ? ", ..." : "") + " beside it?)";
}

}  // namespace

Status FindSplitRoots(const fs::path& raw, const std::vector<std::string>& top, FolderLayout layout,
                      std::vector<SplitRoot>* split_roots, std::vector<std::string>* classes) {
  if (layout == FolderLayout::kSplits) {
    std::vector<std::string> split_folders, unlabelled;
    for (const std::string& name : top) {
      if (!SplitOfFolder(name).empty()) split_folders.push_back(name);
    }
    const std::map<std::string, std::string> tables = TableLabelledSplits(raw, split_folders, &unlabelled);
    for (const char* split : {"train", "val", "test"}) {
      const std::string folder = FolderOfSplit(split_folders, split);
      if (folder.empty() || std::find(unlabelled.begin(), unlabelled.end(), folder) != unlabelled.end()) continue;
      const auto table = tables.find(folder);
      split_roots->push_back({split, raw / folder, table == tables.end() ? "" : table->second});
    }
  } else {
    split_roots->push_back({"train", raw});
  }
  const fs::path& train = (*split_roots)[0].root;
  *classes = SortedSubdirs(train);
  if (classes->empty()) {
    const std::vector<std::string> images = LooseImages(train);
    const size_t loose = images.size();
    const std::string said = NamesSayClasses(images);
    return Status::NotFound(
        raw.string() + ": " + (loose > 0 ? std::to_string(loose) + " image(s) but " : "") +
        "no class folders (expected " + train.string() + "/<class>/*.jpg|jpeg|png|webp, as torchvision's ImageFolder" +
        (loose > 0 ? " reads labelled images;" + (said.empty() ? "" : " " + said + ": --label-from-name;") +
                         " images labelled by a table, as Kaggle ships them: --labels TABLE" +
                         TablesNear(raw) + "; images without labels are written by granary.write (README, \"Any "
                         "dataset from Python\"))"
                   : ")"));
  }
  for (size_t s = 1; s < split_roots->size(); ++s) {
    if (!(*split_roots)[s].labels.empty()) continue;  // its images are labelled by its table
    for (const std::string& c : SortedSubdirs((*split_roots)[s].root)) {
      if (std::find(classes->begin(), classes->end(), c) == classes->end()) {
        return Status::InvalidArgument(((*split_roots)[s].root / c).string() + ": class '" + c +
                                       "' does not appear in " + train.string());
      }
    }
  }
  return Status::OK();
}

namespace {

// The folder below `dir` that holds its class folders, past folders that hold
// one folder and nothing else (Intel's seg_train/seg_train/<class>/), and
// those class folders: the ones holding images.
std::pair<fs::path, std::vector<std::string>> ClassFoldersBelow(fs::path dir) {
  std::vector<std::string> subs = SortedSubdirs(dir);
  for (int depth = 0; subs.size() == 1 && LooseImages(dir).empty() && depth < 4; ++depth) {
    dir /= subs[0];
    subs = SortedSubdirs(dir);
  }
  std::vector<std::string> classes;
  for (const std::string& sub : subs) {
    if (HoldsImages(dir / sub)) classes.push_back(sub);
  }
  return {dir, classes};
}

// The split a folder's name says by a word of it (seg_train: train), else "".
std::string SplitWordIn(const std::string& name) {
  std::string word;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && std::isalnum(static_cast<unsigned char>(name[i]))) {
      word += name[i];
      continue;
    }
    if (const std::string split = SplitOfFolder(word); !split.empty()) return split;
    word.clear();
  }
  return "";
}

}  // namespace

namespace {

bool IsMaskFolder(const std::string& name) {
  const std::string n = AsciiLower(name);
  return n == "mask" || n == "masks" || n == "segmentation" || n == "segmentations" || n == "gt" ||
         n == "groundtruth" || n == "ground_truth";
}

// The shell lines that make a folder beside the working directory, RAW's
// name + `suffix`, of links to `targets` (each a folder and the name it
// takes there), then build from it: "mkdir F && ln -s ... && prep build F DB".
std::string LinksAndBuild(const fs::path& raw, const std::string& suffix,
                          const std::vector<std::pair<fs::path, std::string>>& targets) {
  fs::path named = raw.lexically_normal();
  if (named.filename().empty()) named = named.parent_path();  // RAW/ as RAW
  const std::string links = (named.filename().empty() ? std::string("raw") : named.filename().string()) + suffix;
  std::string commands = "mkdir " + links;
  for (const auto& [target, name] : targets) {
    commands += " && ln -s " + fs::absolute(target).lexically_normal().string() + " " + links + "/" + name;
  }
  return commands + " && prep build " + links + " DB";
}

// Each class folder's images/ beside masks/ (the COVID-19 radiography
// download: COVID/{images,masks}/): what to say of it, with the links that
// leave the masks out.
std::string MasksBesideImages(const fs::path& raw, const std::vector<std::string>& alike,
                              const std::vector<std::string>& shared) {
  std::vector<std::string> masks, images;
  for (const std::string& name : shared) (IsMaskFolder(name) ? masks : images).push_back(name);
  std::string said = NamesText(alike, "/") + " each hold " + NamesText(masks, "/") + " beside " +
                     NamesText(images, "/") + ": segmentation masks? Read as class folders, as torchvision's "
                     "ImageFolder would, every image below a class folder is a sample of it, the masks too";
  if (images.size() != 1) return said + "; --layout classes reads them so";
  std::vector<std::pair<fs::path, std::string>> targets;
  for (const std::string& c : alike) targets.emplace_back(raw / c / images[0], c);
  return said + ". To leave them out, build from a folder of each class's " + images[0] + "/: " +
         LinksAndBuild(raw, "-" + images[0], targets) + "; --layout classes reads them all as samples";
}

}  // namespace

std::string SplitsNamedOtherwise(const fs::path& raw, const std::vector<std::string>& classes, bool* refused) {
  std::vector<std::pair<std::string, std::pair<fs::path, std::vector<std::string>>>> below;
  for (const std::string& c : classes) below.emplace_back(c, ClassFoldersBelow(raw / c));
  std::vector<std::string> alike, shared;
  for (size_t i = 0; i < below.size(); ++i) {
    for (size_t j = 0; j < below.size(); ++j) {
      std::vector<std::string> both;
      std::set_intersection(below[i].second.second.begin(), below[i].second.second.end(),
                            below[j].second.second.begin(), below[j].second.second.end(), std::back_inserter(both));
      if (i == j || both.size() < 2) continue;
      alike.push_back(below[i].first);
      if (shared.empty()) shared = both;
      break;
    }
  }
  if (alike.size() < 2) return "";
  if (std::any_of(shared.begin(), shared.end(), IsMaskFolder)) {
    *refused = true;
    return MasksBesideImages(raw, alike, shared);
  }
  *refused = std::any_of(alike.begin(), alike.end(), [](const std::string& f) { return !SplitWordIn(f).empty(); });
  std::set<std::string> free = {"train", "val", "test"};  // for folders whose names say no split, in this order
  for (const std::string& folder : alike) free.erase(SplitWordIn(folder));
  std::vector<std::pair<fs::path, std::string>> targets;
  for (const auto& [folder, holding] : below) {
    if (std::find(alike.begin(), alike.end(), folder) == alike.end()) continue;
    std::string split = SplitWordIn(folder);
    for (const char* name : {"train", "val", "test"}) {
      if (split.empty() && free.erase(name) > 0) split = name;
    }
    targets.emplace_back(holding.first, split.empty() ? folder : split);
  }
  return NamesText(alike, "/") + " hold the same folders (" + NamesText(shared) + "): read as class folders, as "
         "torchvision's ImageFolder would, an image's class is the folder it lies in (" + NamesText(classes) +
         "), not " + NamesText(shared) + ". If they are splits, build from a folder that names them so: " +
         LinksAndBuild(raw, "-splits", targets) + " (split folders are train, val, test)" +
         (*refused ? "; --layout classes reads them as classes" : "");
}

// Notes on what RAW holds that is no class or split: hidden folders, granary
// dbs, and (classes layout) images outside any class folder.
void NoteTopFolders(const fs::path& raw, const std::vector<std::string>& hidden, const std::vector<std::string>& dbs,
                    FolderLayout layout, std::vector<std::string>* notes) {
  if (!hidden.empty()) {
    notes->push_back("skipped hidden or system folder(s) " + NamesText(hidden, "/") +
                     " (torchvision's ImageFolder would make each a class, shifting the labels after it)");
  }
  if (!dbs.empty()) notes->push_back("skipped granary db(s) " + NamesText(dbs, "/") + " inside the raw folder");
  if (layout == FolderLayout::kClasses) {
    if (std::vector<std::string> loose = LooseImages(raw); !loose.empty()) {
      notes->push_back("left out " + std::to_string(loose.size()) + " image(s) outside any class folder: " +
                       NamesText(loose));
    }
  }
}

}  // namespace granary
