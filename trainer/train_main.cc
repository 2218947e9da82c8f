// train: data-parallel training from a granary db. This file only turns flags
// into a TrainConfig; trainer/run.h runs it (without --rank this process is
// the launcher: it checks the config and the db, then runs --ranks copies of
// itself and waits).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include <map>

#include "base/cli.h"
#include "base/cli_flags.h"
#include "base/file.h"
#include "trainer/config/choices.h"
#include "trainer/config/config.h"
#include "trainer/eval_only.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/loop/rank_model.h"
#include "trainer/run.h"
#include "trainer/tune/tune.h"

namespace {

// A number above 0 (`strictly`) or at least 0. CLI11's own ranges print
// DBL_MAX; a value that is no number is left for CLI11's conversion to name.
CLI::Validator NotNegative(bool strictly) {
  return CLI::Validator(
      [strictly](std::string& value) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') return "";
        if (strictly ? x > 0 : x >= 0) return "";
        return strictly ? "must be > 0" : "must be >= 0";
      },
      strictly ? "POSITIVE" : "NONNEGATIVE");
}

// How the run syncs, is laid out, checkpointed and made lighter, and what it
// leaves behind.
void AddRunFlags(CLI::App& app, granary::TrainConfig& c, granary::ChoiceFlags& choices) {
  app.add_option("--sync", choices.sync, "gradient sync: " + granary::ChoiceNames(c.sync.method))
      ->capture_default_str();
  app.add_option("--bucket-mb", c.sync.bucket_mb, "bucketed sync: MiB of gradients per bucket")->capture_default_str();
  app.add_option("--sync-compress", choices.sync_compress,
                 "bucketed sync: gradients sent as none (float32), fp16, bf16 or powersgd (low-rank, error feedback)")
      ->capture_default_str();
  app.add_option("--powersgd-rank", c.sync.powersgd_rank, "powersgd: rank of the gradient approximation")
      ->capture_default_str();
  app.add_option("--powersgd-warmup", c.sync.powersgd_warmup, "powersgd: uncompressed steps before compressing")
      ->capture_default_str();

  app.add_option("--ranks", c.dist.ranks, "rank processes (on this node)")->capture_default_str();
  app.add_option("--nnodes", c.dist.nnodes, "nodes (machines) of the run, each running --ranks ranks")
      ->capture_default_str();
  app.add_option("--node-rank", c.dist.node_rank, "this node's index, 0 .. --nnodes - 1")->capture_default_str();
  app.add_option("--master-addr", c.dist.host, "node 0's address: rank 0 serves the rendezvous there")
      ->capture_default_str();
  app.add_option("--master-port", c.dist.port, "the rendezvous port on node 0 (needed with --nnodes above 1)");
  app.add_option("--iface", c.dist.iface, "network interface for Gloo (e.g. eth0)");
  app.add_option("--backend", choices.backend,
                 "the ranks' collectives: gloo (TCP), mpi (OpenMPI: shared memory on one machine, where train "
                 "starts the ranks with mpirun itself; or under your mpirun or srun) or auto (mpi inside an MPI "
                 "job, else gloo)")
      ->capture_default_str();
  app.add_option("--timeout", c.dist.timeout_s, "seconds before a lost or hung rank ends the run (rendezvous too)")
      ->capture_default_str();
  app.add_option("--threads", c.dist.threads, "intra-op threads per rank (0: cores / ranks)")->capture_default_str();
  app.add_flag("--oversubscribe", c.dist.oversubscribe, "allow ranks x threads above this machine's cores");
  app.add_option("--pin", c.dist.pin, "pin each rank to its own CPUs (on or off)")->capture_default_str();
  app.add_option("--checkpoint-dir", c.checkpoint.dir,
                 "write checkpoints here: at the end of each epoch and every --checkpoint-every steps");
  app.add_option("--checkpoint-every", c.checkpoint.every, "optimizer steps between checkpoints (0: epoch ends only)")
      ->capture_default_str();
  app.add_option("--keep", c.checkpoint.keep, "newest checkpoints kept")->capture_default_str();
  app.add_option("--resume", c.checkpoint.resume,
                 "continue a run: from the latest checkpoint in --checkpoint-dir (no value), from FILE, or auto: "
                 "the latest if there is one, else a new run (one command for a job a scheduler requeues)")
      ->expected(0, 1)
      ->default_str("latest");
  app.add_option("--save", c.output.save, "write the trained model here as TorchScript (FILE.pt)");
  app.add_option("--metrics", c.output.metrics, "write JSON lines here: every --log-every steps and per epoch");
  app.add_option("--log-every", c.output.log_every, "optimizer steps between --metrics lines")->capture_default_str();
  app.add_option("--report", c.output.report, "write the run's curves here as one self-contained HTML page");
  app.add_option("--quantize", choices.quantize,
                 "after training: none, or int8 (post-training quantization, calibrated on training batches; "
                 "measured against the fp32 model; with --save FILE.pt also writes FILE.int8.pt)")
      ->capture_default_str();
  app.add_option("--calibration-batches", c.shrink.calibration_batches,
                 "--quantize: training batches (of a rank) the activation ranges are observed on")
      ->capture_default_str();
  app.add_option("--prune", c.shrink.prune,
                 "structured pruning: remove this fraction of each layer's channels (conv filters, hidden units), "
                 "gradually over --prune-epochs, shrinking the layers");
  app.add_option("--prune-epochs", c.shrink.prune_epochs,
                 "A-B: prune at the ends of epochs A to B, 1-based (default: the first half of the run)");
  app.add_flag("--synthetic", c.data.synthetic,
               "measure the compute bound: random in-memory batches of the db's shape, no loader, no gradient sync "
               "(the model learns nothing)");
}

