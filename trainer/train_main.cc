// train: data-parallel training from a granary db. This file only turns flags
// into a TrainConfig; without --rank the process is the launcher (it checks
// the config and the db, then runs --ranks copies of itself and waits).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "store/db.h"
#include "store/file.h"
#include "store/json_text.h"
#include "trainer/config.h"
#include "trainer/gradient_sync.h"
#include "trainer/launch.h"
#include "trainer/models/registry.h"
#include "trainer/trainer.h"

namespace {

int Fail(const granary::Status& s, int rank) {
  if (rank > 0) {
    std::fprintf(stderr, "train: rank %d: %s\n", rank, granary::Printable(s.message()).c_str());
  } else {
    std::fprintf(stderr, "train: %s\n", granary::Printable(s.message()).c_str());
  }
  return 1;
}

nlohmann::json ToJson(const granary::EpochReport& r) {
  nlohmann::json j = {{"epoch", r.epoch},
                      {"train_loss", r.train_loss},
                      {"seconds", r.seconds},
                      {"samples_per_s", r.samples_per_s},
                      {"stall_fraction", r.stall_fraction},
                      {"comm_fraction", r.comm_fraction},
                      {"queue_depth", r.queue_depth}};
  if (r.evaluated) {
    j["test_loss"] = r.test_loss;
    j["test_accuracy"] = r.test_accuracy;
    j["test_samples"] = r.test_samples;
  }
  return j;
}

void AddFlags(CLI::App& app, granary::TrainConfig& c) {
  granary::DataConfig& d = c.data;
  app.add_option("--db", d.db, "granary db directory (made by `prep build`)")->required();
  app.add_option("--train-split", d.train_split, "split to train on")->capture_default_str();
  app.add_option("--eval-split", d.eval_split, "split rank 0 evaluates after each epoch (\"\" for none)")
      ->capture_default_str();
  app.add_option("--loader-threads", d.loader_threads, "loader worker threads per rank")->capture_default_str();
  app.add_option("--prefetch", d.prefetch, "batches the loader prepares ahead")->capture_default_str();
  app.add_option("--shuffle", d.shuffle, "training order: full, block (chunks of consecutive samples, for dbs "
                                         "larger than RAM) or none")
      ->capture_default_str();
  app.add_flag("--drop-last", d.drop_last, "drop the epoch's tail instead of padding ranks to equal counts");
  app.add_flag("--skip-corrupt", d.skip_corrupt, "skip and name corrupt records instead of stopping");
  app.add_option("--augment", d.augment, "training augmentation: comma list of flip, crop (padding 4), rrc");
  app.add_option("--mean", d.mean, "input normalisation: mean after scaling to [0,1]")->capture_default_str();
  app.add_option("--std", d.stddev, "input normalisation: std after scaling to [0,1]")->capture_default_str();

  app.add_option("--model", c.model.name, "model: " + granary::KnownModelNames())->capture_default_str();
  app.add_option("--dropout", c.model.dropout, "dropout before the last layer")->capture_default_str();

  app.add_option("--optimizer", c.optim.optimizer, "optimizer: adam")->capture_default_str();
  app.add_option("--lr", c.optim.lr, "learning rate")->capture_default_str();
  app.add_option("--epochs", c.optim.epochs, "epochs")->capture_default_str();
  app.add_option("--batch-size", c.optim.batch_size, "global batch size, split evenly over ranks")
      ->capture_default_str();
  app.add_option("--seed", c.optim.seed, "seed for weights, epoch order and dropout")->capture_default_str();

  app.add_option("--sync", c.sync.method, "gradient sync: " + granary::KnownGradientSyncNames())
      ->capture_default_str();

  app.add_option("--ranks", c.dist.ranks, "rank processes")->capture_default_str();
  app.add_option("--threads", c.dist.threads, "intra-op threads per rank (0: cores / ranks)")->capture_default_str();
  app.add_flag("--oversubscribe", c.dist.oversubscribe, "allow ranks x threads above this machine's cores");
}

}  // namespace

