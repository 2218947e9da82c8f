#include "trainer/features/save/saved_model.h"

#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/models/script.h"

namespace granary {
namespace {

class SavedModelHook : public RunHook {
 public:
  Status AfterRun(RankState& state, std::vector<EpochReport>*) override {
    const ResolvedRun& run = state.run;
    return SaveTorchScript(*state.model.net, run.config.output.save,
                           ModelCardOf(run.config, run.workload, run.db->manifest()));
  }
};

class SavedModelFeature : public Feature {
 public:
  Status Validate(const TrainConfig& c) const override {
    if (!c.output.save.empty() && !IsModelFile(c.output.save)) {
      return OutOfRange("--save", c.output.save, "must end in .pt or .pth (TorchScript)");
    }
    return Status::OK();
  }
  void Outputs(const TrainConfig& c, std::vector<OutputPath>* outputs) const override {
    outputs->push_back({"--save", c.output.save, OutputKind::kModel});
  }
  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    if (state.rank != 0 || state.run.config.output.save.empty()) return std::unique_ptr<RunHook>();
    return std::unique_ptr<RunHook>(std::make_unique<SavedModelHook>());
  }
};

}  // namespace

std::unique_ptr<Feature> MakeSavedModelFeature() { return std::make_unique<SavedModelFeature>(); }

}  // namespace granary
