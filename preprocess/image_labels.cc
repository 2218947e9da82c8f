#include "preprocess/image_labels.h"

#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include "base/file.h"
#include "base/names_text.h"
#include "preprocess/class_labels.h"
#include "preprocess/csv_columns.h"
#include "preprocess/csv_table.h"
#include "preprocess/masks_and_boxes.h"
#include "store/manifest.h"

namespace granary {
namespace {

// Rows whose values choose the column that names the images.
constexpr size_t kChoosingRows = 1000;

// What to say of a table of boxes (`boxes`: BoxColumnsIn) whose images have
// several rows: a detection dataset's.
std::string DetectionTable(const std::string& boxes) {
  return "a detection table (its columns " + boxes + " are a box a row, and an image has a row a box: a class a "
         "box, not an image). prep builds classification dbs; write the images with their boxes with granary.write "
         "(README, \"Masks and boxes\")";
}

// The label column of `header` (`given`, else named like a label, else the
// second of two), or an error naming the table.
StatusOr<size_t> LabelColumnOf(const std::string& path, const std::vector<std::string>& header,
                               const std::string& given) {
  if (header.size() < 2) {
    return Status::InvalidArgument(path + ": a labels table needs a column naming each image and a label column "
                                   "(its header: " + CsvHeaderText(header) + ")");
  }
  std::string name = given;
  if (name.empty()) {
    const std::vector<std::string> named = ColumnsNamedLikeALabel(header);
    if (named.size() > 1) {
      return Status::InvalidArgument(path + ": give --label COLUMN: columns '" + named[0] + "' and '" + named[1] +
                                     "' are both named like a label");
    }
    if (named.empty() && header.size() > 2) {
      return Status::InvalidArgument(path + ": give --label COLUMN: no column is named label, target, class or y "
                                     "(its columns: " + CsvHeaderText(header) + ")");
    }
    name = named.empty() ? header[1] : named[0];
  }
  const auto at = std::find(header.begin(), header.end(), name);
  if (at == header.end()) {
    return Status::InvalidArgument(path + ": no column '" + name + "' for --label (its columns: " + CsvHeaderText(header) +
                                   ")");
  }
  return static_cast<size_t>(at - header.begin());
}

// "xxh64:..." of the file at `path`, read in pieces.
StatusOr<std::string> HashOfFile(const std::string& path) {
  ReadOnlyFile file;
  GRANARY_RETURN_IF_ERROR(file.Open(path));
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> state(XXH64_createState(), XXH64_freeState);
  XXH64_reset(state.get(), 0);
  std::string piece(1 << 20, '\0');
  for (uint64_t at = 0; at < file.size_bytes();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), file.size_bytes() - at));
    GRANARY_RETURN_IF_ERROR(file.ReadAt(at, n, piece.data()));
    XXH64_update(state.get(), piece.data(), n);
    at += n;
  }
  return FormatHash(XXH64_digest(state.get()));
}

// The names a row may give the image `name` (its path in the folder) by:
// that path, its file name, and its file name without the extension.
std::vector<std::string> KeysOf(const std::string& name) {
  const std::filesystem::path p(name);
  return {name, p.filename().string(), p.stem().string()};
}

// The column of `rows` (line, fields), other than `other`, whose values are
// the most of `keys` (the images' names; train/'s classes); the number of
// columns where none is one.
size_t ColumnHoldingMost(const std::vector<std::pair<uint64_t, std::vector<std::string>>>& rows, size_t other,
                         const std::set<std::string>& keys) {
  const size_t columns = rows.empty() ? 0 : rows[0].second.size();
  size_t best = columns, most = 0;
  for (size_t c = 0; c < columns; ++c) {
    if (c == other) continue;
    size_t named = 0;
    for (const auto& row : rows) named += keys.count(TrimCsvField(row.second[c]));
    if (named > most) best = c, most = named;
  }
  return best;
}

// The label column of `header`, or kDecidedByRows where the first rows
// decide it (the column holding the most of train/'s classes, when
// `by_classes`); an error naming the table where neither can.
constexpr size_t kDecidedByRows = static_cast<size_t>(-1);
StatusOr<size_t> DecideLabelColumn(const std::string& path, const std::vector<std::string>& header,
                                   const std::string& label, bool by_classes, bool headerless) {
  if (!label.empty()) return LabelColumnOf(path, header, label);
  if (!headerless && !ColumnsNamedLikeALabel(header).empty()) return LabelColumnOf(path, header, "");
  if (by_classes) return kDecidedByRows;
  if (headerless && header.size() > 2) {
    return Status::InvalidArgument(path + ": has no header (its first row names an image): give --label N, the "
                                   "number of its label column (1.." + std::to_string(header.size()) + ")");
  }
  return LabelColumnOf(path, header, "");
}

