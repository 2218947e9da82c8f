// End to end, checkpoints: a slow disk, a killed run resumed exactly, on
// another world size, and with gradient compression.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// A slow disk (fsync sleeps 3 s, by a preloaded shim) under
// --timeout 2. Rank 0 writes checkpoints in the background, so its peer never
// waits for its disk in a collective; one due while another is being written
// is skipped with a note; the run's last is written whole before it ends.
TEST_F(EndToEnd, ASlowCheckpointDiskDoesNotEndTheRun) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string ck = dir_.Sub("ck");
  auto r = RunCommand(std::string("LD_PRELOAD=") + GRANARY_SLOW_FSYNC_LIB + " GRANARY_TEST_FSYNC_DELAY_MS=3000 " +
                          kTrain + " --db " + db + " --ranks 2 --epochs 2 --timeout 2 --eval-split '' " +
                          "--checkpoint-dir " + ck + " --checkpoint-every 3 --json",
                      dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("skipped: the one before is still being written"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["epochs"].size(), 2u);
  // The newest checkpoint is the run's end (FORMAT.md: magic, u32 header length, JSON header).
  auto latest = RunCommand("(ls " + ck + " | tail -1)", dir_);
  ASSERT_EQ(latest.out.size(), 21u) << latest.out << latest.err;  // step-NNNNNNNNNN.ckpt
  const auto header = CheckpointHeaderOf(ck + "/" + latest.out.substr(0, 20));
  ASSERT_TRUE(header.is_object());
  EXPECT_EQ(header["at"]["epoch"], 2) << header["at"];
  EXPECT_EQ(header["at"]["position"], 0) << header["at"];
}

// A --checkpoint-dir on a disk too small (a tmpfs in a private mount
// namespace, as the full-disk prep test): with no room for one checkpoint the
// run is refused before any rank starts, as is a --save without room for the
// model; with room for two of the four checkpoints --keep 3 needs, it is
// warned of, and the checkpoint that does not fit ends the run naming its
// size and the one to resume from; on the disk grown, --resume continues
// from there.
TEST_F(EndToEnd, ACheckpointDiskWithoutRoomIsSaidBeforeTheRunAndAtTheCheckpoint) {
  if (RunCommand("unshare -rm true", dir_).exit_code != 0) GTEST_SKIP() << "no unshare: user namespaces are off";
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string disk = dir_.Sub("disk"), ck = disk + "/ck";
  fs::create_directory(disk);
  const std::string train = kTrain + " --db " + db + " --ranks 2 --epochs 3 --model resnet --eval-split \"\" " +
                            "--checkpoint-dir " + ck;
  auto r = RunCommand("unshare -rm sh -c 'mount -t tmpfs -o size=3m tmpfs " + disk + " && " + train +
                          "; echo first $? >&2; " + kTrain + " --db " + db + " --model convnet --save " + disk +
                          "/m.pt; echo save $? >&2; mount -o remount,size=9m " + disk + " && " + train +
                          "; echo second $? >&2; mount -o remount,size=64m " + disk + " && " + train + " --resume'",
                      dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t second = r.err.find("first 1\n");
  ASSERT_NE(second, std::string::npos) << r.err;
  const std::string first_run = r.err.substr(0, second);
  EXPECT_NE(first_run.find("train: --checkpoint-dir " + ck + ": its disk has 3.1 MB free, less than a checkpoint of "
                           "this run takes, about 3.7 MB (the model and the optimizer's state): the run would end at "
                           "its first checkpoint"),
            std::string::npos)
      << first_run;
  EXPECT_EQ(first_run.find("rank 1"), std::string::npos) << first_run;  // refused before any rank started
  EXPECT_NE(r.err.find("train: --save " + disk + "/m.pt: its disk has 3.1 MB free, less than the model takes, about "
                       "13 MB: the run would end without it; make room, or choose another path\nsave 1\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("train: warning: --checkpoint-dir " + ck + ": its disk has 9.4 MB free, and its checkpoints, "
                       "about 3.7 MB (the model and the optimizer's state) each, need 15 MB (--keep 3 and the next",
                       second),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("No space left on device (errno 28): the checkpoint of step 96 (3.8 MB) does not fit; make "
                       "room, or pass a smaller --keep or another --checkpoint-dir (--resume continues from " +
                           ck + "/step-0000000064.ckpt)",
                       second),
            std::string::npos)
      << r.err;
  const size_t third = r.err.find("second 1\n");
  ASSERT_NE(third, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("resuming from " + ck + "/step-0000000064.ckpt", third), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("warning", third), std::string::npos) << r.err;  // room for two more beside the two kept
}

// Ctrl-C (SIGINT to the launcher and its ranks, as a terminal sends it)
// or SIGTERM to the launcher while a checkpoint is being written (fsync made
// slow, so the signal lands inside the write): the run stops, and no
// temporary file (step-N.ckpt.tmp-XXXXXX) is left in the checkpoint
// directory. (Python starts the run: a shell's background job ignores SIGINT.)
TEST_F(EndToEnd, AStopSignalDuringACheckpointWriteLeavesNoTemporaryFile) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  for (const std::string signal : {"SIGINT", "SIGTERM"}) {
    SCOPED_TRACE(signal);
    const std::string ck = dir_.Sub("ck-" + signal);
    testing::WriteFile(dir_.Sub("stop.py"), R"(
import os, signal, subprocess, sys, time
ck, sig = sys.argv[1], getattr(signal, sys.argv[2])
env = dict(os.environ, LD_PRELOAD=")" + std::string(GRANARY_SLOW_FSYNC_LIB) + R"(", GRANARY_TEST_FSYNC_DELAY_MS="4000")
run = subprocess.Popen([")" + kTrain + R"(", "--db", ")" + db + R"(", "--ranks", "2", "--epochs", "50",
                        "--eval-split", "", "--checkpoint-dir", ck, "--checkpoint-every", "5"],
                       env=env, stdout=subprocess.DEVNULL, start_new_session=True)
tmp = lambda: [n for n in (os.listdir(ck) if os.path.isdir(ck) else []) if ".tmp-" in n]
for _ in range(600):
    if tmp():
        break
    time.sleep(0.1)
print(len(tmp()))
os.killpg(run.pid, sig) if sig == signal.SIGINT else run.send_signal(sig)
print("status", 128 - run.wait())
print(len(tmp()))
)");
    auto r = RunCommand("/usr/bin/python3 " + dir_.Sub("stop.py") + " " + ck + " " + signal, dir_);
    EXPECT_EQ(r.out, "1\nstatus " + std::string(signal == "SIGINT" ? "130" : "143") + "\n0\n") << r.err;
  }
}

