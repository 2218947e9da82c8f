#include "trainer/report.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "store/json_text.h"

namespace granary {
namespace {

nlohmann::json EpochJson(const EpochReport& r) {
  nlohmann::json j = {{"epoch", r.epoch},
                      {"train_loss", r.train_loss},
                      {"lr", r.lr},
                      {"seconds", r.seconds},
                      {"samples_per_s", r.samples_per_s},
                      {"stall_fraction", r.stall_fraction},
                      {"comm_fraction", r.comm_fraction},
                      {"compute_fraction", r.compute_fraction},
                      {"queue_depth", r.queue_depth}};
  if (r.evaluated) {
    j["test_loss"] = r.test_loss;
    j["test_accuracy"] = r.test_accuracy;
    j["test_samples"] = r.test_samples;
  }
  return j;
}

}  // namespace

RunReport::RunReport(const TrainConfig& config, const Layout& layout, int rank, bool json)
    : config_(config), layout_(layout), rank_(rank), json_(json) {}

void RunReport::Start() const {
  if (!text()) return;
  std::printf("train: %s\n", layout_.Describe().c_str());
  std::printf("train: global batch %lld, db %s%s\n", static_cast<long long>(config_.optim.batch_size),
              Printable(config_.data.db).c_str(),
              config_.data.synthetic ? " (--synthetic: random batches, no loader, no sync)" : "");
  std::printf("train: config %s\n", config_.ToJson().c_str());
  std::fflush(stdout);
}

void RunReport::Plan(const EpochPlanReport& plan) const {
  if (!text()) return;
  std::printf("train: model %s, %llu parameters, peak lr %g\n", plan.model.c_str(),
              static_cast<unsigned long long>(plan.parameters), plan.peak_lr);
  std::printf("train: %llu samples per rank per epoch", static_cast<unsigned long long>(plan.samples_per_rank));
  if (plan.padded > 0) std::printf(", %llu padded", static_cast<unsigned long long>(plan.padded));
  if (plan.dropped > 0) std::printf(", %llu dropped", static_cast<unsigned long long>(plan.dropped));
  std::printf("\n");
  std::fflush(stdout);
}

void RunReport::Epoch(const EpochReport& r) const {
  if (!text()) return;
  std::printf("epoch %d/%d  train_loss %.4f", r.epoch, config_.optim.epochs, r.train_loss);
  if (r.evaluated) std::printf("  test_loss %.4f  test_acc %.4f", r.test_loss, r.test_accuracy);
  std::printf("  lr %.3g  samples/s %.0f  stall %.1f%%  queue %.1f  compute %.1f%%  sync wait %.1f%%  time %.1fs\n",
              r.lr, r.samples_per_s, 100 * r.stall_fraction, r.queue_depth, 100 * r.compute_fraction,
              100 * r.comm_fraction, r.seconds);
  std::fflush(stdout);
}

void RunReport::Finish(const std::vector<EpochReport>& reports) const {
  if (rank_ != 0 || !json_) return;
  nlohmann::json out = {{"ranks", config_.dist.ranks},
                        {"threads_per_rank", layout_.threads},
                        {"layout", ParseJson(layout_.ToJson())},
                        {"layout_text", layout_.Describe()},
                        {"batch_size", config_.optim.batch_size},
                        {"config", ParseJson(config_.ToJson())},
                        {"epochs", nlohmann::json::array()}};
  for (const EpochReport& r : reports) out["epochs"].push_back(EpochJson(r));
  std::cout << DumpJson(out) << std::endl;
}

}  // namespace granary