// The id column (naming the most `keys`) and, where still to be decided,
// the label column (holding the most of `classes`, `whose` they are), from
// the first rows.
Status ChooseColumns(const std::string& path, const std::vector<std::string>& header,
                     const std::vector<std::pair<uint64_t, std::vector<std::string>>>& first,
                     const std::set<std::string>& keys, const std::set<std::string>& classes,
                     const std::string& whose, const std::string& an_image, size_t* id, size_t* column) {
  *id = ColumnHoldingMost(first, *column, keys);
  if (*id == header.size()) {
    return Status::InvalidArgument(path + ": no column names the folder's images (its columns: " +
                                   CsvHeaderText(header) + "; first row: " + CsvHeaderText(first[0].second) +
                                   "; an image: '" + an_image + "'): a row names an image by its path in the "
                                   "folder, its file name, or its file name without the extension");
  }
  if (*column != kDecidedByRows) return Status::OK();
  *column = ColumnHoldingMost(first, *id, classes);
  if (*column == header.size()) {
    return Status::InvalidArgument(path + ": no column holds the names of " + whose + " classes (first row: " +
                                   CsvHeaderText(first[0].second) + "; a class: '" + *classes.begin() + "')");
  }
  return Status::OK();
}

}  // namespace

StatusOr<ImageLabels> ImageLabels::Read(const std::string& path, const std::string& label,
                                        const std::vector<std::string>& images, const std::string& temp_dir,
                                        const KnownClasses& classes) {
  ImageLabels labels;
  labels.path_ = path;
  std::set<std::string> keys;   // every name a row may give an image by
  std::set<std::string> files;  // those with the extension: no header's column name
  for (const std::string& image : images) {
    std::vector<std::string> names = KeysOf(image);
    files.insert(names[0]);
    files.insert(names[1]);
    for (std::string& key : names) keys.insert(std::move(key));
  }
  const std::set<std::string> known(classes.names.begin(), classes.names.end());
  std::vector<std::string> header;
  size_t id = 0, column = 0;
  std::map<std::string, std::pair<std::string, uint64_t>> by_id;  // id -> (label as written, line)
  std::set<std::string> values;
  uint64_t repeats = 0;  // rows naming an image again, with its label
  std::string repeated;  // the first of them
  // The id column is the one whose values name the most images in the first rows, which wait for it.
  std::vector<std::pair<uint64_t, std::vector<std::string>>> first;
  const auto on_header = [&](const std::vector<std::string>& names) -> StatusOr<size_t> {
    header = names;
    if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return files.count(TrimCsvField(n)); })) {
      labels.headerless_ = true;  // the first row names an image: data, not a header
      header.clear();
      for (size_t c = 1; c <= names.size(); ++c) header.push_back(std::to_string(c));
      first.emplace_back(1, names);
    }
    GRANARY_ASSIGN_OR_RETURN(column, DecideLabelColumn(path, header, label, !known.empty(), labels.headerless_));
    return CsvParser::kAllColumns;
  };
  const auto add = [&](uint64_t line, const std::vector<std::string>& fields) -> Status {
    const std::string where = path + ":" + std::to_string(line);
    const std::string name = TrimCsvField(fields[id]), value = TrimCsvField(fields[column]);
    if (name.empty() || IsMissingCsvValue(value)) {
      labels.left_out_.push_back(where);
      return Status::OK();
    }
    const auto [at, fresh] = by_id.emplace(name, std::make_pair(value, line));
    if (!fresh && at->second.first != value) {
      const std::string boxes = BoxColumnsIn(header);
      return Status::InvalidArgument(where + ": '" + name + "' is labelled again, '" + value + "' where line " +
                                     std::to_string(at->second.second) + " says '" + at->second.first + "'" +
                                     (boxes.empty() ? "" : ": " + DetectionTable(boxes)));
    }
    if (!fresh && ++repeats == 1) {
      repeated = "'" + name + "' on lines " + std::to_string(at->second.second) + " and " + std::to_string(line);
    }
    if (values.insert(value).second && values.size() > kMaxLabelValues) {
      return Status::InvalidArgument(where + ": column '" + labels.label_column_ + "' holds over " +
                                     std::to_string(kMaxLabelValues) + " distinct values: no class labels");
    }
    return Status::OK();
  };
  bool chosen = false;
  const auto choose = [&]() -> Status {
    chosen = true;
    GRANARY_RETURN_IF_ERROR(ChooseColumns(path, header, first, keys, known, classes.whose, images[0], &id, &column));
    labels.id_column_ = header[id];
    labels.label_column_ = header[column];
    for (const auto& [line, fields] : first) GRANARY_RETURN_IF_ERROR(add(line, fields));
    first.clear();
    return Status::OK();
  };
  const auto on_row = [&](const CsvParser::Row& row, int) -> Status {
    if (row.columns != header.size()) {
      labels.left_out_.push_back(path + ":" + std::to_string(row.line));
      return Status::OK();
    }
    if (chosen) return add(row.line, *row.fields);
    first.emplace_back(row.line, *row.fields);
    return first.size() >= kChoosingRows ? choose() : Status::OK();
  };
  GRANARY_RETURN_IF_ERROR(CsvTable::Scan(path, {0, 0, 0, true, temp_dir}, on_header, on_row).status());
  if (!chosen && !first.empty()) GRANARY_RETURN_IF_ERROR(choose());
  if (by_id.empty()) return Status::InvalidArgument(path + ": no row names an image and its label");
  if (const std::string boxes = BoxColumnsIn(header); !boxes.empty() && repeats > 0) {
    return Status::InvalidArgument(path + ": rows name an image again (" + std::to_string(repeats) + " in all, " +
                                   "the first " + repeated + "): " + DetectionTable(boxes));
  } else if (!boxes.empty()) {
    labels.notes_.push_back("columns " + boxes + " of " + path + " (a box an image) are left out: an image's label "
                            "is its column '" + labels.label_column_ + "'");
  } else if (repeats > 0) {
    labels.notes_.push_back(std::to_string(repeats) + " row(s) of " + path + " name an image a row above names, "
                            "with the same label (" + repeated + "): read once");
  }
  GRANARY_RETURN_IF_ERROR(labels.Classify(by_id, values, classes));
  GRANARY_ASSIGN_OR_RETURN(labels.content_hash_, HashOfFile(path));
  return labels;
}

