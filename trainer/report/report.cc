#include "trainer/report/report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/json_text.h"
#include "trainer/report/epoch_json.h"
#include "trainer/report/html_report.h"

namespace granary {
namespace {

// Progress lines are redrawn at most this often.
constexpr std::chrono::milliseconds kRedraw(250);

std::string Duration(double seconds) {
  char text[32];
  const long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) {
    std::snprintf(text, sizeof(text), "%ldh%02ldm", s / 3600, s / 60 % 60);
  } else if (s >= 60) {
    std::snprintf(text, sizeof(text), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lds", s);
  }
  return text;
}

}  // namespace

RunReport::RunReport(const TrainConfig& config, const Layout& layout, int rank, bool json)
    : config_(config),
      layout_(layout),
      rank_(rank),
      json_(json),
      progress_(rank == 0 && !json && ::isatty(STDERR_FILENO)) {}

RunReport::~RunReport() {
  if (metrics_ != nullptr) std::fclose(metrics_);
}

Status RunReport::Start() {
  if (rank_ == 0 && !config_.output.metrics.empty()) {
    // A resumed run continues the lines of the run it resumes.
    metrics_ = std::fopen(config_.output.metrics.c_str(), config_.checkpoint.resume.empty() ? "w" : "a");
    if (metrics_ == nullptr) {
      return Status::IOError(config_.output.metrics, "--metrics: creating", errno);
    }
  }
  if (!text()) return Status::OK();
  std::printf("train: %s\n", layout_.Describe().c_str());
  std::printf("train: global batch %lld, db %s%s\n", static_cast<long long>(config_.optim.batch_size),
              Printable(config_.data.db).c_str(),
              config_.data.synthetic ? " (--synthetic: random batches, no loader, no sync)" : "");
  std::printf("train: config %s\n", config_.ToJson().c_str());
  if (!config_.data.synthetic && config_.data.eval_split.empty()) {
    std::printf("train: no evaluation: no split to evaluate on (--eval-split auto takes test, else val, other than "
                "--train-split; prep build --val-fraction F holds a val split out of train)\n");
  }
  FlushStdoutNoting();
  return Status::OK();
}

void RunReport::Plan(const EpochPlanReport& plan) {
  if (!text()) return;
  std::printf("train: model %s, %llu parameters, peak lr %g\n", plan.model.c_str(),
              static_cast<unsigned long long>(plan.parameters), plan.peak_lr);
  std::printf("train: %llu samples per rank per epoch", static_cast<unsigned long long>(plan.samples_per_rank));
  if (plan.padded > 0) std::printf(", %llu padded", static_cast<unsigned long long>(plan.padded));
  if (plan.dropped > 0) std::printf(", %llu dropped", static_cast<unsigned long long>(plan.dropped));
  // A batch larger than a rank's epoch (a 0 too many) makes each epoch one short step: said, not left to be guessed.
  const int64_t rank_batch = config_.optim.batch_size / config_.World();
  if (rank_batch > 0 && static_cast<uint64_t>(rank_batch) > plan.samples_per_rank) {
    std::printf(": one step an epoch (a rank's batch, %lld of --batch-size %lld, is larger)",
                static_cast<long long>(rank_batch), static_cast<long long>(config_.optim.batch_size));
  }
  std::printf("\n");
  FlushStdoutNoting();
}

void RunReport::Step(const StepReport& step) {
  window_loss_ += step.loss;
  ++window_steps_;
  StepReport s = step;
  if (s.global_step % config_.output.log_every == 0) {
    s.loss = window_loss_ / window_steps_;  // the mean over the window, not one batch's
    window_loss_ = 0;
    window_steps_ = 0;
    logged_steps_.push_back(s);
    if (metrics_ != nullptr) {
      WriteMetrics(DumpJson(nlohmann::json{{"type", "step"},
                                           {"epoch", s.epoch},
                                           {"step", s.step},
                                           {"global_step", s.global_step},
                                           {"loss", s.loss},
                                           {"epoch_loss", s.epoch_loss},
                                           {"lr", s.lr},
                                           {"samples_per_s", s.samples_per_s},
                                           {"seconds", s.seconds}}));
    }
  }
  if (!progress_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_drawn_ < kRedraw && s.step < s.steps) return;
  last_drawn_ = now;
  const double rate = s.step > 0 ? s.seconds / static_cast<double>(s.step) : 0;  // seconds per step
  const double left = rate * static_cast<double>(s.steps - s.step) +
                      rate * static_cast<double>(s.steps) * (config_.optim.epochs - s.epoch);
  std::fprintf(stderr, "\r\033[Kepoch %d/%d  step %llu/%llu  loss %.4f  samples/s %.0f  ETA %s", s.epoch,
               config_.optim.epochs, static_cast<unsigned long long>(s.step), static_cast<unsigned long long>(s.steps),
               s.epoch_loss, s.samples_per_s, Duration(left).c_str());
  std::fflush(stderr);
  line_open_ = true;
}

void RunReport::Epoch(const EpochReport& r) {
  if (metrics_ != nullptr) {
    nlohmann::json j = EpochToJson(r);
    j["type"] = "epoch";
    WriteMetrics(DumpJson(j));
  }
  if (line_open_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    line_open_ = false;
  }
  if (!text()) return;
  std::printf("epoch %d/%d  train_loss %.4f%s", r.epoch, config_.optim.epochs, r.train_loss, r.line_part.c_str());
  std::printf("  lr %.3g  samples/s %.0f  stall %.1f%%  queue %.1f  compute %.1f%%  sync wait %.1f%%  time %.1fs\n",
              r.lr, r.samples_per_s, 100 * r.stall_fraction, r.queue_depth, 100 * r.compute_fraction,
              100 * r.comm_fraction, r.seconds);
  for (const std::string& line : r.lines_after) std::printf("%s\n", line.c_str());
  FlushStdoutNoting();
}

void RunReport::Result(const RunResult& result) {
  results_.push_back(result);
  if (metrics_ != nullptr) {
    nlohmann::json j = ParseJson(result.json);
    j["type"] = result.name;
    WriteMetrics(DumpJson(j));
  }
  if (!text()) return;
  for (const std::string& line : result.lines) std::printf("%s\n", line.c_str());
  FlushStdoutNoting();
}

void RunReport::Note(const std::string& line) {
  if (line_open_) {
    std::fprintf(stderr, "\r\033[K");
    line_open_ = false;
  }
  std::fprintf(stderr, "train: %s\n", Printable(line).c_str());
  std::fflush(stderr);
}

void RunReport::WriteMetrics(const std::string& line) {
  if (std::fprintf(metrics_, "%s\n", line.c_str()) < 0 || std::fflush(metrics_) != 0) {
    if (metrics_error_.ok()) metrics_error_ = Status::IOError(config_.output.metrics, "--metrics: write", errno);
  }
}

Status RunReport::Finish(const std::vector<EpochReport>& reports) {
  if (rank_ != 0) return Status::OK();
  if (metrics_ != nullptr) {
    const int closed = std::fclose(metrics_);
    metrics_ = nullptr;
    if (closed != 0 && metrics_error_.ok()) {
      metrics_error_ = Status::IOError(config_.output.metrics, "--metrics: close", errno);
    }
  }
  GRANARY_RETURN_IF_ERROR(metrics_error_);
  if (!config_.output.report.empty()) {
    const std::string page = RenderHtmlReport(config_, layout_, reports, logged_steps_);
    GRANARY_RETURN_IF_ERROR(WriteFileAtomically(config_.output.report, page).WithContext("--report"));
  }
  if (!json_) return Status::OK();
  nlohmann::json out = {{"ranks", config_.World()},
                        {"threads_per_rank", layout_.threads},
                        {"layout", ParseJson(layout_.ToJson())},
                        {"layout_text", layout_.Describe()},
                        {"batch_size", config_.optim.batch_size},
                        {"config", ParseJson(config_.ToJson())},
                        {"epochs", nlohmann::json::array()}};
  for (const EpochReport& r : reports) out["epochs"].push_back(EpochToJson(r));
  if (!tune_table_.empty()) out["tune"] = ParseJson(tune_table_);
  for (const RunResult& result : results_) out[result.name] = ParseJson(result.json);
  std::cout << DumpJson(out) << '\n';
  FlushStdoutNoting();
  return Status::OK();
}

}  // namespace granary
