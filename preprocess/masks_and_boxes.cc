#include "preprocess/masks_and_boxes.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "preprocess/csv_layout.h"
#include "preprocess/csv_table.h"
#include "preprocess/folder_layout.h"

namespace granary {

namespace fs = std::filesystem;

namespace {

// `name`'s letters and digits in lower case: "JPEGImages" is "jpegimages",
// "train_masks" "trainmasks".
std::string Squeezed(const std::string& name) {
  std::string s;
  for (unsigned char c : name) {
    if (std::isalnum(c)) s += static_cast<char>(std::tolower(c));
  }
  return s;
}

bool EndsWith(const std::string& s, const char* end) {
  const size_t n = std::strlen(end);
  return s.size() >= n && s.compare(s.size() - n, n, end) == 0;
}

// Whether a folder's name says it holds a dataset's images: images/, VOC's
// JPEGImages/, Cityscapes' leftImg8bit/, ISIC's ..._Training_Input/, or a
// split's (Carvana's train/ beside train_masks/).
bool NamesImages(const std::string& name) {
  static const std::set<std::string> kNames = {"images", "image", "imgs", "img", "jpegimages", "pngimages",
                                               "leftimg8bit", "photos", "pictures", "input", "inputs", "rgb",
                                               "frames"};
  const std::string s = Squeezed(name);
  if (kNames.count(s) > 0 || !SplitOfFolder(s).empty()) return true;
  return EndsWith(s, "images") || EndsWith(s, "imgs") || EndsWith(s, "input");
}

// Whether a folder's name says it holds masks or boxes: masks/, gt/,
// labels/, annotations/, VOC's SegmentationClass/, the Oxford pets'
// trimaps/, Cityscapes' gtFine/, ISIC's ..._GroundTruth/, Carvana's
// train_masks/; not a class of faces named mask/, with_mask/ or no_mask/
// (which has no folder of images beside it: NamesImages).
bool NamesMasksOrBoxes(const std::string& name) {
  static const std::set<std::string> kNames = {
      "mask",  "masks",  "gt",         "groundtruth", "segmentation", "segmentations", "segmentationclass",
      "segmentationclassaug", "segmentationobject", "trimap", "trimaps", "label", "labels", "annotation",
      "annotations", "seg",   "segs",   "semantic"};
  const std::string s = Squeezed(name);
  if (kNames.count(s) > 0 || EndsWith(s, "groundtruth")) return true;
  if (name.size() > 2 && s.compare(0, 2, "gt") == 0 &&
      (std::isupper(static_cast<unsigned char>(name[2])) || name[2] == '_' || name[2] == '-')) {
    return true;  // gtFine, gt_coarse
  }
  for (const char* end : {"masks", "mask", "labels", "annotations"}) {
    if (EndsWith(s, end) && s.size() > std::strlen(end) && NamesImages(s.substr(0, s.size() - std::strlen(end)))) {
      return true;
    }
  }
  return false;
}

// A name without its last part after '_', '-', '.' or ' ' ("car0_01_mask":
// "car0_01"); "" where it has none.
std::string LessLastPart(const std::string& stem) {
  const size_t cut = stem.find_last_of("_-. ");
  return cut == std::string::npos || cut == 0 ? "" : stem.substr(0, cut);
}

// The same, where the last part is a word ("_mask", "_leftImg8bit"), not a
// number: "cat_1" and "cat_2" are two images, not an image and its mask.
std::string LessLastWord(const std::string& stem) {
  const std::string less = LessLastPart(stem);
  const size_t word = less.size() + 1;
  const bool letter = !less.empty() && std::any_of(stem.begin() + word, stem.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c));
  });
  return letter ? less : "";
}

// A path relative to RAW in its parts: its folders, its name without its
// extension, and that extension (in lower case).
struct PathParts {
  std::vector<std::string> dirs;
  std::string stem, extension;
  std::string Folder(size_t depth) const {  // its first `depth` folders, joined
    std::string joined;
    for (size_t i = 0; i < depth && i < dirs.size(); ++i) joined += (i == 0 ? "" : "/") + dirs[i];
    return joined;
  }
};