// A run told to stop (SIGTERM: a scheduler's preemption; Ctrl-C) while it
// keeps checkpoints finishes its step on every rank, saves it and ends with
// 128 + the signal, naming the file; resumed, it ends with the weights of a
// run never stopped. Without --checkpoint-dir, the stop says nothing was kept,
// on one rank as on two.
TEST_F(EndToEnd, AStoppedRunSavesTheStepItReachedAndResumesExactly) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 3000 --no-progress", dir_).exit_code, 0);
  const std::string args = "--db " + db + " --epochs 2 --optimizer sgd --lr 0.02 --momentum 0.9 --ranks 2 --json";
  auto whole = TrainJson(args, dir_);
  ASSERT_EQ(whole["epochs"].size(), 2u);
  // Stopped once its first epoch is reported: in the middle of the second (47 steps an epoch).
  const std::string ck = dir_.Sub("ck"), metrics = dir_.Sub("m.jsonl");
  testing::WriteFile(dir_.Sub("stop.py"), R"(
import os, signal, subprocess, sys, time
run = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
while run.poll() is None and not (os.path.exists(sys.argv[1]) and '"epoch"' in open(sys.argv[1]).read()):
    time.sleep(0.05)
run.send_signal(signal.SIGTERM)
print(run.wait(), run.stderr.read().strip().splitlines()[-1])
)");
  auto stopped = RunCommand("/usr/bin/python3 " + dir_.Sub("stop.py") + " " + metrics + " " + kTrain + " " + args +
                                " --checkpoint-dir " + ck + " --metrics " + metrics,
                            dir_);
  ASSERT_EQ(stopped.out.substr(0, 4), "143 ") << stopped.out << stopped.err;
  EXPECT_NE(stopped.out.find("train: stopped by SIGTERM; the step it reached is saved in " + ck + "/step-"),
            std::string::npos) << stopped.out;
  auto resumed = TrainJson(args + " --checkpoint-dir " + ck + " --resume", dir_);
  ASSERT_EQ(resumed["epochs"].size(), 1u) << "resumed in the second epoch";
  EXPECT_EQ(resumed["epochs"][0]["weights_hash"], whole["epochs"][1]["weights_hash"]);
  EXPECT_EQ(resumed["epochs"][0]["test_loss"], whole["epochs"][1]["test_loss"]);

  auto unkept = RunCommand("/usr/bin/python3 " + dir_.Sub("stop.py") + " " + dir_.Sub("m2.jsonl") + " " + kTrain +
                               " " + args + " --metrics " + dir_.Sub("m2.jsonl"),
                           dir_);
  const std::string unkept_line = "143 train: stopped by SIGTERM; nothing of the run was kept (with --checkpoint-dir "
                                  "DIR a stop saves the step it reached, and --resume latest goes on from it)\n";
  EXPECT_EQ(unkept.out, unkept_line) << unkept.err;
  // One rank trains in train's own process: it ended without a word, killed by the signal.
  std::string one_rank = args;
  one_rank.replace(one_rank.find("--ranks 2"), 9, "--ranks 1");
  auto unkept_one = RunCommand("/usr/bin/python3 " + dir_.Sub("stop.py") + " " + dir_.Sub("m3.jsonl") + " " + kTrain +
                                   " " + one_rank + " --metrics " + dir_.Sub("m3.jsonl"),
                               dir_);
  EXPECT_EQ(unkept_one.out, unkept_line) << unkept_one.err;
}