void AddFlags(CLI::App& app, granary::TrainConfig& c, granary::ChoiceFlags& choices) {
  granary::DataConfig& d = c.data;
  app.add_option("--db", d.db, "granary db directory (made by `prep build`)")->required();
  app.add_option("--train-split", d.train_split, "split to train on")->capture_default_str();
  app.add_option("--eval-split", d.eval_split,
                 "split evaluated after each epoch, a share per rank (auto: test, else val, never --train-split; "
                 "\"\" for none)")
      ->capture_default_str();
  app.add_option("--input-field", d.input_field, "field to train on (default: image, else the only other field)");
  app.add_option("--loader-threads", d.loader_threads, "loader worker threads per rank")->capture_default_str();
  app.add_option("--prefetch", d.prefetch, "batches the loader prepares ahead")->capture_default_str();
  app.add_option("--shuffle", d.shuffle,
                 "training order: full, block (chunks of consecutive samples, for dbs "
                 "larger than RAM) or none")
      ->capture_default_str();
  app.add_flag("--drop-last", d.drop_last, "drop the epoch's tail instead of padding ranks to equal counts");
  app.add_flag("--skip-corrupt", d.skip_corrupt, "skip and name corrupt records instead of stopping");
  app.add_option("--augment", d.augment, "training augmentation: comma list of flip, crop (padding 4), rrc");
  app.add_option("--mean", d.mean, "input normalisation: mean after scaling to [0,1]")->capture_default_str();
  app.add_option("--std", d.stddev, "input normalisation: std after scaling to [0,1]")->capture_default_str();

  app.add_option("--model", c.model.name,
                 "model: auto (mlp for feature vectors, convnet for images up to 32 px, resnet above), " +
                     granary::KnownModelNames())
      ->capture_default_str();
  app.add_option("--width", c.model.width, "channel (hidden unit) multiplier of the model")->capture_default_str();
  app.add_option("--dropout", c.model.dropout, "dropout before the last layer")->capture_default_str();
  app.add_option("--precision", choices.precision, "fp32, or bf16 (CPU autocast; fp32 weights, optimiser and loss)")
      ->capture_default_str();
  app.add_flag("--channels-last", c.model.channels_last, "NHWC batches and conv weights (oneDNN's fast layout)");
  app.add_flag("--new-head", c.model.new_head,
               "with --model FILE.pt trained on other classes: its last linear layer made anew with one output per "
               "class of the db, to fine-tune it");
  app.add_flag("--freeze", c.model.freeze,
               "with --model FILE.pt: only its last linear layer trains; the rest (weights, BatchNorm statistics) is "
               "kept as it is, and backward stops at that layer (a linear probe: fine-tuning at a fraction of the "
               "cost)");

  app.add_option("--optimizer", c.optim.optimizer, "optimizer: " + granary::KnownOptimizerNames())
      ->capture_default_str();
  // lr and weight decay below 0 stand for "the optimizer's default" inside
  // TrainConfig: a user's negative value is refused here, not taken for it.
  app.add_option("--lr", c.optim.lr, "learning rate (default: sgd 0.01, adam and adamw 0.001)")
      ->check(NotNegative(/*strictly=*/true));
  app.add_option("--momentum", c.optim.momentum, "sgd: momentum")->capture_default_str();
  app.add_flag("--nesterov", c.optim.nesterov, "sgd: Nesterov momentum");
  app.add_option("--weight-decay", c.optim.weight_decay, "weight decay (default: 0, adamw 0.01)")
      ->check(NotNegative(/*strictly=*/false));
  app.add_option("--epochs", c.optim.epochs, "epochs")->capture_default_str();
  app.add_option("--batch-size", c.optim.batch_size, "global batch size, split evenly over ranks")
      ->capture_default_str();
  app.add_option("--accum", c.optim.accum,
                 "gradient accumulation: micro-batches per step (each rank's batch split this many ways; "
                 "only the last is synchronised)")
      ->capture_default_str();
  app.add_option("--seed", c.optim.seed, "seed for weights, epoch order and dropout")
      ->capture_default_str()
      ->check(NotNegative(/*strictly=*/false));
  app.add_option("--schedule", c.optim.schedule,
                 "learning rate over the run: constant, step (x0.1 at 1/2 and 3/4 of it) or cosine (to 0)")
      ->capture_default_str();
  app.add_option("--warmup-epochs", c.optim.warmup_epochs, "linear warm-up to the peak rate over this many epochs")
      ->capture_default_str();
  app.add_option("--lr-scaling", choices.lr_scaling, "none, or linear: peak rate = --lr x --batch-size / --base-batch")
      ->capture_default_str();
  app.add_option("--base-batch", c.optim.base_batch, "the batch --lr is meant for (--lr-scaling linear)")
      ->capture_default_str();
  app.add_option("--label-smoothing", c.optim.label_smoothing, "label smoothing of the training loss")
      ->capture_default_str();
  app.add_option("--class-weights", c.optim.class_weights,
                 "none, or balanced: the loss weighs each class by the inverse of its share of the train split "
                 "(for imbalanced classes)")
      ->capture_default_str();
  app.add_option("--stop-at-accuracy", c.optim.stop_at_accuracy,
                 "stop after the first evaluation at or above this test accuracy (0..1; 0: none)")
      ->capture_default_str();
  AddRunFlags(app, c, choices);
}

}  // namespace

