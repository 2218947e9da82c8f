// Which fields of a db a model reads: the one rule `train`, `loader bench`
// and Python (granary.Loader, granary.Dataset, granary.describe) share. The
// target is the manifest's label field unless one is named; the input is the
// field named, else "image" if the schema has it, else the only field
// besides the target. Stateless.
#pragma once

#include <string>

#include "base/status.h"
#include "store/manifest.h"

namespace granary {

struct BatchFields {
  std::string input;
  std::string target;
};

// One sample of `field` as the loader batches it: an HWC image as C x H x W,
// anything else as stored.
Shape BatchedShape(const FieldSpec& field);

// How the caller's user names the two choices in messages: train's flags,
// or granary.Loader's arguments ("input_field", "target_field").
struct FieldChoiceNames {
  const char* input = "--input-field";
  const char* target = "--target-field";
};

// The fields of `manifest` (of the db at `db`, named in errors) for
// `input_field` and `target_field`, each "" for the rule above.
// InvalidArgument naming the flag (as `names` says) and the db: a named field
// that does not exist, no label field, input and target the same field, or no
// "image" and more than one other field.
StatusOr<BatchFields> ChooseBatchFields(const Manifest& manifest, const std::string& db,
                                        const std::string& input_field = "", const std::string& target_field = "",
                                        const FieldChoiceNames& names = {});

}  // namespace granary
