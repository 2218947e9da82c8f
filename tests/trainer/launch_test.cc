// The launcher on stand-in ranks (/bin/sh scripts): what it reports and that
// it never returns with a rank still running.
#include "trainer/launch/launch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/test_util.h"
#include "trainer/command/torchrun_env.h"
#include "trainer/launch/error_files.h"
#include "trainer/launch/layout.h"
#include "trainer/launch/output_relay.h"

namespace granary {
namespace {

// Ranks that run `script` under /bin/sh; the launcher's "--rank R --port P"
// become $0 $1 $2 $3, so the rank number is $1.
LaunchOutcome Launch(const std::string& script, int ranks) {
  LaunchOptions o;
  o.program = "/bin/sh";
  o.args = {"sh", "-c", script};
  o.ranks = ranks;
  o.grace_s = 2;
  auto outcome = LaunchRanks(o);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  return outcome.ok() ? outcome.value() : LaunchOutcome{-1, "launch failed"};
}

TEST(Launch, RanksThatSucceedGiveZero) {
  LaunchOutcome out = Launch("test \"$0\" = --rank && exit 0", 3);
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.failure, "");
}

// A rank that would run for minutes is stopped when another fails; that the
// launcher returns at all shows it did not wait for it.
TEST(Launch, AFailingRankStopsTheOthersAndGivesItsStatus) {
  LaunchOutcome out = Launch("if [ \"$1\" = 1 ]; then exit 3; fi; exec sleep 300", 2);
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_EQ(out.failure, "");  // the rank said why itself
}

TEST(Launch, AKilledRankIsNamed) {
  LaunchOutcome out = Launch("if [ \"$1\" = 1 ]; then kill -9 $$; fi; exec sleep 300", 2);
  EXPECT_EQ(out.exit_code, 128 + 9);
  EXPECT_EQ(out.failure.rfind("rank 1 was killed by signal 9", 0), 0u) << out.failure;
}

// A rank that ignores SIGTERM is killed after the grace period.
TEST(Launch, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  LaunchOutcome out = Launch("if [ \"$1\" = 1 ]; then exit 5; fi; trap '' TERM; while :; do sleep 1; done", 2);
  EXPECT_EQ(out.exit_code, 5);
}

TEST(Launch, AProgramThatCannotStartIsExit127) {
  LaunchOptions o;
  o.program = "/nonexistent/train";
  o.args = {"train"};
  o.ranks = 2;
  auto out = LaunchRanks(o);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 127);
}

// Each rank runs on the CPUs it is given, with the environment it is given
// over the launcher's: a rank whose affinity or variables differ exits 1.
TEST(Launch, RanksArePinnedAndGetTheirEnvironment) {
  const std::vector<int> cpus = UsableCpus();
  ASSERT_FALSE(cpus.empty());
  setenv("GRANARY_LAUNCH_TEST_KEPT", "yes", 1);
  setenv("OMP_NUM_THREADS", "99", 1);
  LaunchOptions o;
  o.program = "/bin/sh";
  // Cpus_allowed_list of a one-CPU set is that CPU's number.
  o.args = {"sh", "-c",
            "test \"$OMP_NUM_THREADS\" = 1 && test \"$GRANARY_LAUNCH_TEST_KEPT\" = yes && "
            "grep -q \"^Cpus_allowed_list:[[:space:]]*$(eval echo \\$CPU$1)$\" /proc/self/status"};
  o.ranks = 2;
  o.env = {"OMP_NUM_THREADS=1", "CPU0=" + std::to_string(cpus.front()), "CPU1=" + std::to_string(cpus.back())};
  o.cpus = {{cpus.front()}, {cpus.back()}};
  auto out = LaunchRanks(o);
  unsetenv("GRANARY_LAUNCH_TEST_KEPT");
  unsetenv("OMP_NUM_THREADS");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->exit_code, 0);
}

