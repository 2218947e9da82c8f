// train: data-parallel training from a granary db. Without --rank it is the
// launcher: it checks the db, then runs --ranks copies of itself and waits.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "store/db.h"
#include "trainer/launch.h"
#include "trainer/trainer.h"

namespace {

int Fail(const granary::Status& s, int rank) {
  if (rank > 0) {
    std::fprintf(stderr, "train: rank %d: %s\n", rank, s.message().c_str());
  } else {
    std::fprintf(stderr, "train: %s\n", s.message().c_str());
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
    j["test_loss"] = r.eval_loss;
    j["test_accuracy"] = r.eval_accuracy;
    j["test_samples"] = r.eval_samples;
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  granary::TrainOptions o;
  int rank = -1;
  bool json = false;
  CLI::App app{"Data-parallel training on CPU from a granary db (see README.md)."};
  app.add_option("--db", o.db, "granary db directory (made by `prep build`)")->required();
  app.add_option("--ranks", o.world, "rank processes")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--epochs", o.epochs, "epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "global batch size, split evenly over ranks")->capture_default_str();
  app.add_option("--lr", o.lr, "Adam learning rate")->capture_default_str();
  app.add_option("--dropout", o.dropout, "dropout before the last layer")->capture_default_str();
  app.add_option("--seed", o.seed, "seed for weights, epoch order and dropout")->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks)")->capture_default_str();
  app.add_option("--loader-threads", o.loader_threads, "loader worker threads per rank")->capture_default_str();
  app.add_option("--prefetch", o.prefetch, "batches the loader prepares ahead")->capture_default_str();
  app.add_option("--train-split", o.train_split, "split to train on")->capture_default_str();
  app.add_option("--eval-split", o.eval_split, "split rank 0 evaluates after each epoch (\"\" for none)")
      ->capture_default_str();
  app.add_option("--mean", o.mean, "input normalisation: mean after scaling to [0,1]")->capture_default_str();
  app.add_option("--std", o.stddev, "input normalisation: std after scaling to [0,1]")->capture_default_str();
  std::string shuffle = "full";
  app.add_option("--shuffle", shuffle, "training order: full, block (chunks of consecutive samples, for dbs "
                                       "larger than RAM) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "block", "none"}));
  app.add_flag("--skip-corrupt", o.skip_corrupt, "skip and count corrupt records instead of stopping");
  app.add_flag("--drop-last", o.drop_last, "drop the epoch's tail instead of padding ranks to equal counts");
  std::string augment;
  app.add_option("--augment", augment, "training augmentation: comma list of flip, crop (padding 4), rrc");
  app.add_flag("--json", json, "print one JSON object with every epoch's figures on stdout");
  app.add_option("--rank", rank, "internal: run as this rank")->group("");
  app.add_option("--port", o.port, "internal: rank 0's TCPStore port")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "train: %s (see train --help)\n", e.what());
    return 2;
  }

  auto augment_options = granary::ParseAugment(augment);
  if (!augment_options.ok()) return Fail(augment_options.status(), 0);
  o.augment = augment_options.value();
  o.shuffle = granary::ParseShuffleMode(shuffle).value();  // checked by CLI11

  if (rank < 0) {  // launcher
    {
      auto db = granary::DbReader::Open(o.db);
      if (!db.ok()) return Fail(db.status(), 0);
    }
    if (o.world > 1) {
      auto port = granary::PickFreePort();
      if (!port.ok()) return Fail(port.status(), 0);
      std::vector<std::string> args(argv, argv + argc);
      auto code = granary::LaunchRanks(args, o.world, port.value());
      if (!code.ok()) return Fail(code.status(), 0);
      return code.value();
    }
    rank = 0;
  }
  o.rank = rank;

  const int threads = o.threads > 0 ? o.threads : granary::DefaultThreadsPerRank(o.world);
  if (rank == 0 && !json) {
    std::printf("train: %d rank(s) x %d thread(s), global batch %zu, db %s\n", o.world, threads, o.batch_size,
                o.db.c_str());
    std::fflush(stdout);
  }
  auto on_epoch = [&](const granary::EpochReport& r) {
    if (rank != 0 || json) return;
    std::printf("epoch %d/%d  train_loss %.4f", r.epoch, o.epochs, r.train_loss);
    if (r.evaluated) std::printf("  test_loss %.4f  test_acc %.4f", r.eval_loss, r.eval_accuracy);
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
  auto reports = granary::RunRank(o, on_start, on_epoch);
  if (!reports.ok()) return Fail(reports.status(), rank);
  if (rank == 0 && json) {
    nlohmann::json out = {{"ranks", o.world}, {"threads_per_rank", threads}, {"batch_size", o.batch_size},
                          {"epochs", nlohmann::json::array()}};
    for (const auto& r : reports.value()) out["epochs"].push_back(ToJson(r));
    std::cout << out.dump() << std::endl;
  }
  return 0;
}