PathParts PartsOf(const std::string& relative) {
  PathParts parts;
  size_t start = 0;
  for (size_t slash; (slash = relative.find('/', start)) != std::string::npos; start = slash + 1) {
    if (slash > start) parts.dirs.push_back(relative.substr(start, slash - start));
  }
  const std::string name = relative.substr(start);
  const size_t dot = name.rfind('.');
  parts.stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  parts.extension = parts.stem.size() == name.size() ? "" : AsciiLower(name.substr(dot));
  return parts;
}

// Whether a name less its last part is the rest of it ("x_mask": "x").
bool EndsInMaskWord(const std::string& stem, const std::string& less) {
  static const std::set<std::string> kMaskWords = {"mask", "masks", "seg", "segmentation", "gt", "label"};
  return !less.empty() && kMaskWords.count(AsciiLower(stem.substr(less.size() + 1))) > 0;
}

// Whether any of `images` and `others` can be a mask or a box: one in a
// folder named for them, an image named as a mask ("x_mask.png"), or a
// .txt, .xml, .json or .csv file. (A folder of classes has none: one pass
// over the names, no more.)
bool AnyMasksOrBoxes(const std::vector<std::string>& images, const std::vector<std::string>& others) {
  std::set<std::string_view> folders;
  for (const std::vector<std::string>* files : {&images, &others}) {
    for (const std::string& file : *files) {
      const size_t slash = file.rfind('/');
      const size_t start = slash == std::string::npos ? 0 : slash + 1;
      folders.insert(std::string_view(file).substr(0, start == 0 ? 0 : slash));
      const size_t dot = file.rfind('.');
      const std::string stem = file.substr(start, dot == std::string::npos || dot < start ? std::string::npos
                                                                                          : dot - start);
      if (EndsInMaskWord(stem, LessLastPart(stem))) return true;
    }
  }
  for (const std::string& file : others) {
    const std::string extension = LowerExtension(file);
    if (extension == ".txt" || extension == ".xml" || extension == ".json" || extension == ".csv") return true;
  }
  for (std::string_view folder : folders) {
    const std::vector<std::string> dirs = PartsOf(std::string(folder) + "/x").dirs;
    if (std::any_of(dirs.begin(), dirs.end(), NamesMasksOrBoxes)) return true;
  }
  return false;
}

enum class Labels { kNone, kMasks, kYolo, kVoc, kJson };

// Whether `text` starts (past blank lines) with a line of YOLO's: a class
// number and four or more coordinates (a box, or a polygon's points).
bool StartsYolo(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  do {
    if (!std::getline(lines, line)) return false;
  } while (line.find_first_not_of(" \t\r") == std::string::npos);
  std::istringstream fields(line);
  long long class_id = -1;
  if (!(fields >> class_id) || class_id < 0) return false;
  int coordinates = 0;
  for (double v; fields >> v;) ++coordinates;
  return fields.eof() && coordinates >= 4;
}

// What the file at `path` labels its image with, by its extension and first bytes.
Labels LabelsIn(const fs::path& path, const std::string& extension) {
  if (HasImageExtension(path) || HasOtherImageExtension(path)) return Labels::kMasks;
  if (extension == ".txt") return StartsYolo(PeekText(path.string(), 4096)) ? Labels::kYolo : Labels::kNone;
  if (extension == ".xml") {
    const std::string text = PeekText(path.string(), 16384);
    return text.find("<bndbox") != std::string::npos || text.find("<polygon") != std::string::npos
               ? Labels::kVoc : Labels::kNone;
  }
  if (extension == ".json") {
    const std::string text = PeekText(path.string(), 65536);
    return text.find("\"shapes\"") != std::string::npos || text.find("\"bbox\"") != std::string::npos
               ? Labels::kJson : Labels::kNone;
  }
  return Labels::kNone;
}

// The label files of one folder (masks/, labels/) or those beside a
// folder's images, and which of them name an image.
struct Group {
  size_t files = 0;
  std::vector<std::pair<std::string, std::string>> paired;  // (label file, its image), the first few
  size_t pairs = 0;
};