Status ImageLabels::Classify(const std::map<std::string, std::pair<std::string, uint64_t>>& by_id,
                             const std::set<std::string>& values, const KnownClasses& classes) {
  std::map<std::string, int64_t> index;
  if (classes.names.empty()) {
    GRANARY_RETURN_IF_ERROR(CheckClassLabels(path_, label_column_, values, by_id.size(), /*table=*/false, &notes_));
    index = ChooseClasses(values, &class_names_);
  } else {
    class_names_ = classes.names;
    for (size_t k = 0; k < class_names_.size(); ++k) index[class_names_[k]] = static_cast<int64_t>(k);
  }
  for (const auto& [name, labelled] : by_id) {
    const auto at = index.find(labelled.first);
    if (at == index.end()) {
      return Status::InvalidArgument(path_ + ":" + std::to_string(labelled.second) + ": '" + name + "' is labelled '" +
                                     labelled.first + "', which is none of " + classes.whose + " " +
                                     std::to_string(class_names_.size()) + " classes (" + NamesText(class_names_) +
                                     "): a model trained on them has no output for it");
    }
    rows_[name] = {at->second, labelled.second, false};
  }
  return Status::OK();
}

int64_t ImageLabels::ClassOf(const std::string& name) {
  for (const std::string& key : KeysOf(name)) {
    const auto at = rows_.find(key);
    if (at == rows_.end()) continue;
    at->second.used = true;
    return at->second.label;
  }
  return -1;
}

std::vector<std::string> ImageLabels::Notes() const {
  std::vector<std::string> notes = {"labels from " + path_ + (headerless_ ? " (no header; columns numbered)" : "") +
                                    ": column '" + label_column_ + "' of the image named in '" + id_column_ + "' (" +
                                    std::to_string(rows_.size()) + " rows, " + std::to_string(class_names_.size()) +
                                    " classes)"};
  notes.insert(notes.end(), notes_.begin(), notes_.end());
  const auto listing = [](const std::vector<std::string>& names) {
    std::string text;
    for (size_t i = 0; i < names.size() && i < 5; ++i) text += " " + names[i];
    return text + (names.size() > 5 ? " ..." : "");
  };
  if (!left_out_.empty()) {
    notes.push_back("left out " + std::to_string(left_out_.size()) + " row(s) of " + path_ +
                    " without an image name and a label:" + listing(left_out_));
  }
  std::vector<std::string> unused;
  for (const auto& [name, row] : rows_) {
    if (!row.used) unused.push_back(name);
  }
  if (!unused.empty()) {
    notes.push_back(std::to_string(unused.size()) + " row(s) of " + path_ + " name no image in the folder:" +
                    listing(unused));
  }
  return notes;
}

}  // namespace granary
