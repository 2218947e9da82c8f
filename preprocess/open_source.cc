// OpenSource: `prep build`'s choice of source (detected or named) and its options.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "base/names_text.h"
#include "preprocess/cifar.h"
#include "preprocess/csv_table.h"
#include "preprocess/folder_layout.h"
#include "preprocess/like_db.h"
#include "preprocess/numpy_files.h"
#include "preprocess/other_media.h"
#include "preprocess/source.h"
#include "preprocess/webdataset.h"
#include "store/db.h"
#include "store/db_writer.h"

namespace granary {
namespace {

// "64" or "96x64" (width x height), each in 1..8192.
bool ParseSize(const std::string& text, int* width, int* height) {
  char x = 0, extra = 0;
  int w = 0, h = 0;
  int n = std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &extra);
  if (n == 1) h = w;
  if (!((n == 1) || (n == 3 && (x == 'x' || x == 'X'))) || w < 1 || h < 1 || w > 8192 || h > 8192) return false;
  *width = w;
  *height = h;
  return true;
}

// The format of the folder `dir` where it is a dataset of a format other
// than image folders, as DetectFormat decides it: "csv" (a train.csv[.gz|.zst]),
// "cifar" or "idx" (IDX files); "" otherwise.
std::string DatasetFormatIn(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* extension : kCsvFolderExtensions) {
    if (fs::is_regular_file(dir / (std::string("train") + extension), ec)) return "csv";
  }
  if (LooksLikeCifar(dir.string())) return "cifar";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().find("-ubyte") != std::string::npos) return "idx";
  }
  return "";
}

// "its folder RAW/x/raw holds an IDX dataset: build from that (prep build
// RAW/x/raw DB)" where a folder below `raw` (three levels down, as
// torchvision's root/FashionMNIST/raw/ is two) holds a dataset another
// format reads; the first few where several do; "" where none does.
std::string DatasetBelow(const std::string& raw) {
  namespace fs = std::filesystem;
  std::vector<std::pair<fs::path, int>> pending = {{fs::path(raw), 0}};
  std::vector<std::pair<std::string, std::string>> found;  // folder, what it holds
  for (size_t listed = 0; !pending.empty() && listed < 1000 && found.size() < 5; ++listed) {
    const auto [dir, depth] = pending.back();
    pending.pop_back();
    if (depth > 0) {
      if (const std::string format = DatasetFormatIn(dir); !format.empty()) {
        found.emplace_back(dir.string(), format == "csv" ? "a CSV dataset" : format == "cifar" ? "a CIFAR dataset"
                                                                                             : "an IDX dataset");
        continue;
      }
    }
    if (depth == 3) continue;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!IsHiddenOrSystem(e.path().filename().string()) && e.is_directory(ec)) {
        pending.emplace_back(e.path(), depth + 1);
      }
    }
  }
  if (found.empty()) return "";
  if (found.size() == 1) {
    return "its folder " + found[0].first + " holds " + found[0].second + ": build from that (prep build " +
           found[0].first + " DB)";
  }
  std::sort(found.begin(), found.end());
  std::string listed;
  for (size_t i = 0; i < found.size() && i < 4; ++i) {
    listed += (listed.empty() ? "" : ", ") + found[i].first + " (" + found[i].second + ")";
  }
  return "folders below it hold datasets: " + listed + (found.size() > 4 ? ", ..." : "") +
         ": build from one (prep build " + found[0].first + " DB)";
}

// "it holds train.jsonl, test.jsonl: tables prep does not read ..." where
// the folder `raw` holds files of a table format other than CSV; "" if none.
std::string OtherTables(const std::string& raw) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(raw, ec)) {
    if (e.is_regular_file(ec) && HasOtherTableExtension(e.path())) found.push_back(e.path().filename().string());
  }
  if (found.empty()) return "";
  std::sort(found.begin(), found.end());
  return "it holds " + NamesText(found) + ": tables of a format prep does not read (it reads CSV: a folder's "
         "train.csv, val.csv, test.csv, or one table by its path); convert them to CSV (pandas: "
         "df.to_csv('train.csv', index=False)), or write them from Python with granary.write";
}

}  // namespace

