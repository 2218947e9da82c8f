#include "loader/fields.h"

#include <vector>

namespace granary {

Shape BatchedShape(const FieldSpec& field) {
  if (field.layout == "HWC" && field.shape.size() == 3) return {field.shape[2], field.shape[0], field.shape[1]};
  return field.shape;
}

StatusOr<BatchFields> ChooseBatchFields(const Manifest& manifest, const std::string& db,
                                        const std::string& input_field, const std::string& target_field) {
  const Schema& schema = manifest.schema;
  BatchFields f;
  f.target = target_field.empty() ? manifest.label_field : target_field;
  if (!target_field.empty() && schema.FieldIndex(f.target) < 0) {
    return Status::InvalidArgument("target field " + f.target + ": " + db + " has no such field");
  }
  if (f.target.empty() || schema.FieldIndex(f.target) < 0) {
    return Status::InvalidArgument(db + ": has no label field to train on (built without --label?)");
  }
  if (!input_field.empty()) {
    if (schema.FieldIndex(input_field) < 0) {
      return Status::InvalidArgument("--input-field " + input_field + ": " + db + " has no such field");
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
      std::string names;
      for (const std::string& n : others) names += (names.empty() ? "" : ", ") + n;
      return Status::InvalidArgument(db + ": no 'image' field and " + std::to_string(others.size()) +
                                     " other fields (" + names + "): pick one with --input-field");
    }
    f.input = others.front();
  }
  if (f.input == f.target) return Status::InvalidArgument("--input-field " + f.input + ": is the label field");
  return f;
}

}  // namespace granary
