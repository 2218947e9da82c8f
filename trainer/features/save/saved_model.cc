#include "trainer/features/save/saved_model.h"

#include "base/file.h"
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
  // A disk without room for the model, refused now: the run would end, trained, without it.
  Status Preflight(const ResolvedRun& run, const ModelBytes& model) const override {
    const std::string& save = run.config.output.save;
    const int64_t free_bytes = save.empty() ? -1 : FreeDiskBytes(save);
    const uint64_t needed = model.parameters + model.buffers;
    if (free_bytes < 0 || static_cast<uint64_t>(free_bytes) >= needed) return Status::OK();
    return Status::FailedPrecondition("--save " + save + ": its disk has " +
                                      ApproxBytes(static_cast<double>(free_bytes)) +
                                      " free, less than the model takes, about " +
                                      ApproxBytes(static_cast<double>(needed)) +
                                      ": the run would end without it; make room, or choose another path");
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