std::string RecordedSize(const std::string& size) {
  int width = 0, height = 0;
  if (!ParseSize(size, &width, &height)) return size;
  return width == height ? std::to_string(width) : std::to_string(width) + "x" + std::to_string(height);
}

std::string DetectFormat(const std::string& raw) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A file is a table (a.csv, A.CSV, data.txt: the CSV reader says what it finds); a folder with train.csv too.
  if (IsWebDataset(raw)) return "webdataset";  // a .tar of images, or a folder of them alone
  if (fs::is_regular_file(raw, ec)) return LooksLikeSvmlight(PeekText(raw, 64 << 10)) ? "svmlight" : "csv";
  if (const std::string format = DatasetFormatIn(raw); !format.empty()) return format;
  // A folder of folders, or of images alone (the image folder source says what it lacks), is an image folder.
  bool has_dirs = false, has_images = false;
  for (const auto& e : fs::directory_iterator(raw, ec)) {
    const std::string name = e.path().filename().string();
    has_dirs = has_dirs || (e.is_directory(ec) && !IsHiddenOrSystem(name));
    has_images = has_images || HasImageExtension(e.path()) || HasOtherImageExtension(e.path());
  }
  return has_dirs || has_images ? "image-folder" : "idx";
}

namespace {

// --label, --labels and --label-from-name where `format` takes them: a
// refusal naming the flag elsewhere, where it used to be ignored.
Status CheckLabelFlags(const RawOptions& o, const std::string& format) {
  if (o.label_from_name && (format != "image-folder" || !o.labels.empty())) {
    return Status::InvalidArgument(
        std::string("--label-from-name: labels a folder of images by their names; ") +
        (o.labels.empty() ? o.raw + " is read as " + format : "--labels labels them by a table"));
  }
  if (!o.labels.empty() && format != "image-folder") {
    return Status::InvalidArgument("--labels " + o.labels + ": labels a folder of images; " + o.raw + " is read as " +
                                   format + (format == "idx" ? " (--format images reads it as images)" : ""));
  }
  if (!o.label.empty() && o.labels.empty() && format == "image-folder") {
    return Status::InvalidArgument("--label " + o.label + ": names a column of a CSV table or of --labels' table; an "
                                   "image folder's labels are its class folders");
  }
  if (o.regression && format != "csv" && format != "svmlight") {
    return Status::InvalidArgument("--regression: reads a CSV table's label column as a number to predict; " + o.raw +
                                   " is read as " + format + ", whose labels are classes");
  }
  if (!o.label.empty() && format == "idx") {
    return Status::InvalidArgument("--label " + o.label + ": names a column of a CSV table (or picks CIFAR-100's "
                                   "fine or coarse label); an IDX dataset's labels are its labels files");
  }
  return Status::OK();
}

// Whether an image folder's layout was found to be class folders (not
// given with --layout, nor labelled by --labels or --label-from-name).
bool ClassFoldersAsFound(const RawOptions& o, const SourceInfo& info) {
  const auto layout = info.options.find("layout");
  return o.layout == "auto" && layout != info.options.end() && layout->second == "classes";
}

// "RAW: holds one folder, PetImages/, whose folders Cat/, Dog/ hold the
// images: ..." where an image folder read as classes has one class whose
// folder holds two or more folders of images (a download's folder given
// for its dataset's: Kaggle's kagglecatsanddogs/PetImages/{Cat,Dog}), or a
// train/ among split folders (chest_xray/chest_xray/{train,test,val}/); ""
// otherwise, or where --layout, --labels or --label-from-name was given.
std::string ClassesOneFolderDown(const RawOptions& o, const SourceInfo& info) {
  if (!ClassFoldersAsFound(o, info) || info.class_names.size() != 1) return "";
  const std::filesystem::path only = std::filesystem::path(o.raw) / info.class_names[0];
  std::vector<std::string> classes, splits;
  bool train = false;
  for (const std::string& sub : SortedSubdirs(only)) {
    if (!LooseImages(only / sub).empty()) classes.push_back(sub);
    const std::string split_of = SplitOfFolder(sub);
    if (!split_of.empty()) splits.push_back(sub);
    train = train || split_of == "train";
  }
  const bool split = classes.empty() && train;
  if (classes.size() < 2 && !split) return "";
  return o.raw + ": holds one folder, " + info.class_names[0] + "/, whose folders " +
         NamesText(split ? splits : classes, "/") +
         (split ? " are a dataset's splits" : " hold the images: they are the classes") + "; build from it (prep " +
         "build " + only.string() + " DB), or give --layout classes for one class of them all";
}

// Why RAW, which does not exist, was given so, where its spelling says: a
// URL, a '~' no shell expanded, spaces around it; "" otherwise.
std::string MissingRawHint(const std::string& raw) {
  const size_t scheme = raw.find("://");
  if (scheme != std::string::npos && scheme > 0 && scheme < 8) {
    const std::string name = raw.substr(0, scheme);
    const bool web = name == "http" || name == "https" || name == "ftp";
    return ": is a URL: prep reads local files and folders; download it first (" +
           (web ? "curl -LO " + raw : std::string("gsutil cp, aws s3 cp or the like")) +
           ") and build from what it holds";
  }
  if (raw.rfind("~/", 0) == 0) {
    return ": no such folder (a '~' no shell expanded, as inside quotes: $HOME" + raw.substr(1) + " is meant?)";
  }
  if (!raw.empty() && (std::isspace(static_cast<unsigned char>(raw.front())) ||
                       std::isspace(static_cast<unsigned char>(raw.back())))) {
    return ": no such folder (the name has a space at its start or end: pasted with it?)";
  }
  return "";
}

// "RAW: is a JPEG image: ..." where RAW is one image file; "" otherwise.
std::string OneImageHint(const std::string& raw) {
  if (!HasImageExtension(raw) && !HasOtherImageExtension(raw)) return "";
  return raw + ": is an image: prep builds a db from a folder of them (RAW/<class>/*.jpg); to use one image with a "
               "saved model, granary.load_image('" + raw + "', 'model.pt') reads it as the model takes it";
}

}  // namespace