// Schedulers send a signal ahead of a time limit for the job to save
// (Slurm's --signal=USR1@120, submitit's SIGUSR2): SIGUSR1 ended train's
// launcher at once, without a word, and its ranks with it, nothing saved.
// Now it stops the run as SIGTERM does, the step saved, and the job's one
// command line (--resume auto: a new run where no checkpoint is yet, as on its
// first start) goes on from it when requeued; `launch` passes it to
// its ranks' script, which does what it does with it (Lightning saves and
// requeues), and the run goes on.
TEST_F(EndToEnd, ASchedulersSaveSignalStopsTrainSavedAndReachesALaunchedScript) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 1000 --no-progress", dir_).exit_code, 0);
  const std::string ck = dir_.Sub("ck"), metrics = dir_.Sub("m.jsonl");
  // One command line for the job's first start and its requeues: --resume auto.
  const std::string args = "--db " + db + " --epochs 2 --ranks 2 --checkpoint-dir " + ck + " --resume auto";
  auto stopped = RunCommand("(" + kTrain + " " + args + " --metrics " + metrics + " --log-every 1 & pid=$!; " +
                                WaitForFirstStep(metrics) + "kill -USR1 $pid; wait $pid; echo status $?)",
                            dir_);
  EXPECT_NE(stopped.out.find("status 138"), std::string::npos) << stopped.out << stopped.err;
  EXPECT_NE(stopped.err.find("train: stopped by SIGUSR1; the step it reached is saved in " + ck + "/step-"),
            std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("train: --resume auto: no checkpoint in " + ck + " yet: a new run"), std::string::npos)
      << stopped.err;
  auto resumed = TrainJson(args, dir_);
  EXPECT_EQ(resumed["epochs"].size(), 2u);
  EXPECT_NE(resumed["config"]["checkpoint"]["resume"].get<std::string>().find(ck + "/step-"), std::string::npos)
      << resumed["config"];

  testing::WriteFile(dir_.Sub("usr1.py"), R"(
import os, signal, time
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
signal.signal(signal.SIGCONT, lambda s, f: got.append(s))
open(os.environ["READY"] + os.environ["RANK"], "w").close()
for _ in range(600):
    if got: break
    time.sleep(0.05)
time.sleep(0.5)  # goes on a while
print("rank", os.environ["RANK"], "saved and goes on" if signal.SIGUSR1 in got else "no signal",
      "and was sent a SIGCONT, never stopped" if signal.SIGCONT in got else "", flush=True)
)");
  const std::string ready = dir_.Sub("ready.");
  auto launched = RunCommand("(READY=" + ready + " " + kLaunch + " --ranks 2 -- /usr/bin/python3 " +
                                 dir_.Sub("usr1.py") + " & pid=$!; for i in $(seq 600); do [ -e " + ready + "0 ] " +
                                 "&& [ -e " + ready + "1 ] && break; sleep 0.1; done; kill -USR1 $pid; wait $pid; " +
                                 "echo status $?)",
                             dir_);
  EXPECT_NE(launched.out.find("rank 0 saved and goes on"), std::string::npos) << launched.out << launched.err;
  EXPECT_NE(launched.out.find("rank 1 saved and goes on"), std::string::npos) << launched.out;
  EXPECT_NE(launched.out.find("status 0"), std::string::npos) << launched.out;
  // A SIGCONT to a rank that runs would be taken for the end of a stop (trainer/comm/stopped.h).
  EXPECT_EQ(launched.out.find("SIGCONT"), std::string::npos) << launched.out;
}