// Where RAW's images are, by the folder holding them and their names: an
// image's name, and that name less its last word ("aachen_000000_000019"
// of Cityscapes' "..._leftImg8bit"), under each folder named for images
// that holds it ("leftImg8bit/train/aachen/x.png" under "" + leftImg8bit);
// and each image's name in its own folder ("=" + folder).
std::unordered_map<std::string, std::string> ImageKeys(const std::vector<std::string>& images) {
  std::unordered_map<std::string, std::string> keys;
  for (const std::string& image : images) {
    const PathParts parts = PartsOf(image);
    keys.emplace("=" + parts.Folder(parts.dirs.size()) + "\n" + parts.stem, image);
    if (std::any_of(parts.dirs.begin(), parts.dirs.end(), NamesMasksOrBoxes)) continue;
    for (size_t d = 0; d < parts.dirs.size(); ++d) {
      if (!NamesImages(parts.dirs[d])) continue;
      keys.emplace(parts.Folder(d) + "\n" + parts.stem, image);
      const std::string less = LessLastWord(parts.stem);
      if (!less.empty()) keys.emplace(parts.Folder(d) + "\n" + less, image);
    }
  }
  return keys;
}

// The image `file` (parts) labels, where its name says one: in a folder named
// for masks or boxes, the image of its name (or its name less a last part or
// two: "car0_01_mask", "x_gtFine_labelIds") in a folder named for images
// beside it; or, beside the images, a .txt, .xml or .json file of an image's
// name, or an image of an image's name and "_mask". Its group into *group.
std::string ImageOf(const PathParts& parts, const std::unordered_map<std::string, std::string>& keys,
                    std::string* group) {
  const bool image = HasImageExtension("x" + parts.extension) || HasOtherImageExtension("x" + parts.extension);
  for (size_t d = 0; d < parts.dirs.size(); ++d) {
    if (!NamesMasksOrBoxes(parts.dirs[d])) continue;
    *group = parts.Folder(d + 1) + "/" + (image ? std::string("*") : parts.extension);
    std::string stem = parts.stem;
    for (int cut = 0; cut < 3 && !stem.empty(); ++cut, stem = LessLastWord(stem)) {
      if (const auto it = keys.find(parts.Folder(d) + "\n" + stem); it != keys.end()) return it->second;
    }
    return "";
  }
  const std::string folder = parts.Folder(parts.dirs.size());
  std::string stem = parts.stem;
  if (image) {
    const std::string less = LessLastPart(stem);
    if (!EndsInMaskWord(stem, less)) return "";
    stem = less;
  } else if (parts.extension != ".txt" && parts.extension != ".xml" && parts.extension != ".json") {
    return "";
  }
  *group = "=" + folder + "/" + (image ? std::string("*") : parts.extension);
  const auto it = keys.find("=" + folder + "\n" + stem);
  return it == keys.end() ? "" : it->second;
}

// "a segmentation dataset: masks/ holds masks of the images in images/ (5 of
// its 5 by name: masks/0.png of images/0.jpg)": what `group` (g) holds, of
// `kind` (not kNone), with `file` and its `image` as the example.
std::string Said(Labels kind, const std::string& group, const Group& g, const std::string& file,
                 const std::string& image) {
  const bool beside = group[0] == '=';
  std::string folder = group.substr(beside ? 1 : 0, group.rfind('/') - (beside ? 1 : 0));
  if (folder.empty()) folder = "RAW";
  const std::string holds = folder + "/ holds ";
  std::string what;
  if (kind == Labels::kMasks) what = "a segmentation dataset: " + holds + "masks of";
  if (kind == Labels::kYolo) what = "a detection dataset: " + holds + "YOLO boxes (a .txt file an image) of";
  if (kind == Labels::kVoc) what = "a detection dataset: " + holds + "Pascal VOC boxes (a .xml file an image) of";
  if (kind == Labels::kJson) {
    what = "a detection or segmentation dataset: " + holds + "shapes (a .json file an image) of";
  }
  const std::string images = PartsOf(image).Folder(PartsOf(image).dirs.size());
  return what + (beside ? " the images beside them" : " the images in " + (images.empty() ? "RAW" : images + "/")) +
         " (" + std::to_string(g.pairs) + " of its " + std::to_string(g.files) + " by name: " + file + " of " + image +
         ")";
}