namespace {

// The source of --format csv (or svmlight), with its flags parsed; what they were, into *recorded.
StatusOr<Source> OpenCsvFromFlags(const RawOptions& o, const LikeDb& like, bool svmlight,
                                  std::map<std::string, std::string>* recorded) {
  CsvOptions csv;
  csv.like = like;
  csv.label = o.label;
  if (o.delimiter == "tab" || o.delimiter == "\t") {
    csv.delimiter = '\t';
  } else if (o.delimiter == "whitespace" || o.delimiter == "space" || o.delimiter == " ") {
    csv.delimiter = kWhitespaceDelimiter;
  } else if (o.delimiter == "," || o.delimiter == ";" || o.delimiter == "|") {
    csv.delimiter = o.delimiter[0];
  } else if (o.delimiter != "auto") {
    return Status::InvalidArgument("--delimiter " + o.delimiter + ": expected auto, ',', ';', tab, '|' or whitespace");
  }
  if (o.decimal == "point" || o.decimal == "comma") {
    csv.decimal = o.decimal == "point" ? '.' : ',';
  } else if (o.decimal != "auto") {
    return Status::InvalidArgument("--decimal " + o.decimal + ": expected auto, point or comma");
  }
  if (o.missing == "reject") {
    csv.missing = MissingPolicy::kReject;
  } else if (o.missing == "nan") {
    csv.missing = MissingPolicy::kNaN;
  } else if (o.missing == "zero") {
    csv.missing = MissingPolicy::kZero;
  } else {
    return Status::InvalidArgument("--missing " + o.missing + ": expected reject, nan or zero");
  }
  csv.val_fraction = o.val_fraction;
  csv.limit = o.limit;
  csv.drop = o.drop;
  csv.header = !o.no_header;
  csv.temp_dir = o.temp_dir;
  csv.regression = o.regression;
  csv.show_progress = o.show_progress;
  if (o.no_header) (*recorded)["header"] = "no";
  if (o.regression) (*recorded)["regression"] = "yes";
  recorded->insert({{"label", o.label}, {"missing", o.missing}, {"val_fraction", std::to_string(o.val_fraction)}});
  return svmlight ? OpenSvmlightSource(o.raw, csv) : OpenCsvSource(o.raw, csv);
}

// The source of --format image-folder (or webdataset), with its flags parsed; what they were, into *recorded.
StatusOr<Source> OpenImagesFromFlags(const RawOptions& o, const LikeDb& like, bool webdataset,
                                     std::map<std::string, std::string>* recorded) {
  ImageFolderOptions images;
  images.like = like;
  if (!ParseSize(o.size, &images.width, &images.height)) {
    return Status::InvalidArgument("--size " + o.size + ": expected S or WxH (1..8192)");
  }
  images.channels = o.channels;
  if (o.layout == "classes") {
    images.layout = FolderLayout::kClasses;
  } else if (o.layout == "splits") {
    images.layout = FolderLayout::kSplits;
  } else if (o.layout != "auto") {
    return Status::InvalidArgument("--layout " + o.layout + ": expected auto, classes or splits");
  }
  images.val_fraction = o.val_fraction;
  images.limit = o.limit;
  images.max_decode_bytes = o.max_image_mb << 20;
  images.labels = o.labels;
  images.label_from_name = o.label_from_name;
  images.show_progress = o.show_progress;
  images.label_column = o.label;
  images.temp_dir = o.temp_dir;
  recorded->insert({{"size", RecordedSize(o.size)},
                    {"channels", std::to_string(o.channels)},
                    {"max_image_mb", std::to_string(o.max_image_mb)},
                    {"val_fraction", std::to_string(o.val_fraction)}});
  return webdataset ? OpenWebDatasetSource(o.raw, images) : OpenImageFolderSource(o.raw, images);
}

// The refusal of a RAW that is a granary db: what to do with it instead.
std::string AlreadyADb(const std::string& raw) {
  StatusOr<std::unique_ptr<DbReader>> db = DbReader::Open(raw);
  const std::string from = db.ok() ? db.value()->manifest().source_path : "";
  return raw + ": is a granary db (what prep build makes" + (from.empty() ? "" : ", this one from " + from) +
         "), not raw data: train on it (train --db " + raw + "), or read it (prep info, granary.Loader)" +
         (from.empty() ? "" : "; to build it again, build from " + from);
}

// RAW's format as detected or given ("images" read as "image-folder"), or
// the refusal of a RAW that holds no dataset: an empty folder, a path
// spelt as no local one is, a NumPy file or one image.
StatusOr<std::string> FormatOf(const RawOptions& o) {
  std::error_code ec;
  if (std::filesystem::is_directory(o.raw, ec) && std::filesystem::is_empty(o.raw, ec)) {
    return Status::InvalidArgument(o.raw + ": the folder is empty (prep reads an IDX folder, a CIFAR folder, an "
                                   "image folder of <class>/ folders, or a CSV table)");
  }
  if (!std::filesystem::exists(o.raw, ec)) {
    if (const std::string hint = MissingRawHint(o.raw); !hint.empty()) return Status::NotFound(o.raw + hint);
  }
  if (IsGranaryDb(o.raw)) return Status::InvalidArgument(AlreadyADb(o.raw));
  const std::string format = o.format == "auto" ? DetectFormat(o.raw) : o.format;
  if (format == "csv" && std::filesystem::is_regular_file(o.raw, ec)) {  // a NumPy file or an image, not a table
    if (const std::string numpy = NumpyAdvice(o.raw, o.db); !numpy.empty()) return Status::InvalidArgument(numpy);
    if (const std::string image = OneImageHint(o.raw); !image.empty()) return Status::InvalidArgument(image);
  }
  return format == "images" ? std::string("image-folder") : format;
}

// Where a detected format's source failed: what RAW holds instead, where
// that can be told (text or audio, a dataset below it, NumPy files, tables
// of another format); the failure as it is otherwise.
Status NameWhatRawHolds(const RawOptions& o, const std::string& format, const Status& failed) {
  if (o.format == "auto" && format == "image-folder") {
    if (const std::string media = OtherMediaAdvice(o.raw, o.db); !media.empty()) return Status::InvalidArgument(media);
    if (const std::string below = DatasetBelow(o.raw); !below.empty()) {
      return Status::InvalidArgument(failed.message() + "; " + below);
    }
  }
  if (o.format == "auto" && format == "idx") {
    if (const std::string numpy = NumpyAdvice(o.raw, o.db); !numpy.empty()) return Status::InvalidArgument(numpy);
    if (const std::string tables = OtherTables(o.raw); !tables.empty()) {
      return Status::InvalidArgument(o.raw + ": " + tables);  // no IDX file either: it was never an IDX dataset
    }
  }
  return failed;
}

}  // namespace