int main(int argc, char** argv) {
  granary::RaiseOpenFileLimit();
  granary::TrainConfig config;
  int rank = -1;
  bool json = false;
  CLI::App app{"Data-parallel training on CPU from a granary db (see README.md)."};
  AddFlags(app, config);
  app.add_flag("--json", json, "print one JSON object with the config and every epoch's figures on stdout");
  app.add_option("--rank", rank, "internal: run as this rank")->group("");
  app.add_option("--port", config.dist.port, "internal: rank 0's TCPStore port")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "train: %s (see train --help)\n", e.what());
    return 2;
  }
  const int cores = granary::CoreCount();
  if (granary::Status valid = config.Validate(cores); !valid.ok()) return Fail(valid, rank);

  if (rank < 0) {  // the launcher
    {
      auto db = granary::DbReader::Open(config.data.db);
      if (!db.ok()) return Fail(db.status(), 0);
    }
    if (config.dist.ranks > 1) {
      auto port = granary::PickFreePort();
      if (!port.ok()) return Fail(port.status(), 0);
      granary::LaunchOptions launch;
      launch.args.assign(argv, argv + argc);
      launch.ranks = config.dist.ranks;
      launch.port = port.value();
      auto outcome = granary::LaunchRanks(launch);
      if (!outcome.ok()) return Fail(outcome.status(), 0);
      if (!outcome->failure.empty()) std::fprintf(stderr, "train: %s\n", outcome->failure.c_str());
      return outcome->exit_code;
    }
    rank = 0;
  }

  if (rank == 0 && !json) {
    std::printf("train: %d rank(s) x %d thread(s), global batch %lld, db %s\n", config.dist.ranks,
                config.ThreadsPerRank(cores), static_cast<long long>(config.optim.batch_size),
                granary::Printable(config.data.db).c_str());
    std::printf("train: config %s\n", config.ToJson().c_str());
    std::fflush(stdout);
  }
  auto on_epoch = [&](const granary::EpochReport& r) {
    if (rank != 0 || json) return;
    std::printf("epoch %d/%d  train_loss %.4f", r.epoch, config.optim.epochs, r.train_loss);
    if (r.evaluated) std::printf("  test_loss %.4f  test_acc %.4f", r.test_loss, r.test_accuracy);
    std::printf("  samples/s %.0f  stall %.1f%%  queue %.1f  comm %.1f%%  time %.1fs\n", r.samples_per_s,
                100 * r.stall_fraction, r.queue_depth, 100 * r.comm_fraction, r.seconds);
    std::fflush(stdout);
  };
  auto on_start = [&](const granary::EpochPlanReport& plan) {
    if (rank != 0 || json) return;
    std::printf("train: %llu samples per rank per epoch", static_cast<unsigned long long>(plan.samples_per_rank));
    if (plan.padded > 0) std::printf(", %llu padded", static_cast<unsigned long long>(plan.padded));
    if (plan.dropped > 0) std::printf(", %llu dropped", static_cast<unsigned long long>(plan.dropped));
    std::printf("\n");
    std::fflush(stdout);
  };
  auto reports = granary::RunRank(config, rank, on_start, on_epoch);
  if (!reports.ok()) return Fail(reports.status(), rank);
  if (rank == 0 && json) {
    nlohmann::json out = {{"ranks", config.dist.ranks},
                          {"threads_per_rank", config.ThreadsPerRank(cores)},
                          {"batch_size", config.optim.batch_size},
                          {"config", granary::ParseJson(config.ToJson())},
                          {"epochs", nlohmann::json::array()}};
    for (const auto& r : reports.value()) out["epochs"].push_back(ToJson(r));
    std::cout << granary::DumpJson(out) << std::endl;
  }
  return 0;
}
