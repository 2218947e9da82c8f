// train --save FILE.pt, a hook of rank 0 alone after the run (no
// collective): the trained model as TorchScript, with its model card (what
// it expects of its input: models/model_card.h). Training thread only.
#pragma once

#include <memory>

#include "trainer/features/feature.h"

namespace granary {

std::unique_ptr<Feature> MakeSavedModelFeature();

}  // namespace granary
