#include "trainer/features/int8/int8_export.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "base/file.h"
#include "base/json_text.h"
#include "trainer/eval/evaluate.h"
#include "trainer/eval/inference_rates.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/loop/batch_tensors.h"
#include "trainer/loop/loader_options.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/models/quantize.h"
#include "trainer/models/script.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

nlohmann::json QuantizedJson(const QuantizedReport& q) {
  return {{"fp32_accuracy", q.fp32_accuracy},
          {"int8_accuracy", q.int8_accuracy},
          {"fp32_loss", q.fp32_loss},
          {"int8_loss", q.int8_loss},
          {"fp32_samples_per_s", q.fp32_samples_per_s},
          {"int8_samples_per_s", q.int8_samples_per_s},
          {"fp32_bytes", q.fp32_bytes},
          {"int8_bytes", q.int8_bytes},
          {"threads", q.threads},
          {"engine", q.engine},
          {"calibration_samples", q.calibration_samples},
          {"eval_samples", q.eval_samples},
          {"int8_layers", q.int8_layers},
          {"fp32_layers", q.fp32_layers},
          {"path", q.path}};
}

// Calibration batches of the training split: a rank's batch size, the run's
// shuffled order of epoch 0 (so a class-sorted db is sampled across classes),
// unaugmented.
class Calibration {
 public:
  static StatusOr<Calibration> Open(const TrainConfig& c, const DbReader& db, const Workload& w) {
    const size_t rank_batch = static_cast<size_t>(std::max<int64_t>(1, c.optim.batch_size / c.World()));
    const LoaderOptions options = TrainSplitPassOptions(c, w, rank_batch, /*shuffled=*/true);
    StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(db, options);
    if (!loader.ok()) return loader.status().WithContext("--quantize int8: calibration loader");
    loader.value()->StartEpoch(0);
    return Calibration(std::move(loader).value(), c.shrink.calibration_batches);
  }

  StatusOr<bool> Next(torch::Tensor* input) {
    if (left_ == 0) return false;
    StatusOr<bool> more = loader_->Next(&batch_);
    if (!more.ok() || !more.value()) return more;
    --left_;
    samples_ += batch_.size;
    *input = InputTensor(batch_);  // valid until the next call
    HeartbeatBeat();
    return true;
  }

  uint64_t samples() const { return samples_; }

 private:
  Calibration(std::unique_ptr<Loader> loader, int batches) : loader_(std::move(loader)), left_(batches) {}

  std::unique_ptr<Loader> loader_;
  int left_;
  uint64_t samples_ = 0;
  Batch batch_;
};

}  // namespace

std::string Int8Path(const std::string& save) {
  if (save.empty()) return "";
  const size_t dot = save.rfind('.');
  if (dot == std::string::npos || save.find('/', dot) != std::string::npos) return save + ".int8";
  return save.substr(0, dot) + ".int8" + save.substr(dot);
}

StatusOr<std::vector<std::string>> CheckQuantizable(const TrainConfig& c, const Workload& workload) {
  if (c.shrink.quantize != Quantize::kInt8) return std::vector<std::string>{};
  if (workload.regression) {
    return Status::InvalidArgument("--quantize int8: measures the INT8 model's accuracy against the trained one's; "
                                   "the db's target '" + workload.target_field +
                                   "' is a number to predict, which has no accuracy");
  }
  if (c.data.eval_split.empty()) {
    return Status::InvalidArgument(
        "--quantize int8: the INT8 model is measured against the trained one on the eval split, and this run has "
        "none (the db has no test or val split, or --eval-split \"\")");
  }
  const std::string what = "model " + c.model.name;
  StatusOr<torch::jit::Module> fp32 = CatchTorchOr("--quantize int8: building the model", [&] {
    StatusOr<std::shared_ptr<Classifier>> model = CreateModel(SpecFor(c.model, workload));
    return model.ok() ? ToTorchScript(*model.value()) : StatusOr<torch::jit::Module>(model.status());
  });
  if (!fp32.ok()) return fp32.status().WithContext("--quantize int8");
  Shape batch = {2};
  batch.insert(batch.end(), workload.input_shape.begin(), workload.input_shape.end());
  bool given = false;
  StatusOr<Int8Model> int8 = QuantizeInt8(
      fp32.value(),
      [&](torch::Tensor* input) -> StatusOr<bool> {
        if (given) return false;
        *input = torch::zeros(batch);
        return given = true;
      },
      what);
  if (!int8.ok()) return int8.status();
  return int8->fp32_layers;
}