// A command's rank that exits non-zero is named with what it wrote to its
// torchrun error file (TORCHELASTIC_ERROR_FILE), as torch's @record writes it.
TEST(Launch, ACommandRankIsNamedWithTheErrorItRecorded) {
  LaunchOptions o;
  o.kind = RankKind::kCommand;
  o.name = "launch";
  o.program = "/bin/sh";
  o.args = {"sh", "-c",
            "if [ \"$RANK\" = 1 ]; then printf '{\"message\": {\"message\": \"ValueError: bad\\\\nmore\", "
            "\"extraInfo\": {}}}' > \"$TORCHELASTIC_ERROR_FILE\"; exit 2; fi; exec sleep 300"};
  o.ranks = 2;
  o.grace_s = 2;
  o.rank_env = {{"RANK=0"}, {"RANK=1"}};
  auto out = LaunchRanks(o);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->exit_code, 2);
  EXPECT_EQ(out->failure, "rank 1 exited with status 2 (ValueError: bad); stopping the other ranks");
}

// A script written for GPUs, run by launch on CPUs: its first error says
// what to change (Debian's torch 1.13's own messages).
TEST(CpuAdvice, NamesWhatAGpuScriptChangesToRunOnCpus) {
  EXPECT_NE(CpuAdvice("RuntimeError: Distributed package doesn't have NCCL built in").find(
                "init_process_group(\"gloo\")"),
            std::string::npos);
  EXPECT_NE(CpuAdvice("AssertionError: Torch not compiled with CUDA enabled").find("torch.device(\"cpu\")"),
            std::string::npos);
  EXPECT_NE(CpuAdvice("AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'")
                .find("calls torch.cuda (set_device(LOCAL_RANK) picks a rank's GPU)"),
            std::string::npos);
  EXPECT_NE(CpuAdvice("ValueError: DistributedDataParallel device_ids and output_device arguments only work with "
                      "single-device/multiple-device GPU modules or CPU modules, but got device_ids [0]")
                .find("takes no device_ids"),
            std::string::npos);
  EXPECT_EQ(CpuAdvice("ValueError: a bad batch"), "");
}

// A script that passes rank=0 of its own (argparse's default) to
// init_process_group under launch: two ranks serve the rendezvous on
// MASTER_PORT, and the one that finds it taken says torch's words alone.
TEST(RendezvousAdvice, TwoRanksServingTheStoreAreSaidToHaveTakenRank0) {
  const std::string taken = "RuntimeError: The server socket has failed to listen on any local network address. The "
                            "server socket has failed to bind to [::]:43347 (errno: 98 - Address already in use).";
  EXPECT_NE(RendezvousAdvice(taken, 1, "43347").find("as rank 0 alone does, so two ranks took rank 0: the script "
                                                     "passes rank= of its own to init_process_group"),
            std::string::npos);
  const std::string rank_0 = RendezvousAdvice(taken, 0, "43347");
  EXPECT_NE(rank_0.find("MASTER_PORT 43347 was taken when rank 0 served the rendezvous there"), std::string::npos);
  EXPECT_NE(rank_0.find("or by another program (--master-port"), std::string::npos);
  EXPECT_EQ(RendezvousAdvice(taken, 1, "29500"), "");  // another port: not the rendezvous's
  EXPECT_EQ(RendezvousAdvice("ValueError: a bad batch", 1, "43347"), "");
}

