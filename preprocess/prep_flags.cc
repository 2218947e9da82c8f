#include "preprocess/prep_flags.h"

#include <cstdlib>

namespace granary {

void AddInputFlags(CLI::App* build, BuildArgs* args) {
  BuildArgs& b = *args;
  build->add_option("raw", b.raw.raw, "raw dataset: IDX folder (train-images-idx3-ubyte[.gz], ...), CIFAR-10/100 "
                                      "binary folder (data_batch_1.bin, ... or train.bin, test.bin), image folder "
                                      "(<class>/*.jpg|png, or train/<class>/... and val|test/<class>/...), or CSV "
                                      "(a .csv file, or a folder with train.csv [+ val.csv, test.csv]; gzip or zstd too: .csv.gz, .csv.zst)")
      ->required();
  build->add_option("db", b.db, "db directory to create")->required();
  build->add_option("--format", b.raw.format,
                    "raw format: auto, idx, cifar, image-folder (or images), webdataset, csv or svmlight (LIBSVM)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "idx", "cifar", "image-folder", "images", "csv"}));
  build->add_option("--like", b.raw.like,
                    "a db whose classes (in its order), table columns and one-hot categories, and sample options "
                    "(--label, --size, ...) the new db takes, so that a model trained on that db reads this one "
                    "(a held-out table or folder)");
  build->add_option("--label", b.raw.label,
                    "csv (and --labels' table): the label column (default: the one named label, target, y or class); "
                    "CIFAR-100: fine (default) or coarse");
  build->add_option("--delimiter", b.raw.delimiter,
                    "csv: between fields: auto (from the header), ',', ';', tab, '|' or whitespace (runs of spaces "
                    "and tabs)")
      ->capture_default_str();
  build->add_option("--decimal", b.raw.decimal,
                    "csv: numbers' decimal mark: auto (a comma where a table not separated by ',' writes its "
                    "numbers 1,5 and none 1.5, as spreadsheets save CSV in many locales), point or comma")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "point", "comma"}));
  build->add_option("--missing", b.raw.missing, "csv: a missing value rejects the row, or becomes nan or zero")
      ->capture_default_str()
      ->check(CLI::IsMember({"reject", "nan", "zero"}));
  build->add_option("--drop", b.raw.drop,
                    "csv: columns to leave out of the features (comma-separated: an id, free text); a text column "
                    "is otherwise one-hot encoded")
      ->delimiter(',')
      ->allow_extra_args(false);  // --drop a,b RAW DB: RAW is no column
  build->add_flag("--regression", b.raw.regression,
                  "csv: the label column is a number to predict (a price, a count), stored as float32 field "
                  "'target', not classes; train fits it with mean squared error");
  build->add_flag("--no-header", b.raw.no_header,
                  "csv: the first row is data, not column names (columns are then named 1, 2, ...: --label 5)");
  build->add_option("--labels", b.raw.labels,
                    "images: a table (CSV) of each image's label, as Kaggle ships train/ beside train_labels.csv: "
                    "a column naming the image (path, file name or name without extension) and --label's column "
                    "(default: the one named like a label, or the second of two)");
  build->add_flag("--label-from-name", b.raw.label_from_name,
                  "images: each image's class is its file name without its number (cat.0.jpg, cat.1.jpg: 'cat'; "
                  "Abyssinian_100.jpg: 'Abyssinian'), for folders without class folders");
  build->add_option("--size", b.raw.size, "images: stored size S (square) or WxH; short side resized, centre crop")
      ->capture_default_str();
  build->add_option("--max-image-mb", b.raw.max_image_mb,
                    "images: reject an image whose decode would take more memory than this (MiB; by its header)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  build->add_option("--layout", b.raw.layout,
                    "images: auto (decided from the folder), classes (RAW/<class>/...) or splits "
                    "(RAW/train/<class>/... beside val|validation|test/)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "classes", "splits"}));
  build->add_option("--channels", b.raw.channels, "images: 3 (RGB) or 1 (gray)")->capture_default_str()->check(
      CLI::IsMember({1, 3}));
  build->add_option("--val-fraction", b.raw.val_fraction,
                    "this fraction of the train images or rows becomes split 'val' (where RAW has no val/ or val.csv)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
}

void AddOutputFlags(CLI::App* build, int cores, BuildArgs* args) {
  BuildArgs& b = *args;
  build->add_option("--threads", b.options.threads, "worker threads (0: all cores)")->capture_default_str()->check(
      CLI::Range(0, 4 * cores));
  build->add_option("--shards", b.options.shards, "LMDB shards per split")->capture_default_str()->check(
      CLI::Range(1, 4096));
  build->add_option("--max-shard-mb", b.options.max_shard_mb,
                    "largest a shard file may grow, MiB (0: no limit); a split needing more fails, asking for --shards")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30))
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {  // a shard keeps 1 MiB of room beyond its records
            return value == "0" || std::strtoull(value.c_str(), nullptr, 10) >= 2 ? ""
                                                                                   : "must be 0 (no limit) or at least 2";
          },
          "0|>=2"));
  build->add_option("--zstd-level", b.options.zstd_level, "zstd level, 0 for none")->capture_default_str()->check(
      CLI::Range(0, 22));
  build->add_option("--dictionary", b.dictionary, "zstd dictionary: auto (for small records), on or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  build->add_option("--block-bytes", b.options.block_bytes,
                    "pack consecutive small samples into records of about this size (0: two LMDB pages)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  build->add_option("--limit", b.raw.limit,
                    "use only N items of each split (0: all): every class its share of images and CSV rows, "
                    "the first N of IDX files")
      ->capture_default_str()
      ->check(kNonNegative);
  build->add_option("--class-names", b.class_names, "comma-separated class names, in label order");
  build->add_option("--on-error", b.on_error, "skip (count and list rejects) or fail")
      ->capture_default_str()
      ->check(CLI::IsMember({"skip", "fail"}));
  build->add_option("--max-rejects", b.max_rejects, "fail if more than this fraction of a split is rejected")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  build->add_flag("--force", b.options.overwrite, "replace an existing db");
  build->add_flag("--update", b.update,
                  "bring an existing db up to date with RAW: unchanged items are copied from it, not decoded");
  build->add_flag("--resume", b.options.resume, "continue an interrupted build of DB (same RAW and options)");
  build->add_flag("--json", b.json, "print the summary as JSON on stdout");
  build->add_flag("--no-progress", b.no_progress, "no progress line even on a terminal");
}

}  // namespace granary
