#include "trainer/models/model_card.h"

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/names_text.h"
#include "trainer/models/script.h"
#include "trainer/number_text.h"

namespace granary {
namespace {

constexpr int kCardFormat = 1;
constexpr size_t kMaxCardBytes = 1 << 20;  // class names of a large db fit many times over

// The first place where `a` and `b` differ, comparing `compared` names at
// most, by `same(a[i], b[i], i)`.
template <typename Same>
size_t FirstDifference(const std::vector<std::string>& a, const std::vector<std::string>& b, size_t compared,
                       Same same) {
  size_t i = 0;
  while (i < compared && same(a[i], b[i], i)) ++i;
  return i;
}

bool IsNumber(const std::string& name) {
  return !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
}

// Class `i` named `a` on one side and `b` on the other is the same class:
// the same name, or a name on one side and only its index on the other (a
// db of IDX files names Fashion-MNIST's classes 0-9, torchvision's
// dataset 'T-shirt/top', ...). Two numbers are two classes' labels.
bool SameClass(const std::string& a, const std::string& b, size_t i) {
  return a == b || (a == std::to_string(i) && !IsNumber(b)) || (b == std::to_string(i) && !IsNumber(a));
}

}  // namespace

std::string ModelCardJson(const ModelCard& card) {
  nlohmann::json j = {{"format", kCardFormat},
                      {"input_field", card.input_field},
                      {"input_shape", card.input_shape},
                      {"input_scale", card.input_scale},
                      {"mean", card.mean},
                      {"std", card.stddev},
                      {"classes", card.classes},
                      {"db_content_hash", card.db_content_hash}};
  if (!card.regression_target.empty()) j["regression_target"] = card.regression_target;
  if (!card.input_names.empty()) j["input_names"] = card.input_names;
  return DumpJson(j);
}

StatusOr<std::optional<ModelCard>> ReadModelCard(const std::string& path) {
  if (!CheckModelFile(path).ok()) return std::optional<ModelCard>();
  std::string text;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    const std::string record = std::string("extra/") + kModelCardName;
    if (!reader.hasRecord(record)) return std::optional<ModelCard>();
    auto [data, size] = reader.getRecord(record);
    if (size > kMaxCardBytes) return Status::Corruption(path + ": " + kModelCardName + " is over 1 MiB");
    text.assign(static_cast<const char*>(data.get()), size);
  } catch (const std::exception&) {
    return std::optional<ModelCard>();  // not an archive: CheckModelFits says so
  }
  const auto bad = [&](const std::string& why) {
    return Status::Corruption(path + ": its " + kModelCardName + " (what the model expects of its input) " + why);
  };
  const nlohmann::json j = ParseJson(text);
  if (j.is_discarded() || !j.is_object()) return bad("is not a JSON object");
  if (!j.contains("format") || !j["format"].is_number_integer() || j["format"].get<int64_t>() != kCardFormat) {
    return bad("is not of format " + std::to_string(kCardFormat));
  }
  ModelCard card;
  try {
    card.input_field = j.at("input_field").get<std::string>();
    card.input_shape = j.at("input_shape").get<Shape>();
    card.input_scale = j.at("input_scale").get<double>();
    card.mean = j.at("mean").get<double>();
    card.stddev = j.at("std").get<double>();
    card.classes = j.at("classes").get<std::vector<std::string>>();
    card.db_content_hash = j.at("db_content_hash").get<std::string>();
    if (j.contains("regression_target")) card.regression_target = j.at("regression_target").get<std::string>();
    if (j.contains("input_names")) card.input_names = j.at("input_names").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("has a missing or mistyped member: ") + e.what());
  }
  if (!std::isfinite(card.mean) || !(std::isfinite(card.stddev) && card.stddev > 0) ||
      std::abs(card.mean) > 1e30 || card.stddev > 1e30) {
    return bad("has a mean or std out of range");
  }
  return std::optional<ModelCard>(std::move(card));
}

Status ApplyModelCard(const ModelCard& card, const std::string& path, float* mean, float* stddev) {
  const float card_mean = static_cast<float>(card.mean), card_std = static_cast<float>(card.stddev);
  const bool defaults = *mean == 0.0f && *stddev == 1.0f;
  if (!defaults && (*mean != card_mean || *stddev != card_std)) {
    return Status::InvalidArgument("--mean " + NumberText(*mean) + " --std " + NumberText(*stddev) + ": --model " +
                                   path + " was trained with --mean " + NumberText(card_mean) + " --std " +
                                   NumberText(card_std) + " (recorded in the file): leave them out, or give the same");
  }
  *mean = card_mean;
  *stddev = card_std;
  return Status::OK();
}

Status CheckModelMeetsDb(const ModelCard& card, const std::string& path, const Manifest& manifest,
                         const std::string& input_field, bool new_head) {
  const std::string like = "; a db the model is to read is built as its own was with prep build RAW DB --like "
                           "TRAIN_DB (the db it was trained on: its columns, categories and classes, in its order)";
  const std::vector<std::string>& classes = manifest.class_names;
  const size_t common = std::min(card.classes.size(), classes.size());
  if (size_t i = FirstDifference(card.classes, classes, common, SameClass); !new_head && i < common) {
    return Status::InvalidArgument("--model " + path + ": its classes are " + NamesText(card.classes) +
                                   " (its card says) and the db's " + NamesText(classes) + ": label " +
                                   std::to_string(i) + " is '" + card.classes[i] + "' to the model and '" +
                                   classes[i] + "' in the db, so its answers would be scored against other classes" +
                                   like + " (or, to train it on the db's classes, --new-head)");
  }
  const auto names = manifest.element_names.find(input_field);
  if (card.input_names.empty() || names == manifest.element_names.end() || names->second == card.input_names) {
    return Status::OK();
  }
  const size_t i = FirstDifference(card.input_names, names->second,
                                   std::min(card.input_names.size(), names->second.size()),
                                   [](const std::string& a, const std::string& b, size_t) { return a == b; });
  const auto element = [&](const std::vector<std::string>& of) {
    return i < of.size() ? "'" + of[i] + "'" : std::string("none (it has " + std::to_string(of.size()) + ")");
  };
  return Status::InvalidArgument("--model " + path + ": its input's elements are " + NamesText(card.input_names) +
                                 " (its card says) and the db's field '" + input_field + "' has " +
                                 NamesText(names->second) + ": element " + std::to_string(i) + " is " +
                                 element(card.input_names) + " to the model and " + element(names->second) +
                                 " in the db" + like);
}

std::string InputShapeDifference(const ModelCard& card, const std::string& path, const std::string& input_field,
                                 const Shape& input) {
  if (card.input_shape.empty() || card.input_shape == input) return "";
  const auto described = [](const Shape& s) {
    if (s.size() == 1) return std::to_string(s[0]) + " features";
    if (s.size() != 3) return ShapeToString(s);
    return std::to_string(s[1]) + " x " + std::to_string(s[2]) + " pixels of " + std::to_string(s[0]) + " channel" +
           (s[0] == 1 ? "" : "s");
  };
  std::string how = "prep build RAW DB --like TRAIN_DB (the db it was trained on)";
  if (card.input_shape.size() == 3 && input.size() == 3 && card.input_shape[1] == card.input_shape[2]) {
    how += ", or --size " + std::to_string(card.input_shape[1]);
  }
  return "--model " + path + " was trained on inputs of " + described(card.input_shape) +
         " (its card says), and the db's field '" + input_field + "' gives " + described(input) +
         "; a db the model is to read is built at its size with " + how;
}

}  // namespace granary
