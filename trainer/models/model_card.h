// What a saved model expects of its input, recorded in the TorchScript file
// it is saved as (--save FILE.pt and FILE.int8.pt) as the extra file
// granary.json (docs/FORMAT.md, "Saved models"): the input field and its
// shape, how values were scaled and normalised (--mean/--std), the class
// names (or the regression target a model's one output predicts). `train
// --eval-only --model` and `train --model` apply it, so a model trained
// with --mean 0.5 --std 0.25 is evaluated as it was trained; Python
// reads it with granary.model_info(path) or
// torch.jit.load(path, _extra_files={"granary.json": ""}).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/manifest.h"
#include "store/schema.h"

namespace granary {

inline constexpr char kModelCardName[] = "granary.json";

struct ModelCard {
  std::string input_field;
  Shape input_shape;         // one sample as batched (C x H x W, or {features})
  double input_scale = 1.0;  // 1/255 for uint8 images
  double mean = 0.0, stddev = 1.0;  // input = (value * input_scale - mean) / stddev
  std::vector<std::string> classes;
  // The name of each element of the input, where its db names them (a
  // table's columns and one-hot categories, "colour=red"); empty where not.
  std::vector<std::string> input_names;
  // A regression model's target field ("" for a classifier, whose outputs
  // are the classes): its one output is the target's value, in its units.
  std::string regression_target;
  std::string db_content_hash;  // the db it was trained on
};

// granary.json's text.
std::string ModelCardJson(const ModelCard& card);

// The card in the TorchScript file at `path`; nullopt if it has none (a
// module saved from Python), or is no TorchScript archive (CheckModelFits
// names that). Corruption naming the file for a card that does not parse.
StatusOr<std::optional<ModelCard>> ReadModelCard(const std::string& path);

// The normalisation a run on model file `path` uses: the card's, unless
// --mean/--std (`mean`, `stddev`, defaults 0 and 1) were set to other values:
// then InvalidArgument naming both. Sets *mean and *stddev.
Status ApplyModelCard(const ModelCard& card, const std::string& path, float* mean, float* stddev);

// Refuses a db whose classes or input elements mean other things than the
// model's (`path`, with `card`) do: label 1 the model's 'dog' and the db's
// 'fox' (a folder or table lacking a class), element 1 the model's
// 'colour=blue' and the db's 'colour=green' (a table of other categories):
// its figures would look like results and be none. A side that names none
// is not compared, nor are the classes with `new_head` (made anew), nor
// classes past either's count (the forward's shape tells those); a class
// named on one side and only by its index on the other is the same. The
// refusal names `prep build --like`, which builds a db as the model's was.
Status CheckModelMeetsDb(const ModelCard& card, const std::string& path, const Manifest& manifest,
                         const std::string& input_field, bool new_head);

// "" where the model (`path`, with `card`) was trained on inputs of the
// shape the db's field `input_field` gives (`input`, one sample as
// batched), or its card records none; else what differs (images of 32 x 32
// pixels to the model, 64 x 64 in the db) and how to build the db at the
// model's size. A model that pools adaptively takes either and would score
// its objects at another scale; one that does not fails its forward.
std::string InputShapeDifference(const ModelCard& card, const std::string& path, const std::string& input_field,
                                 const Shape& input);

}  // namespace granary
