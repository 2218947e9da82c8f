#include "preprocess/like_db.h"

#include <memory>

#include "store/db.h"

namespace granary {
namespace {

// Option `name` (the flag --`flag`) taken from DB's build options into
// *value, unless the flag was given: then it must agree.
Status TakeOption(const Manifest& like, const std::string& db, const std::string& name, const std::string& flag,
                  const RawOptions& raw, std::string* value) {
  const auto recorded = like.build_options.find(name);
  const std::string theirs = recorded == like.build_options.end() ? "" : recorded->second;
  if (raw.given.count(flag) == 0) {
    if (!theirs.empty()) *value = theirs;
    return Status::OK();
  }
  if (*value == theirs) return Status::OK();
  return Status::InvalidArgument("--" + flag + " " + *value + ": --like " + db + " was built with " +
                                 (theirs.empty() ? "none" : "--" + flag + " " + theirs) +
                                 ", which a model trained on it was given: leave it out, or give the same");
}

}  // namespace

StatusOr<LikeDb> TakeLikeDb(const std::string& format, RawOptions* raw) {
  const std::string& db = raw->like;
  StatusOr<std::unique_ptr<DbReader>> opened = DbReader::Open(db);
  if (!opened.ok()) return opened.status().WithContext("--like " + db);
  const Manifest& m = opened.value()->manifest();
  LikeDb like;
  like.path = db;
  like.named = "--like " + db;
  like.content_hash = m.content_hash;
  like.class_names = m.class_names;
  const bool table = m.source_kind == "csv" || m.source_kind == "svmlight";
  if (table != (format == "csv" || format == "svmlight")) {
    return Status::InvalidArgument("--like " + db + ": was built from a " + m.source_kind + " source, and " +
                                   raw->raw + " is " + (table ? "no table" : "a table") +
                                   ": a table's db is built like a table's");
  }
  if (table) {
    const auto names = m.element_names.find("features");
    if (names == m.element_names.end() || names->second.empty()) {
      return Status::InvalidArgument("--like " + db + ": names none of its features' columns (a db built before "
                                     "2026-12): build it again with this prep, then the new db like it");
    }
    like.feature_names = names->second;
    std::string regression = raw->regression ? "yes" : "", header = raw->no_header ? "no" : "";
    GRANARY_RETURN_IF_ERROR(TakeOption(m, db, "label", "label", *raw, &raw->label));
    GRANARY_RETURN_IF_ERROR(TakeOption(m, db, "regression", "regression", *raw, &regression));
    GRANARY_RETURN_IF_ERROR(TakeOption(m, db, "header", "no-header", *raw, &header));
    if (raw->given.count("missing") == 0) {  // any other is taken as the model takes a missing value: its own
      GRANARY_RETURN_IF_ERROR(TakeOption(m, db, "missing", "missing", *raw, &raw->missing));
    }
    raw->regression = regression == "yes";
    raw->no_header = header == "no";
  } else if (format == "image-folder" || format == "webdataset") {
    std::string channels = std::to_string(raw->channels);
    raw->size = RecordedSize(raw->size);  // 64x64 given where 64 was recorded: the same
    GRANARY_RETURN_IF_ERROR(TakeOption(m, db, "size", "size", *raw, &raw->size));
    GRANARY_RETURN_IF_ERROR(TakeOption(m, db, "channels", "channels", *raw, &channels));
    raw->channels = channels == "1" ? 1 : 3;
  }
  const bool regression_db = table && raw->regression;
  if (!regression_db && like.class_names.empty()) {
    return Status::InvalidArgument("--like " + db + ": names no classes, so it has none to give the new db");
  }
  return like;
}

}  // namespace granary