// "train/_annotations.coco.json is a COCO annotation file" where one of
// `files` is (its images with their boxes or masks); "" otherwise.
std::string CocoFileIn(const fs::path& raw, const std::vector<std::string>& files) {
  int looked = 0;
  for (const std::string& file : files) {
    if (LowerExtension(file) != ".json" || ++looked > 16) continue;
    const std::string name = AsciiLower(fs::path(file).filename().string());
    const bool named = name.compare(0, 10, "instances_") == 0 || name.find("coco") != std::string::npos;
    const std::string text = PeekText((raw / file).string(), 65536);
    if (text.find("\"images\"") != std::string::npos &&
        (named || text.find("\"file_name\"") != std::string::npos)) {
      return "a detection or segmentation dataset: " + file + " is a COCO annotation file (its images' boxes, "
             "masks or captions by \"file_name\")";
    }
  }
  return "";
}

// "train/_annotations.csv is a table of boxes (its columns 'xmin', ...)"
// where one of `files` is (Roboflow's TensorFlow CSV export beside its
// images); "" otherwise.
std::string BoxTableIn(const fs::path& raw, const std::vector<std::string>& files) {
  int looked = 0;
  for (const std::string& file : files) {
    if (LowerExtension(file) != ".csv" || ++looked > 16) continue;
    const std::string boxes = BoxColumnsIn(PeekCsvHeader((raw / file).string(), 0));
    if (!boxes.empty()) return "a detection dataset: " + file + " is a table of boxes (its columns " + boxes + ")";
  }
  return "";
}

}  // namespace

std::string BoxColumnsIn(const std::vector<std::string>& header) {
  std::set<std::string> names;
  for (const std::string& name : header) names.insert(AsciiLower(TrimCsvField(name)));
  static const std::vector<std::vector<std::string>> kBoxes = {
      {"xmin", "ymin", "xmax", "ymax"}, {"x_min", "y_min", "x_max", "y_max"}, {"x1", "y1", "x2", "y2"},
      {"x", "y", "w", "h"},           {"x", "y", "width", "height"},        {"bbox"}, {"bbox_x", "bbox_y"}};
  for (const std::vector<std::string>& box : kBoxes) {
    if (std::all_of(box.begin(), box.end(), [&](const std::string& n) { return names.count(n) > 0; })) {
      std::string quoted;
      for (const std::string& n : box) quoted += (quoted.empty() ? "'" : ", '") + n + "'";
      return quoted;
    }
  }
  return "";
}

std::string MasksOrBoxesIn(const fs::path& raw, const std::vector<std::string>& images,
                           const std::vector<std::string>& others) {
  if (!AnyMasksOrBoxes(images, others)) return "";
  const std::unordered_map<std::string, std::string> keys = ImageKeys(images);
  std::vector<std::string> sorted = others;
  std::sort(sorted.begin(), sorted.end());
  std::map<std::string, Group> groups;
  const std::vector<std::string>* lists[] = {&images, &sorted};
  for (const std::vector<std::string>* files : lists) {
    for (const std::string& file : *files) {
      std::string group;
      const std::string image = ImageOf(PartsOf(file), keys, &group);
      if (group.empty()) continue;
      Group& g = groups[group];
      ++g.files;
      if (image.empty()) continue;
      ++g.pairs;
      if (g.paired.size() < 8) g.paired.emplace_back(file, image);
    }
  }
  for (const auto& [name, g] : groups) {
    if (g.pairs == 0 || 2 * g.pairs < g.files) continue;
    for (const auto& [file, image] : g.paired) {
      const Labels kind = LabelsIn(raw / file, LowerExtension(file));
      if (kind != Labels::kNone) return Said(kind, name, g, file, image);
    }
  }
  const std::string coco = CocoFileIn(raw, sorted);
  return coco.empty() ? BoxTableIn(raw, sorted) : coco;
}

}  // namespace granary
