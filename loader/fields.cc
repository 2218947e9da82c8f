#include "loader/fields.h"

#include <algorithm>
#include <vector>

namespace granary {

Shape BatchedShape(const FieldSpec& field) {
  if (field.layout == "HWC" && field.shape.size() == 3) return {field.shape[2], field.shape[0], field.shape[1]};
  return field.shape;
}

namespace {

// A db without a label field: its fields, what a label is, and how the tool
// that made it names one.
Status NoLabel(const Manifest& manifest, const std::string& db) {
  std::string fields;
  for (const FieldSpec& field : manifest.schema.fields) {
    fields += (fields.empty() ? "" : ", ") + field.name + " " +
              (field.IsText() ? std::string("str") : DTypeName(field.dtype) + (" " + ShapeToString(field.shape)));
  }
  std::string naming;
  const auto& all = manifest.schema.fields;
  const bool scalar = std::any_of(all.begin(), all.end(), [](const FieldSpec& f) { return f.shape.empty(); });
  const bool image = std::any_of(all.begin(), all.end(), [](const FieldSpec& f) {
    return f.dtype == DType::kUInt8 && f.shape.size() >= 2 && !f.IsText();
  });
  if (!scalar && image && all.size() >= 2) {  // images with masks or boxes
    return Status::InvalidArgument(db + ": has no label field to train on (its fields: " + fields +
                                   "): train and the Loader batch one class or value a sample; images with masks "
                                   "or boxes are read with granary.Dataset in a DataLoader (README, \"Masks and "
                                   "boxes\")");
  }
  if (manifest.source_kind == "python") {
    naming = "; granary.write takes the one integer scalar field, or the scalar named label or target, and label= "
             "names one";
  } else if (manifest.source_kind == "csv") {
    naming = "; prep build --label COLUMN names one";
  }
  return Status::InvalidArgument(db + ": has no label field to train on (its fields: " + fields +
                                 "): a label is one integer class or one float value a sample" + naming);
}

}  // namespace

StatusOr<BatchFields> ChooseBatchFields(const Manifest& manifest, const std::string& db,
                                        const std::string& input_field, const std::string& target_field,
                                        const FieldChoiceNames& names) {
  const std::string input_name = names.input, target_name = names.target;
  const Schema& schema = manifest.schema;
  BatchFields f;
  f.target = target_field.empty() ? manifest.label_field : target_field;
  if (!target_field.empty() && schema.FieldIndex(f.target) < 0) {
    return Status::InvalidArgument(target_name + " " + f.target + ": " + db + " has no such field");
  }
  if (f.target.empty() || schema.FieldIndex(f.target) < 0) return NoLabel(manifest, db);
  if (!input_field.empty()) {
    if (schema.FieldIndex(input_field) < 0) {
      return Status::InvalidArgument(input_name + " " + input_field + ": " + db + " has no such field");
    }
    f.input = input_field;
  } else if (schema.FieldIndex("image") >= 0) {
    f.input = "image";
  } else {
    std::vector<std::string> others;
    for (const FieldSpec& field : schema.fields) {
      if (field.name != f.target) others.push_back(field.name);
    }
    if (others.size() != 1) {
      std::string listed;
      for (const std::string& n : others) listed += (listed.empty() ? "" : ", ") + n;
      return Status::InvalidArgument(db + ": no 'image' field and " + std::to_string(others.size()) +
                                     " other fields (" + listed + "): pick one with " + input_name);
    }
    f.input = others.front();
  }
  if (f.input == f.target) {
    if (input_field.empty()) {  // the user named only the target
      return Status::InvalidArgument(target_name + " " + f.target + ": is the input field (" + f.input +
                                     " by default): name another with " + input_name);
    }
    return Status::InvalidArgument(input_name + " " + f.input + ": is the " +
                                   (target_field.empty() ? "label field" : target_name));
  }
  return f;
}

}  // namespace granary