// A terminal's Ctrl-C reaches every process of its group, and Slurm's time
// limit, scancel and preemption every process of the job: each rank got the
// signal twice (its own and the launcher's passing on), took the second for
// a user insisting, and died at once: nothing saved, exit 143 and not a word.
// A repeat within a second is now the same stop. Under train's own mpirun
// (--backend mpi) the step was saved but rank 0's line never came: mpirun,
// interrupted too, stops passing on the ranks' output; the launcher says it.
TEST_F(EndToEnd, AStopThatReachesEveryProcessOfTheRunSavesTheStep) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 1000 --no-progress", dir_).exit_code, 0);
  for (const auto& [sig, backend] : std::vector<std::pair<std::string, std::string>>{
           {"INT", "gloo"}, {"TERM", "gloo"}, {"INT", "mpi"}}) {
    const std::string ck = dir_.Sub("ck" + sig + backend), metrics = dir_.Sub("m" + sig + backend + ".jsonl");
    // setsid: the run leads a process group of its own, as a terminal's foreground job does.
    auto stopped = RunCommand("(setsid " + kTrain + " --db " + db + " --epochs 2 --ranks 2 --backend " + backend +
                                  " --checkpoint-dir " + ck + " --metrics " + metrics + " --log-every 1 & pid=$!; " +
                                  WaitForFirstStep(metrics) + "kill -" + sig + " -$pid; wait $pid; echo status $?)",
                              dir_);
    EXPECT_NE(stopped.out.find(sig == "INT" ? "status 130" : "status 143"), std::string::npos)
        << backend << stopped.out << stopped.err;
    const std::string line = "train: stopped by SIG" + sig + "; the step it reached is saved in " + ck + "/step-";
    const size_t said = stopped.err.find(line);
    EXPECT_NE(said, std::string::npos) << backend << stopped.err;
    EXPECT_EQ(stopped.err.find(line, said + 1), std::string::npos) << "said once: " << stopped.err;
    if (said == std::string::npos) continue;
    const size_t path = said + line.size() - std::string(ck + "/step-").size();
    const std::string saved = stopped.err.substr(path, stopped.err.find(':', path) - path);
    EXPECT_TRUE(std::filesystem::is_regular_file(saved)) << saved;
  }
}

