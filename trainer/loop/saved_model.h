// train --save FILE.pt, a hook of rank 0 alone after the run (no
// collective): the trained model as TorchScript, with its model card (what
// it expects of its input: models/model_card.h). Training thread only.
#pragma once

#include <vector>

#include "trainer/loop/hook.h"

namespace granary {

class SavedModel : public RunHook {
 public:
  Status AfterRun(RankState& state, std::vector<EpochReport>* reports) override;
};

}  // namespace granary