// A script run by a python3 without torch (a venv, pyenv's, conda's first
// on PATH) while another python3 has it: its error names the one that has.
TEST(MissingModuleAdvice, NamesAPython3ThatHasTheModule) {
  testing::TempDir dir;
  if (std::system(("/usr/bin/python3 -m venv --without-pip " + dir.Sub("venv") + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "python3 -m venv is not available";
  }
  const std::string venv_python = dir.Sub("venv/bin/python3");
  const std::string path = dir.Sub("venv/bin") + ":/usr/bin:/bin";
  EXPECT_EQ(MissingModuleAdvice("ModuleNotFoundError: No module named 'torch'", venv_python, path),
            "the python3 that ran it (" + venv_python + ") has no module 'torch'; /usr/bin/python3 has it: name it "
            "as COMMAND (launch ... /usr/bin/python3 SCRIPT.py)");
  EXPECT_NE(MissingModuleAdvice("ModuleNotFoundError: No module named 'torch.nn'", venv_python, path), "");
  EXPECT_EQ(MissingModuleAdvice("ModuleNotFoundError: No module named 'no_such_module_anywhere'", venv_python, path),
            "");
  EXPECT_EQ(MissingModuleAdvice("ModuleNotFoundError: No module named 'torch'", "/usr/bin/python3", path), "");
  EXPECT_EQ(MissingModuleAdvice("ValueError: bad", venv_python, path), "");
}

TEST(RecordedErrorMessage, TakesTorchsMessageFirstLineAndPrintableOnly) {
  EXPECT_EQ(RecordedErrorMessage(R"({"message": {"message": "KeyError: 'x'\nTraceback", "extraInfo": {}}})"),
            "KeyError: 'x'");
  EXPECT_EQ(RecordedErrorMessage(R"({"message": "RuntimeError: plain"})"), "RuntimeError: plain");
  EXPECT_EQ(RecordedErrorMessage(R"({"message": {"message": "a\u001b[31mred"}})"), "a?[31mred");
  for (const char* none : {"", "not json", "[1]", R"({"message": 3})", R"({"other": "x"})",
                           R"({"message": {"extraInfo": {}}})"}) {
    EXPECT_EQ(RecordedErrorMessage(none), "") << none;
  }
  // Long messages end at a whole character.
  std::string long_message;
  while (long_message.size() < 400) long_message += "\xc3\xa9";  // é
  const std::string cut = RecordedErrorMessage(R"({"message": ")" + long_message + "\"}");
  EXPECT_LE(cut.size(), RankErrorFiles::kMaxMessageBytes + 3);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_EQ(cut.size() % 2, 1u);  // whole two-byte characters and "..."
}

// mpirun's stderr: a box summed up as one line, once however many ranks
// send it; mpirun's own lines (to a signal while it aborts, with the empty
// line after it) dropped; the ranks' lines, empty ones too, kept.
TEST(TorchrunCommand, AScriptOrModuleIsRunByPython3AsTorchrunRunsIt) {
  using Words = std::vector<std::string>;
  EXPECT_EQ(TorchrunCommand({"train.py", "--lr", "1"}, "", false), (Words{"python3", "-u", "train.py", "--lr", "1"}));
  EXPECT_EQ(TorchrunCommand({"dir/x.py"}, "", false), (Words{"python3", "-u", "dir/x.py"}));
  EXPECT_EQ(TorchrunCommand({"a", "b"}, "pkg.train", false), (Words{"python3", "-u", "-m", "pkg.train", "a", "b"}));
  EXPECT_EQ(TorchrunCommand({}, "pkg.train", false), (Words{"python3", "-u", "-m", "pkg.train"}));
  EXPECT_EQ(TorchrunCommand({"train.py"}, "", true), (Words{"train.py"}));  // --no-python
  for (const Words& as_given : {Words{"python3", "train.py"}, Words{".py"}, Words{"x.pyc"}, Words{"./run"}}) {
    EXPECT_EQ(TorchrunCommand(as_given, "", false), as_given);
  }
}

TEST(TorchrunFlagAdvice, NamesWhatDoesTheWorkOfTorchrunsOtherFlags) {
  for (const char* flag : {"--rdzv-endpoint=h:1", "--rdzv_endpoint", "--rdzv-backend", "--rdzv_id=5"}) {
    EXPECT_NE(TorchrunFlagAdvice(flag).find("give --master-addr and --master-port"), std::string::npos) << flag;
  }
  EXPECT_NE(TorchrunFlagAdvice("--log_dir").find("torchrun's --log-dir is not launch's"), std::string::npos);
  EXPECT_EQ(TorchrunFlagAdvice("--bogus"), "");
  EXPECT_EQ(TorchrunFlagAdvice("--rdzv"), "");
}

// torchrun's --nproc-per-node values: a number, auto (launch's default) or cpu.
TEST(ParseRanksFlag, TakesTorchrunsValues) {
  int ranks = 1;
  bool given = true;
  ASSERT_TRUE(ParseRanksFlag("auto", &ranks, &given).ok());
  EXPECT_FALSE(given);
  EXPECT_EQ(ranks, 1);
  ASSERT_TRUE(ParseRanksFlag("3", &ranks, &given).ok());
  EXPECT_TRUE(given);
  EXPECT_EQ(ranks, 3);
  ASSERT_TRUE(ParseRanksFlag("cpu", &ranks, &given).ok());
  EXPECT_EQ(ranks, static_cast<int>(UsableCpus().size()));
  for (const char* bad : {"gpu", "two", "-1", "", "1.5", "99999999999"}) {
    const Status s = ParseRanksFlag(bad, &ranks, &given);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("expected a number of ranks, auto"), std::string::npos) << s.message();
  }
  EXPECT_NE(ParseRanksFlag("gpu", &ranks, &given).message().find("launch runs CPU ranks"), std::string::npos);
}

TEST(MpirunStderrFilter, SumsUpBoxesAndDropsMpirunsOwnLines) {
  const std::string edge(74, '-');
  const std::string box = edge + "\nIt looks like MPI_INIT failed for some reason; your parallel process is\n" +
                          "likely to abort.  There are many reasons.\n\nHost:      vm\n" + edge + "\n";
  const std::string in = "rank line\n\n" + box + box + "[vm:123] 1 more process has sent help message\n" +
                         "mpiexec: abort is already in progress...hit ctrl-c again to forcibly terminate\n\n" +
                         "last";
  MpirunStderrFilter filter;
  std::string out;
  for (char c : in) out += filter.Feed(&c, 1);  // as the pipe may cut it
  out += filter.Finish();
  EXPECT_EQ(out, "rank line\n\ntrain: OpenMPI: It looks like MPI_INIT failed for some reason; your parallel "
                 "process is likely to abort. (Host: vm)\nlast\n");
  EXPECT_TRUE(filter.Told());
}

TEST(Layout, RanksGetDisjointRunsOfCpusUnlessOversubscribedOrOff) {
  TrainConfig c;
  c.data.db = "x";
  c.dist.ranks = 3;
  c.dist.threads = 2;
  c.data.loader_threads = 2;
  // As UsableCpus orders them: one CPU per core, then the SMT siblings.
  const std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  Layout l = PlanLayout(c, {0, 1, 2, 3, 8, 9, 10, 11});
  ASSERT_EQ(l.cpus.size(), 3u);
  EXPECT_EQ(l.cpus[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(l.cpus[2], (std::vector<int>{8, 9}));
  EXPECT_EQ(l.Describe(),
            "3 ranks x 2 threads (+2 loader workers each) on 8 CPUs, pinned: rank 0 CPU 0-1, rank 1 CPU 2-3, "
            "rank 2 CPU 8-9");
  EXPECT_EQ(l.ThreadEnvironment().front(), "OMP_NUM_THREADS=2");
  auto back = Layout::FromJson(l.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Describe(), l.Describe());

  c.dist.threads = 0;  // cores / ranks
  EXPECT_EQ(PlanLayout(c, cpus).threads, 2);
  c.dist.threads = 3;  // 9 threads on 8 CPUs
  EXPECT_EQ(PlanLayout(c, cpus).cpus.size(), 0u);
  EXPECT_EQ(PlanLayout(c, cpus).not_pinned, "oversubscribed");
  c.dist.threads = 1;
  c.dist.pin = false;
  EXPECT_EQ(PlanLayout(c, cpus).Describe(),
            "3 ranks x 1 thread (+2 loader workers each) on 8 CPUs, not pinned (--pin off)");
  EXPECT_FALSE(Layout::FromJson("{\"ranks\": 0}").ok());
  EXPECT_FALSE(Layout::FromJson("[1]").ok());
}

}  // namespace
}  // namespace granary