// A run killed in the middle of an epoch (SIGKILL to the launcher,
// so every rank dies at once) and resumed from its last checkpoint ends with
// the epoch losses and the weights of a run that was never interrupted,
// exactly: dropout included. Resumed on one rank, it finishes and says what
// changed.
TEST_F(EndToEnd, AKilledRunResumesExactlyAndOnAnotherWorldSize) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 3000 --no-progress", dir_).exit_code, 0);
  // 3,000 samples / batch 64: 47 steps an epoch; checkpoints every 10 steps.
  const std::string recipe = "--db " + db + " --epochs 3 --optimizer sgd --lr 0.02 --momentum 0.9 " +
                             "--checkpoint-every 10 --json";
  const std::string args = recipe + " --ranks 2";
  auto whole = TrainJson(args + " --checkpoint-dir " + dir_.Sub("whole"), dir_);
  ASSERT_EQ(whole["epochs"].size(), 3u);

  // Killed once step 50 (epoch 2's 4th step) is checkpointed.
  const std::string ck = dir_.Sub("killed");
  auto killed = RunCommand("(" + kTrain + " " + args + " --checkpoint-dir " + ck + " > /dev/null 2>&1 & pid=$!; " +
                               "for i in $(seq 3000); do ls " + ck + "/step-00000000[5-9][0-9].ckpt >/dev/null 2>&1 " +
                               "&& break; sleep 0.01; done; kill -9 $pid; wait $pid; echo $?)",
                           dir_);
  ASSERT_EQ(killed.out, "137\n") << killed.err;
  auto latest = RunCommand("(ls " + ck + " | tail -1)", dir_);  // (RunCommand's </dev/null is for the group)
  const int step = std::stoi(latest.out.substr(5, 10));
  ASSERT_GE(step, 50) << latest.out;
  ASSERT_NE(step % 47, 0) << "not in the middle of an epoch: " << latest.out;
  const std::string mid = dir_.Sub("mid.ckpt");  // kept: the resumed run replaces the dir's checkpoints
  ASSERT_EQ(RunCommand("cp " + ck + "/" + latest.out.substr(0, 20) + " " + mid, dir_).exit_code, 0);

  auto resumed = TrainJson(args + " --checkpoint-dir " + ck + " --resume", dir_);
  ASSERT_FALSE(resumed["epochs"].empty());
  const size_t first = 3 - resumed["epochs"].size();  // the epoch it resumed in, 0-based
  EXPECT_EQ(first, static_cast<size_t>(step / 47));
  for (size_t i = 0; i < resumed["epochs"].size(); ++i) {
    const auto& a = whole["epochs"][first + i];
    const auto& b = resumed["epochs"][i];
    EXPECT_EQ(a["epoch"], b["epoch"]);
    EXPECT_EQ(a["train_loss"], b["train_loss"]) << "epoch " << a["epoch"];
    EXPECT_EQ(a["test_loss"], b["test_loss"]) << "epoch " << a["epoch"];
    EXPECT_EQ(a["weights_hash"], b["weights_hash"]) << "epoch " << a["epoch"];
  }

  // The same checkpoint on one rank: the rest of the epoch, then the next.
  auto one = RunCommand(kTrain + " " + recipe + " --ranks 1 --checkpoint-dir " + dir_.Sub("one") + " --resume " + mid,
                        dir_);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("2 ranks -> 1: per-rank batch 32 -> 64; global batch 64"), std::string::npos) << one.err;
  const auto j = nlohmann::json::parse(one.out);
  EXPECT_EQ(j["epochs"].size(), resumed["epochs"].size());
  EXPECT_NEAR(j["epochs"].back()["test_loss"].get<double>(), whole["epochs"][2]["test_loss"].get<double>(), 0.1);

  // Refused with one line: another db, another recipe, a damaged file.
  const std::string other = dir_.Sub("other");
  ASSERT_EQ(PrepFashion(other, "--limit 500 --no-progress", dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(kTrain + " --db " + other + " --ranks 2 --checkpoint-dir " + ck + " --resume", dir_),
                     "the checkpoint is of another db");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --optimizer sgd --lr 0.5 --momentum 0.9 --checkpoint-dir " +
                                    ck + " --resume",
                                dir_),
                     "differs in optim.lr");
  ASSERT_EQ(RunCommand("(printf x | dd of=" + mid + " bs=1 seek=100000 conv=notrunc)", dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(kTrain + " " + args + " --checkpoint-dir " + ck + " --resume " + mid, dir_),
                     "not a usable checkpoint");
}

// PowerSGD's state (every rank's error feedback, the Q factors, the step
// counts) is in the checkpoints: resumed from the middle of an epoch, a
// compressed run ends with the losses and weights of the run that went on.
// On one rank the two ranks' error feedback is averaged, and said.
TEST_F(EndToEnd, ACompressedRunResumesExactly) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string recipe = "--db " + db + " --epochs 2 --optimizer sgd --lr 0.02 --momentum 0.9 " +
                             "--sync-compress powersgd --powersgd-warmup 4 --checkpoint-every 10 --keep 10";
  auto whole = TrainJson(recipe + " --ranks 2 --checkpoint-dir " + dir_.Sub("whole"), dir_);
  ASSERT_EQ(whole["epochs"].size(), 2u);
  const std::string mid = dir_.Sub("whole") + "/step-0000000040.ckpt";  // 32 steps an epoch
  const auto header = CheckpointHeaderOf(mid);
  ASSERT_TRUE(header.is_object()) << mid;
  ASSERT_EQ(header["at"]["epoch"], 1) << header["at"];
  ASSERT_GT(header["at"]["position"], 0) << header["at"];

  auto resumed = TrainJson(recipe + " --ranks 2 --checkpoint-dir " + dir_.Sub("resumed") + " --resume " + mid, dir_);
  ASSERT_EQ(resumed["epochs"].size(), 1u);
  for (const char* field : {"train_loss", "test_loss", "weights_hash"}) {
    EXPECT_EQ(resumed["epochs"][0][field], whole["epochs"][1][field]) << field;
  }

  auto one = RunCommand(kTrain + " " + recipe + " --ranks 1 --checkpoint-dir " + dir_.Sub("one") + " --resume " + mid,
                        dir_);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("powersgd's error feedback of 2 ranks averaged for 1"), std::string::npos) << one.err;
}

}  // namespace
}  // namespace granary