int main(int argc, char** argv) {
  granary::RaiseOpenFileLimit();
  granary::RemoveTemporariesOnStopSignals();  // a stopped rank leaves no half-written checkpoint
  granary::TrainConfig config;
  int rank = -1;
  bool json = false;
  CLI::App app{"Data-parallel training on CPU from a granary db (see README.md)."};
  granary::ChoiceFlags choices(config);  // parsed into config once the command line is
  AddFlags(app, config, choices);
  bool eval_only = false;
  app.add_flag("--eval-only", eval_only,
               "evaluate --model FILE.pt (fp32 or INT8) on the db's eval split: accuracy, loss, inference samples/s; "
               "no training");
  app.add_flag("--json", json, "print one JSON object with the config and every epoch's figures on stdout");
  app.add_option("--rank", rank, "internal: run as this rank")->group("");
  app.add_option("--port", config.dist.port, "internal: rank 0's TCPStore port")->group("");
  app.add_option("--rendezvous-file", config.dist.rendezvous_file, "internal: the launcher's FileStore (one machine)")
      ->group("");
  std::string layout;
  app.add_option("--layout", layout, "internal: the launcher's layout (JSON)")->group("");
  granary::TuneRequest tune;
  app.add_flag("--tune", tune.tune,
               "measure layouts (ranks x threads, channels-last) on this db and model, then train with the fastest");
  app.add_flag("--tune-only", tune.only, "measure and print the layouts (--json: as JSON), do not train");
  app.add_option("--tune-seconds", tune.seconds, "--tune: seconds of measured training per candidate")
      ->capture_default_str();
  app.add_flag("--tune-numerics", tune.numerics,
               "--tune may also choose what changes the numerics: bf16, a doubled global batch");
  app.add_option("--tune-probe", config.data.probe_s, "internal: train this many seconds after warm-up, report, stop")
      ->group("");
  app.add_option("--tune-table", tune.table_json, "internal: the table --tune chose this run by (JSON)")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // PyTorch scripts' flags, and what train calls them.
    static const std::map<std::string, std::string> kAliases = {
        {"--num-workers", "--loader-threads"}, {"--workers", "--loader-threads"}, {"--data", "--db"},
        {"--dataset", "--db"}, {"--nproc-per-node", "--ranks"}, {"--world-size", "--ranks"},
        {"--learning-rate", "--lr"}, {"--bs", "--batch-size"},
        {"--device", "train runs on CPUs (--ranks and --threads say how many)"},
        {"--gpus", "train runs on CPUs (--ranks and --threads say how many)"},
        {"--cuda", "train runs on CPUs (--ranks and --threads say how many)"}};
    std::fprintf(stderr, "train: %s%s (see train --help)\n", e.what(),
                 granary::ParseErrorAdvice(app, kAliases).c_str());
    return 2;
  }
  if (granary::Status parsed = choices.ParseInto(&config); !parsed.ok()) return granary::PrintFailure("train", parsed);
  const std::vector<std::string> args(argv, argv + argc);
  // What --tune runs its candidates with: the command line less the flags a candidate sets and --tune's own.
  tune.args = granary::WithoutOptions(
      args, {"--ranks", "--threads", "--batch-size", "--precision", "--tune-seconds", "--tune-probe", "--tune-table"},
      {"--channels-last", "--tune", "--tune-only", "--tune-numerics"});
  std::vector<std::string> given;  // the flags on the command line, for --eval-only's check
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() > 0) given.push_back(option->get_name());
  }
  const int code =
      eval_only ? granary::RunEvalOnly(config, json, given)
                : granary::RunTrain(config, rank, json, args, layout, tune, given,
                                     granary::Environment::OfProcess());
  // A model's dry forward past --timeout still runs: no static destructor may run under it.
  if (granary::DryForwardLeftRunning()) granary::ExitAtOnce(code);
  granary::HeartbeatEnd(granary::RankEnd::kExited);  // a rank's launcher: it said why, if it failed
  if (granary::Status flushed = granary::FlushStdout(); code == 0 && !flushed.ok()) {
    std::fprintf(stderr, "train: %s\n", flushed.message().c_str());
    return 1;
  }
  return code;
}