StatusOr<Source> OpenSource(const RawOptions& given) {
  GRANARY_ASSIGN_OR_RETURN(const std::string format, FormatOf(given));
  RawOptions o = given;
  LikeDb like;
  if (!o.like.empty()) {
    if (!o.class_names.empty()) return Status::InvalidArgument("--class-names: --like " + o.like + " names them");
    GRANARY_ASSIGN_OR_RETURN(like, TakeLikeDb(format, &o));
    if (format == "idx" || format == "cifar") o.class_names = like.class_names;
  }
  std::map<std::string, std::string> recorded = {
      {"format", format}, {"limit", std::to_string(o.limit)}, {"like", like.content_hash}};
  GRANARY_RETURN_IF_ERROR(CheckLabelFlags(o, format));
  StatusOr<Source> source =
      Status::InvalidArgument("--format " + o.format + ": expected auto, idx, cifar, image-folder, webdataset, csv or "
                              "svmlight");
  if (format == "idx") {
    IdxSourceOptions idx;
    idx.limit = o.limit;
    idx.class_names = o.class_names;
    source = OpenIdxSource(o.raw, idx);
  } else if (format == "cifar") {
    CifarSourceOptions cifar;
    cifar.limit = o.limit;
    cifar.label = o.label;
    cifar.class_names = o.class_names;
    source = OpenCifarSource(o.raw, cifar);
  } else if (format == "csv" || format == "svmlight") {
    source = OpenCsvFromFlags(o, like, format == "svmlight", &recorded);
  } else if (format == "image-folder" || format == "webdataset") {
    source = OpenImagesFromFlags(o, like, format == "webdataset", &recorded);
  }
  if (!source.ok()) return NameWhatRawHolds(o, format, source.status());
  for (auto it = recorded.begin(); it != recorded.end();) {
    it = it->second.empty() ? recorded.erase(it) : std::next(it);
  }
  recorded.insert(source->info.options.begin(), source->info.options.end());  // what the source resolved
  source->info.options = std::move(recorded);
  if (const std::string below = ClassesOneFolderDown(o, source->info); !below.empty()) {
    return Status::InvalidArgument(below);
  }
  if (ClassFoldersAsFound(o, source->info)) {
    bool refused = false;
    const std::string splits = SplitsNamedOtherwise(o.raw, source->info.class_names, &refused);
    if (refused) return Status::InvalidArgument(o.raw + ": " + splits);
    if (!splits.empty()) source->info.notes.push_back(splits);
  }
  if (source->info.num_classes == 1 && source->info.class_names.size() == 1) {
    source->info.notes.push_back("every sample has the one class '" + source->info.class_names[0] + "' (" +
                                 (format == "image-folder" && o.labels.empty() && !o.label_from_name
                                      ? "one class folder" : "one label value") +
                                 "): a classifier needs two or more, and train refuses a db of one class");
  }
  return source;
}

}  // namespace granary
