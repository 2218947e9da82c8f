#include "loader/fields.h"

#include <vector>

namespace granary {

Shape BatchedShape(const FieldSpec& field) {
  if (field.layout == "HWC" && field.shape.size() == 3) return {field.shape[2], field.shape[0], field.shape[1]};
  return field.shape;
}

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
  if (f.target.empty() || schema.FieldIndex(f.target) < 0) {
    return Status::InvalidArgument(db + ": has no label field to train on (built without --label?)");
  }
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