StatusOr<QuantizedReport> QuantizeTrained(const TrainConfig& c, const DbReader& db, const Workload& w,
                                          const Classifier& net) {
  StatusOr<torch::jit::Module> fp32 = ToTorchScript(net);
  if (!fp32.ok()) return fp32.status().WithContext("--quantize int8");
  const std::string card = ModelCardOf(c, w, db.manifest());
  StatusOr<std::string> fp32_bytes = TorchScriptBytes(fp32.value(), "--quantize int8: the fp32 model", card);
  if (!fp32_bytes.ok()) return fp32_bytes.status();

  GRANARY_ASSIGN_OR_RETURN(Calibration calibration, Calibration::Open(c, db, w));
  StatusOr<Int8Model> int8 =
      QuantizeInt8(fp32.value(), [&](torch::Tensor* input) { return calibration.Next(input); },
                   "model " + c.model.name);
  if (!int8.ok()) return int8.status();
  StatusOr<std::string> int8_bytes = TorchScriptBytes(int8->module, "--quantize int8: the INT8 model", card);
  if (!int8_bytes.ok()) return int8_bytes.status();

  StatusOr<std::string> engine = UseInt8Engine();  // QuantizeInt8 chose it
  if (!engine.ok()) return engine.status().WithContext("--quantize int8");
  QuantizedReport r;
  r.engine = engine.value();
  r.threads = at::get_num_threads();
  r.calibration_samples = calibration.samples();
  r.int8_layers = int8->int8_layers;
  r.fp32_layers = int8->fp32_layers;
  r.fp32_bytes = fp32_bytes->size();
  r.int8_bytes = int8_bytes->size();
  torch::NoGradGuard no_grad;
  torch::Tensor batch;
  // (Records these passes skip, the evaluation hook has named: the same split.)
  StatusOr<EvalResult> a = EvaluateModule(db, c.data, w, fp32.value(), &batch);
  if (!a.ok()) return a.status().WithContext("--quantize int8: evaluating the fp32 model");
  StatusOr<EvalResult> b = EvaluateModule(db, c.data, w, int8->module);
  if (!b.ok()) return b.status().WithContext("--quantize int8: evaluating the INT8 model");
  const double n = static_cast<double>(std::max<uint64_t>(a->samples, 1));
  r.eval_samples = a->samples;
  r.fp32_accuracy = static_cast<double>(a->correct) / n;
  r.int8_accuracy = static_cast<double>(b->correct) / n;
  r.fp32_loss = a->loss_sum / n;
  r.int8_loss = b->loss_sum / n;
  if (!batch.defined()) return Status::InvalidArgument("--quantize int8: the eval split is empty");
  // Speed against fp32 at its fastest in TorchScript too: frozen, BatchNorm folded.
  GRANARY_RETURN_IF_ERROR(CatchTorch("--quantize int8: timing inference", [&] {
    torch::jit::Module frozen = torch::jit::freeze(fp32.value());
    const std::vector<double> rates = InferenceRates({ModuleForward(frozen), ModuleForward(int8->module)}, batch);
    r.fp32_samples_per_s = rates[0];
    r.int8_samples_per_s = rates[1];
  }));
  if (!c.output.save.empty()) {
    r.path = Int8Path(c.output.save);
    GRANARY_RETURN_IF_ERROR(WriteFileAtomically(r.path, int8_bytes.value()).WithContext("--quantize int8"));
  }
  return r;
}

