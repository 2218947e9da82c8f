#include "trainer/run_rank.h"

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>

#include "loader/loader.h"
#include "store/db.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/features/checkpoints/resume_point.h"
#include "trainer/features/features.h"
#include "loader/class_counts.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/hook.h"
#include "trainer/loop/input_statistics.h"
#include "trainer/loop/loader_options.h"
#include "trainer/loop/rank_model.h"
#include "trainer/loop/same_flow.h"
#include "trainer/loop/train_batches.h"
#include "trainer/models/registry.h"
#include "trainer/number_text.h"
#include "trainer/optim/optimizer.h"

namespace granary {
namespace {

// A line naming the features (by index, as the db stores them) that hold
// missing values, and what the model does with them; "" if none does.
std::string MissingFeaturesNote(const InputStatistics& s) {
  const torch::Tensor holding = torch::nonzero(s.missing).flatten();
  if (holding.numel() == 0) return "";
  std::string which;
  for (int64_t i = 0; i < holding.numel() && i < 8; ++i) {
    const int64_t f = holding[i].item<int64_t>();
    which += (i > 0 ? ", " : "") + std::to_string(f) + " (" + std::to_string(s.missing[f].item<int64_t>()) + ")";
  }
  if (holding.numel() > 8) which += ", ...";
  return std::to_string(holding.numel()) + " feature(s) hold missing values (NaN) in the training split: " + which +
         " (feature index, samples missing it): each is standardised over the values present, and a missing "
         "value is taken as its feature's mean";
}

// The model `run` trains: a feature model standardises its input by the
// training split's statistics (told to rank 0's observer when values are
// missing).
StatusOr<ModelSpec> SpecOf(const ResolvedRun& run, int rank, RunObserver& observer) {
  const TrainConfig& c = run.config;
  ModelSpec spec = SpecFor(c.model, run.workload);
  if (run.workload.kind != InputKind::kFeatures || c.data.synthetic) return spec;
  GRANARY_ASSIGN_OR_RETURN(const InputStatistics s,
                           InputStatisticsOf(*run.db, TrainSplitPassOptions(c, run.workload, 1024,
                                                                            /*shuffled=*/false)));
  spec.input_mean = s.mean;
  spec.input_std = s.stddev;
  if (rank == 0) {
    if (std::string note = MissingFeaturesNote(s); !note.empty()) observer.Note(note);
  }
  return spec;
}

// --class-weights balanced: the weights of the train split's classes, told to rank 0's observer.
StatusOr<torch::Tensor> WeightsOfClasses(const ResolvedRun& run, int rank, RunObserver& observer) {
  const TrainConfig& c = run.config;
  GRANARY_ASSIGN_OR_RETURN(const std::vector<uint64_t> counts,
                           ClassCounts(*run.db, c.data.train_split, run.workload.target_field, run.workload.outputs,
                                       c.data.skip_corrupt));
  const torch::Tensor weights = torch::tensor(BalancedWeights(counts), torch::kFloat32);
  if (rank == 0) {
    std::string each;
    for (size_t k = 0; k < counts.size() && k < 12; ++k) {
      each += (k ? ", " : "") + run.db->manifest().ClassName(static_cast<int64_t>(k)) + " " +
              FixedText(weights[static_cast<int64_t>(k)].item<double>(), 3) + " (" + std::to_string(counts[k]) + ")";
    }
    observer.Note("--class-weights balanced: the loss weighs each class (samples in split '" + c.data.train_split +
                  "'): " + each + (counts.size() > 12 ? ", ..." : ""));
  }
  return weights;
}

}  // namespace

StatusOr<std::vector<EpochReport>> RunRank(const ResolvedRun& run, int rank, RunObserver& observer,
                                           std::optional<Checkpoint> resumed) {
  const TrainConfig& c = run.config;
  SetUpRankProcess(c, run.env);
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<Loader> train,
                           Loader::Create(*run.db, TrainLoaderOptions(c, run.workload, rank)));
  if (!c.data.eval_split.empty() && run.db->manifest().FindSplit(c.data.eval_split) == nullptr) {
    return NoSuchSplit(run.db->manifest(), c.data.db, c.data.eval_split);
  }
  // --resume: parsed once, for everything a rank resumes with.
  std::optional<ResumePoint> resume;
  if (resumed) {
    StatusOr<ResumePoint> opened = ResumePoint::Open(std::move(resumed).value());
    if (!opened.ok()) return opened.status().WithContext("--resume");
    resume = std::move(opened).value();
  }
  GRANARY_ASSIGN_OR_RETURN(const ModelSpec spec, SpecOf(run, rank, observer));
  RestoreWeights restore;
  if (resume) restore = [&resume](Classifier& net) { return resume->RestoreModel(net); };
  GRANARY_ASSIGN_OR_RETURN(RankModel model, BuildRankModel(c, spec, restore));
  const RankStart start = resume ? resume->StartOf(rank, c.World()) : RankStart{};
  const std::string recipe =
      RecipeJson(c, run.db->manifest().content_hash, start.resumed ? start.global_step : -1);
  GRANARY_ASSIGN_OR_RETURN(DataParallel dp, DataParallel::Join(c, run.env, rank, *model.net, recipe));
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<torch::optim::Optimizer> optimizer,
                           CreateOptimizer(c.optim, TrainableParameters(*model.net)));
  if (resume) {
    GRANARY_RETURN_IF_ERROR(resume->RestoreOptimizer(*optimizer));
    GRANARY_RETURN_IF_ERROR(resume->RestoreCompression(rank, c.World(), *dp.sync, observer));
    if (rank == 0) resume->Tell(c, observer);
  }
  RankState state{run, rank, observer, model, dp, *optimizer, *train, {}, start, start.global_step};
  dp.Parts(/*apart=*/c.data.synthetic, &state.parts);
  state.parts.net = model.net.get();
  state.parts.precision = &model.precision;
  state.parts.optimizer = optimizer.get();
  state.parts.objective.label_smoothing = c.optim.label_smoothing;
  if (run.workload.regression) state.parts.objective.target_std = run.workload.target_std;
  if (c.optim.class_weights == "balanced") {
    GRANARY_ASSIGN_OR_RETURN(state.parts.objective.class_weights, WeightsOfClasses(run, rank, observer));
  }
  state.parts.seed = c.optim.seed;
  state.parts.rank = rank;
  state.check_flow = kCheckFlowByDefault || run.env.Get(kCheckFlowVariable) == "1";
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<TrainBatches> batches,
                           MakeTrainBatches(c, *train, run.workload, rank, observer));
  GRANARY_ASSIGN_OR_RETURN(RunHooks hooks, AssembleHooks(state));
  StatusOr<std::vector<EpochReport>> reports = TrainRank(state, *batches, std::move(hooks));
  // A split larger than memory whose windows stopped being read around the
  // page cache trained on, through it, slower: said, with why.
  if (const Status direct = train->direct_read_failure(); !direct.ok()) {
    observer.Note("rank " + std::to_string(rank) + ": windows of the split were read through the page cache after " +
                  "a read around it failed: " + direct.message());
  }
  return reports;
}

}  // namespace granary
