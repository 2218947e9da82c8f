// Sources: raw datasets that `prep build` turns into dbs. A source lists its
// splits and produces each item's fields; Produce is called from many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "preprocess/image.h"
#include "store/schema.h"

namespace granary {

// One decoded sample: each schema field's bytes (little-endian, row-major) and,
// for variable-shape fields, its shape. Reused by a thread across items.
struct Sample {
  std::vector<std::string> fields;
  std::vector<Shape> shapes;
  // Only from SplitSource::ProduceStored: no fields, but a record that holds
  // this sample alone as a build without a dictionary would encode it
  // (copied from an old db by `--update`), with the sample's payload hash and
  // size. The build writes the record as it is, and decodes the fields only
  // where it needs them.
  bool fields_in_record = false;
  std::string stored_record;
  uint64_t stored_payload_hash = 0;
  uint64_t stored_payload_bytes = 0;
};

class SplitSource {
 public:
  virtual ~SplitSource() = default;
  virtual const std::string& name() const = 0;
  virtual uint64_t size() const = 0;
  // How a rejected item is named to the user: a file, "file:line" or "file[index]".
  virtual std::string ItemName(uint64_t index) const = 0;
  // The class of item `index` where the source knows it before producing
  // the item (an image's class folder or labels table row); -1 otherwise.
  virtual int64_t ItemLabel(uint64_t /*index*/) const { return -1; }
  // Fills *sample for item `index`. A non-OK status rejects this item only.
  // Thread-safe: called concurrently for different items.
  virtual Status Produce(uint64_t index, Sample* sample) const = 0;
  // As Produce, but the sample may come as a stored record alone
  // (Sample::fields_in_record), for a build that uses such records as they
  // are (one without a dictionary).
  virtual Status ProduceStored(uint64_t index, Sample* sample) const { return Produce(index, sample); }
  // Bytes of raw input this split came from (for the ratio in the summary).
  virtual uint64_t raw_bytes() const = 0;
};

// A file a source reads, as it is now: what `prep build` compares with a
// db's record of its inputs (preprocess/inputs.h) to say it is up to date.
struct InputFile {
  std::string path;  // as the source names it: relative to RAW for an image folder's images
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

// What the manifest says about a source.
struct SourceInfo {
  std::string kind;  // "idx"
  std::string path;
  Schema schema;
  std::string label_field;
  int64_t num_classes = 0;
  std::vector<std::string> class_names;
  // Field -> the name of each of its elements, where they have names (a CSV
  // table's features: its columns).
  std::map<std::string, std::vector<std::string>> element_names;
  // Things the user should know that are not errors (e.g. ignored files).
  std::vector<std::string> notes;
  // How the raw data was read (OpenSource's options that apply to its kind),
  // recorded in the manifest's build options.
  std::map<std::string, std::string> options;
  // The files read, sorted by path; empty: every file directly in `path`
  // (or `path` itself) is taken as an input. When `items_are_files`, each
  // item's name is its input file's path, and `prep build --update` reuses
  // the items whose file did not change.
  std::vector<InputFile> inputs;
  bool items_are_files = false;
};

struct Source {
  SourceInfo info;
  std::vector<std::unique_ptr<SplitSource>> splits;
  // What producing the items found that the user should know (every image
  // was gray, or smaller than the size it was enlarged to), asked once every
  // split is written; null where a source has nothing of the kind.
  std::function<std::vector<std::string>()> produced_notes;
};

// A db whose encoding a build takes (prep build --like DB, preprocess/
// like_db.h), so that a held-out table or folder is read as the model
// trained on that db reads: its classes in their order, and the names of its
// features (a table's columns and one-hot categories, "colour=red").
struct LikeDb {
  std::string path;   // "": no --like
  std::string named;  // how messages name it: "--like tr.db"
  std::string content_hash;
  std::vector<std::string> class_names;
  std::vector<std::string> feature_names;  // a table's: element_names["features"]
};

struct IdxSourceOptions {
  // Use only the first `limit` items of each split (0: all).
  uint64_t limit = 0;
  // Overrides the class names ("0".."N-1" by default).
  std::vector<std::string> class_names;
};

// How an image folder's top folders are read (OpenImageFolderSource):
// decided from the folder, or as the user says with --layout.
enum class FolderLayout {
  kAuto,     // splits if that reading takes every image and is unambiguous, else classes
  kClasses,  // RAW/<class>/**: every top folder a class, as torchvision's ImageFolder
  kSplits,   // RAW/train/<class>/** with RAW/val|validation|test/<class>/** beside it
};

struct ImageFolderOptions {
  FolderLayout layout = FolderLayout::kAuto;
  int width = 64;
  int height = 64;
  int channels = 3;
  // Without train/ and val|test/ subfolders, this fraction of the images
  // (chosen by a hash of their path) becomes split "val".
  double val_fraction = 0;
  uint64_t limit = 0;  // N images of each split, every class its share (0: all)
  uint64_t max_decode_bytes = kDefaultMaxDecodeBytes;  // an image needing more to decode is rejected
  // A table of labels (preprocess/image_labels.h): every image below the
  // folder, whatever its folder, is labelled by its row (--labels), its label
  // column `label_column` where given.
  std::string labels;
  std::string label_column;
  std::string temp_dir = "/tmp";  // where a compressed labels table is decompressed (prep's $TMPDIR)
  // Every image below the folder labelled by its file name without its
  // number (--label-from-name: Kaggle's dogs-vs-cats cat.0.jpg, the Oxford
  // pets' Abyssinian_100.jpg; folder_layout.h's ClassFromName).
  bool label_from_name = false;
  bool show_progress = false;  // a line counting the files while a large folder is walked
  // --like: the classes are that db's, in its order (a class folder that is
  // none of them is refused; one of them without a folder has no images).
  LikeDb like;
};

// An image folder as torchvision's ImageFolder reads it: RAW/<class>/**/*.jpg,
// .jpeg, .png or .webp (images of other formats are left out, and noted),
// or RAW/train/<class>/... with RAW/val/ (or validation/) or
// RAW/test/ beside it; which of the two is decided from the whole folder
// (FolderLayout), an ambiguous folder refused naming both readings.
// Classes are the sorted folder names of the train split. Hidden files and
// folders and granary dbs inside RAW are skipped, and noted. Fields: "image"
// (uint8 [height, width, channels], layout HWC) and "label" (int64).
// With `labels` (or `label_from_name`), every image below the folder is one
// split (train, or train and val with val_fraction), labelled by the table
// (or its name); an image no row names (or whose name is a number) is
// rejected, named.
StatusOr<Source> OpenImageFolderSource(const std::string& dir, const ImageFolderOptions& options);

// What a missing CSV value ("", NA, N/A, NaN, nan, null, NULL, ?) becomes:
// the row is rejected (default), or the value is stored as NaN or 0.
enum class MissingPolicy { kReject, kNaN, kZero };

struct CsvOptions {
  std::string label;  // the label column's header name; "": the one column named like a label (label, target, y, ...)
  char delimiter = 0;  // between fields; 0: from the header (',', else ';', tab or '|': DetectCsvDelimiter)
  MissingPolicy missing = MissingPolicy::kReject;
  double val_fraction = 0;  // single-file input: this fraction of rows becomes split "val"
  uint64_t limit = 0;
  std::vector<std::string> drop;  // columns left out of the features
  bool header = true;             // false: no header row; columns named "1", "2", ... (--no-header)
  std::string temp_dir = "/tmp";  // where a compressed table is decompressed (prep's $TMPDIR)
  bool regression = false;        // the label column is a number to predict: field "target", float32
  bool show_progress = false;     // a progress line while a large table is decompressed and scanned
  char decimal = 0;               // '.' or ','; 0: as the first table's first rows write numbers (DetectCsvDecimal)
  // --like: the features are that db's columns and categories, in its order
  // (csv_columns.h, PlanLike), and the classes its classes.
  LikeDb like;
};

// A CSV file (split "train"), or a folder with train.csv and optionally
// val.csv / test.csv (same header and delimiter). The label column and the
// delimiter, where not given, are found from the header and noted. Every
// column but the label and those in `drop` is a feature (preprocess/
// csv_columns.h: a number, or text one-hot encoded): field "features"
// (float32, its elements named in info.element_names) and "label" (int64),
// or, with `regression`, "target" (float32: the column's numbers; a row
// whose value is missing or no number is rejected, named).
// Labels that are all non-negative integers are class indices; otherwise the
// sorted distinct strings are the classes. A row with the wrong number of
// fields, a non-numeric value, a missing value (under kReject) or a missing
// label is rejected as "file:line". The files are streamed (preprocess/
// csv_table.h): opening reads each once for its rows and labels (a label
// column of over 100,000 distinct values is refused), and items are read back
// from the file as they are produced, so memory does not grow with the table;
// a file changed between the two readings is named.
StatusOr<Source> OpenCsvSource(const std::string& raw, const CsvOptions& options);

// Whether `text` (a file's first bytes) holds LIBSVM (svmlight) lines: a
// label, then index:value features ("-1 3:1 11:1 14:1"; a "#" comment after).
bool LooksLikeSvmlight(std::string_view text);

// What a compressed file at `path` whose first row read as a table is
// `header` holds where that is a LIBSVM line (found by LooksLikeSvmlight in
// plain text only): the command that decompresses it; "" otherwise.
std::string CompressedSvmlight(const std::string& path, const std::vector<std::string>& header);

// A LIBSVM (svmlight) file (split "train"; with val_fraction, "val" beside
// it): field "features" (float32, dense: its indices from 1, or from 0 where
// the file has a 0, up to the largest; with options.like, that db's) and
// "label" (int64: the labels as a CSV label column's are classes), or with
// `regression` "target" (float32). A line whose feature is no index:value,
// or an index outside the db's, is rejected as "file:line"; a line of
// several labels (multi-label) or a qid (ranking) is refused, as are the
// flags that name a table's columns (--label, --drop, --no-header). Streamed
// as OpenCsvSource streams a table; `limit`: the first rows of each split.
StatusOr<Source> OpenSvmlightSource(const std::string& path, const CsvOptions& options);

// An IDX dataset folder (see FindIdxDataset): fields "image" (uint8, the image
// file's dims after the first, with a leading channel dim of 1 for 2-D images)
// and "label" (int64). Errors name the file and what is wrong with it.
StatusOr<Source> OpenIdxSource(const std::string& dir, const IdxSourceOptions& options);

struct CifarSourceOptions {
  uint64_t limit = 0;                    // the first `limit` items of each split (0: all)
  std::string label;                     // CIFAR-100: "fine" (or "") or "coarse"
  std::vector<std::string> class_names;  // overrides the names file's
};

// A CIFAR-10 or CIFAR-100 folder in the binary version (preprocess/cifar.h):
// fields "image" (uint8 [3, 32, 32], CHW) and "label" (int64); splits train
// and test. A record whose label is out of range is rejected by name
// ("data_batch_3.bin[17]"). Errors name the file and what is wrong with it.
StatusOr<Source> OpenCifarSource(const std::string& dir, const CifarSourceOptions& options);

// How to read a raw dataset whatever its kind: `prep build`'s input options.
struct RawOptions {
  std::string raw;
  std::string db;                        // the db to build: named where a refusal says how to write it otherwise
  bool show_progress = false;            // csv: a progress line while a large table is read (prep on a terminal)
  std::string format = "auto";  // auto, idx, cifar, image-folder (or images), csv
  std::vector<std::string> class_names;  // idx, cifar: overrides "0".."N-1" (or CIFAR's names file)
  std::string size = "64";               // image-folder: "S" or "WxH"
  int channels = 3;                      // image-folder: 1 or 3
  uint64_t max_image_mb = kDefaultMaxDecodeBytes >> 20;  // image-folder: most memory one decode may take
  std::string layout = "auto";           // image-folder: auto, classes or splits
  double val_fraction = 0;               // image-folder and csv
  std::string label;                     // csv, and images' --labels table ("": the column named like a label);
                                         // CIFAR-100: fine or coarse
  std::string delimiter = "auto";        // csv: auto, ",", ";", "tab" (or "\t") or "|"
  std::string decimal = "auto";          // csv: auto, point or comma
  std::string missing = "reject";        // csv: reject, nan or zero
  std::vector<std::string> drop;         // csv: columns left out of the features
  bool no_header = false;                // csv: the first row is data; columns named 1..N
  std::string labels;                    // image-folder: a table of each image's label (--labels)
  bool label_from_name = false;          // image-folder: each image's label is its name without its number
  std::string temp_dir = "/tmp";         // csv and --labels: where a compressed table is decompressed
  bool regression = false;               // csv: the label column is a number to predict (--regression)
  uint64_t limit = 0;                    // N items of each split (0: all): a stratified subset of images and
                                         // CSV rows (preprocess/stratified.h), the first N of IDX files
  std::string like;                      // --like DB (preprocess/like_db.h)
  std::set<std::string> given;           // the flags given on the command line ("size", "label", ...)
};

// "auto" detection: a .csv file or a folder with train.csv is "csv", a folder
// with IDX files "idx", one with CIFAR's files "cifar", a folder with
// sub-folders "image-folder", else "idx".
std::string DetectFormat(const std::string& raw);

// --size as a build records it: "64" for 64 or 64x64, "96x64" for 96x64 or
// 96X64, so a db built with one spelling is up to date for the other; the
// text as it is if it is no size.
std::string RecordedSize(const std::string& size);

// Opens `options.raw` as the format it names (or detects), with the options
// that apply to that format, and records them in source.info.options.
// InvalidArgument naming the flag for a bad --size, --format or --missing.
StatusOr<Source> OpenSource(const RawOptions& options);

}  // namespace granary