namespace {

// The report as the run's result: --json's "quantized" and one line.
RunResult QuantizedResult(const QuantizedReport& q) {
  RunResult result;
  result.name = "quantized";
  result.json = DumpJson(QuantizedJson(q));
  char line[512];
  std::snprintf(line, sizeof(line),
                "int8  acc %.4f (fp32 %.4f)  loss %.4f (fp32 %.4f)  samples/s %.0f (fp32 %.0f, %.2fx)  "
                "size %.2f MB (fp32 %.2f MB, %.2fx)  layers %d int8, %zu fp32  %s, %d thread%s",
                q.int8_accuracy, q.fp32_accuracy, q.int8_loss, q.fp32_loss, q.int8_samples_per_s,
                q.fp32_samples_per_s, q.int8_samples_per_s / std::max(q.fp32_samples_per_s, 1e-9),
                q.int8_bytes / 1e6, q.fp32_bytes / 1e6,
                static_cast<double>(q.int8_bytes) / std::max<double>(static_cast<double>(q.fp32_bytes), 1),
                q.int8_layers, q.fp32_layers.size(), q.engine.c_str(), q.threads, q.threads == 1 ? "" : "s");
  result.lines.push_back(line + (q.path.empty() ? std::string() : "  -> " + q.path));
  return result;
}

// Rank 0 after the run: the model quantized, measured and written; the run's
// "quantized" result.
class Int8Export : public RunHook {
 public:
  Status AfterRun(RankState& state, std::vector<EpochReport>*) override {
    const ResolvedRun& run = state.run;
    GRANARY_ASSIGN_OR_RETURN(const QuantizedReport q,
                             QuantizeTrained(run.config, *run.db, run.workload, *state.model.net));
    for (const std::string& layer : q.fp32_layers) state.observer.Note("--quantize int8: stays fp32: " + layer);
    state.observer.Result(QuantizedResult(q));
    return Status::OK();
  }
};

// --calibration-batches' bound.
constexpr int kMaxCalibrationBatches = 100000;

class Int8ExportFeature : public Feature {
 public:
  Status Validate(const TrainConfig& c) const override {
    const ShrinkConfig& shrink = c.shrink;
    if (shrink.calibration_batches < 1 || shrink.calibration_batches > kMaxCalibrationBatches) {
      return OutOfRange("--calibration-batches", std::to_string(shrink.calibration_batches),
                        Range(1, kMaxCalibrationBatches));
    }
    if (shrink.quantize == Quantize::kNone && shrink.calibration_batches != ShrinkConfig{}.calibration_batches) {
      return OnlyUsedWith("--calibration-batches", std::to_string(shrink.calibration_batches), "--quantize int8");
    }
    if (shrink.quantize != Quantize::kNone && c.data.synthetic) {
      return Status::InvalidArgument(std::string("--quantize ") + NameOf(shrink.quantize) +
                                     " calibrates on training batches: not with --synthetic (random batches)");
    }
    return Status::OK();
  }

  // The layers that will stay fp32 are named before any rank starts, one
  // line each.
  Status Preflight(const ResolvedRun& run, const ModelBytes&) const override {
    GRANARY_ASSIGN_OR_RETURN(const std::vector<std::string> fp32,
                             CheckQuantizable(run.config, run.workload));
    for (const std::string& layer : fp32) {
      std::fprintf(stderr, "train: --quantize int8: will stay fp32: %s\n", Printable(layer).c_str());
    }
    return Status::OK();
  }

  void Outputs(const TrainConfig& c, std::vector<OutputPath>* outputs) const override {
    if (c.shrink.quantize != Quantize::kInt8) return;
    outputs->push_back({"--quantize int8", Int8Path(c.output.save), OutputKind::kModel});
  }

  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    const TrainConfig& c = state.run.config;
    if (state.rank != 0 || c.data.synthetic || c.shrink.quantize != Quantize::kInt8) return std::unique_ptr<RunHook>();
    return std::unique_ptr<RunHook>(std::make_unique<Int8Export>());
  }
};

}  // namespace

std::unique_ptr<Feature> MakeInt8ExportFeature() { return std::make_unique<Int8ExportFeature>(); }

}  // namespace granary
