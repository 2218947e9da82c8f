// A table of labels for a folder of images, as Kaggle ships them (train/ of
// images beside train_labels.csv: "id,label"), for prep build --labels: each
// row names an image (its path relative to the folder, its file name, or its
// file name without the extension, as the table writes it) and its class.
// Internal to preprocess (preprocess/image_folder_source.cc).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

// The classes a table's labels must name, where they are decided already: a
// split labelled beside train/'s class folders, or a build --like a db. Their
// names in label order, and whose they are, for messages ("train/'s",
// "--like tr.db's").
struct KnownClasses {
  std::vector<std::string> names;
  std::string whose;
};

class ImageLabels {
 public:
  // Reads the table at `path` as prep reads a CSV table (its delimiter from
  // the header; gzip or zstd too, decompressed into `temp_dir`), for the
  // folder of `images` (their paths in it, not empty). A table whose first
  // row names an image has no header: its columns are named 1..N. Its
  // label column is `label` where given, else the one named like a label
  // (label, target, class, y), else, of two columns, the second; its id
  // column the other one whose values name the most of the images in the
  // first 1,000 rows. Classes as a CSV table's labels are
  // (preprocess/class_labels.h: integers by value, else the sorted names; a
  // regression target refused), unless `classes` are given (a split
  // labelled by a table beside train/'s class folders; --like): then the
  // labels are their names, the label column (unless given, or named like a
  // label) the one holding the most of them, and a row naming another class
  // is refused. InvalidArgument naming the file: no such column, no column
  // naming the images, an id named twice with two labels, no rows. Rows
  // with another number of fields or no label are left out and noted.
  static StatusOr<ImageLabels> Read(const std::string& path, const std::string& label,
                                    const std::vector<std::string>& images, const std::string& temp_dir,
                                    const KnownClasses& classes = {});

  // The class of the image `name` (its path relative to the folder), by the
  // row naming its path, else its file name, else its stem; -1 if none does.
  // Marks that row used.
  int64_t ClassOf(const std::string& name);
  // Notes: which columns were read, rows left out, and rows naming no image
  // (after every image was looked up).
  std::vector<std::string> Notes() const;

  const std::string& label_column() const { return label_column_; }
  const std::vector<std::string>& class_names() const { return class_names_; }
  // "xxh64:..." of the table's bytes: a build records it, so a table edited
  // since is a build with other options.
  const std::string& content_hash() const { return content_hash_; }

 private:
  struct Row {
    int64_t label = 0;
    uint64_t line = 0;
    bool used = false;
  };
  // Each row's class (rows_, class_names_): `classes` by name where given,
  // else chosen from the label `values`.
  Status Classify(const std::map<std::string, std::pair<std::string, uint64_t>>& by_id,
                  const std::set<std::string>& values, const KnownClasses& classes);

  std::string path_, id_column_, label_column_, content_hash_;
  bool headerless_ = false;
  std::map<std::string, Row> rows_;  // by id as the table writes it
  std::vector<std::string> class_names_;
  std::vector<std::string> left_out_;  // "path:line" of rows without 2+ fields or a label
  std::vector<std::string> notes_;     // what reading the labels found (CheckClassLabels)
};

}  // namespace granary
