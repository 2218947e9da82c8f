#include "store/output_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace granary {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::WriteFile;

// A directory that is a db as far as its manifest says.
std::string MakeDb(const TempDir& dir, const std::string& name) {
  const std::string db = dir.Sub(name);
  fs::create_directories(db + "/train");
  WriteFile(db + "/manifest.json", R"({"format":"granary-db","format_version":1})");
  WriteFile(db + "/train/shard-00000.mdb", "lmdb");
  return db;
}

// Refused with InvalidArgument, the flag and path first, `why` after.
void ExpectRefused(const Status& s, const OutputPath& o, const std::string& why) {
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message().rfind(o.flag + " " + o.path + ": ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
}

Status Check(const OutputPath& o, const std::vector<FlagPath>& inputs = {}) { return CheckOutputs({o}, inputs); }

TEST(CheckOutputs, NothingIsWrittenInsideADbOrABuildInProgress) {
  TempDir dir;
  const std::string db = MakeDb(dir, "s.db");
  const auto before = testing::FileNames(db);
  for (const OutputPath& o : {OutputPath{"--metrics", db + "/manifest.json", OutputKind::kJsonLines},
                              OutputPath{"--report", db + "/new.html", OutputKind::kHtml},
                              OutputPath{"--save", db + "/train/model.pt", OutputKind::kModel},
                              OutputPath{"--checkpoint-dir", db + "/ck", OutputKind::kDirectory},
                              OutputPath{"DB", db + "/inner.db", OutputKind::kDb}}) {
    ExpectRefused(Check(o), o, "is inside the db " + db + "; granary never writes into a db");
  }
  const OutputPath itself{"--checkpoint-dir", db, OutputKind::kDirectory};
  ExpectRefused(Check(itself), itself, "is the db " + db);
  EXPECT_EQ(testing::FileNames(db), before);  // no probe file either

  // A manifest emptied by accident still sits beside the shards: a db.
  WriteFile(db + "/manifest.json", "");
  const OutputPath emptied{"--png", db + "/x.png", OutputKind::kPng};
  ExpectRefused(Check(emptied), emptied, "is inside the db");
  // A db being built: its partial directory with the builder's mark.
  fs::create_directories(dir.Sub("b.db.partial"));
  WriteFile(dir.Sub("b.db.partial/builder.pid"), "123\n");
  const OutputPath partial{"--save", dir.Sub("b.db.partial/m.pt"), OutputKind::kModel};
  ExpectRefused(Check(partial), partial, "is inside the db");
  // Another project's manifest.json is not a db.
  fs::create_directories(dir.Sub("web"));
  WriteFile(dir.Sub("web/manifest.json"), R"({"name":"app"})");
  EXPECT_TRUE(Check({"--save", dir.Sub("web/m.pt"), OutputKind::kModel}).ok());
}

TEST(CheckOutputs, AnExistingFileIsReplacedOnlyByOneOfItsKind) {
  TempDir dir;
  WriteFile(dir.Sub("data.csv"), "a,b\n1,2\n");
  WriteFile(dir.Sub("model.pt"), std::string("PK\x03\x04rest", 8));
  WriteFile(dir.Sub("page.html"), "\n<!DOCTYPE html><html></html>");
  WriteFile(dir.Sub("lines.jsonl"), "{\"type\":\"step\"}\n");
  WriteFile(dir.Sub("empty"), "");
  EXPECT_TRUE(Check({"--save", dir.Sub("model.pt"), OutputKind::kModel}).ok());
  EXPECT_TRUE(Check({"--report", dir.Sub("page.html"), OutputKind::kHtml}).ok());
  EXPECT_TRUE(Check({"--metrics", dir.Sub("lines.jsonl"), OutputKind::kJsonLines}).ok());
  EXPECT_TRUE(Check({"--save", dir.Sub("empty"), OutputKind::kModel}).ok());
  const OutputPath over_csv{"--save", dir.Sub("data.csv"), OutputKind::kModel};
  ExpectRefused(Check(over_csv), over_csv, "holds something other than a TorchScript model; refusing to replace it");
  const OutputPath html_over_model{"--report", dir.Sub("model.pt"), OutputKind::kHtml};
  ExpectRefused(Check(html_over_model), html_over_model, "holds something other than an HTML page");
  const OutputPath png_over_lines{"--png", dir.Sub("lines.jsonl"), OutputKind::kPng};
  ExpectRefused(Check(png_over_lines), png_over_lines, "holds something other than a PNG image");
  const OutputPath onto_dir{"--save", dir.path(), OutputKind::kModel};
  ExpectRefused(Check(onto_dir), onto_dir, "is a directory");
  const OutputPath dir_onto_file{"--checkpoint-dir", dir.Sub("data.csv"), OutputKind::kDirectory};
  ExpectRefused(Check(dir_onto_file), dir_onto_file, "is a regular file, not a directory");
}

TEST(CheckOutputs, ADeviceIsNeverReplacedButMetricsMayStreamToIt) {
  const OutputPath report{"--report", "/dev/null", OutputKind::kHtml};
  ExpectRefused(Check(report), report, "is a character device; granary writes --report only as a regular file");
  EXPECT_TRUE(Check({"--metrics", "/dev/null", OutputKind::kJsonLines}).ok());
  TempDir dir;
  fs::create_symlink("/dev/null", dir.Sub("to-null"));
  const OutputPath through_link{"--report", dir.Sub("to-null"), OutputKind::kHtml};
  ExpectRefused(Check(through_link), through_link, "is a character device");
}

TEST(CheckOutputs, SymlinksAreFollowedAndTheirLoopsAndDanglingOnesRefused) {
  TempDir dir;
  WriteFile(dir.Sub("page.html"), "<html></html>");
  fs::create_symlink("page.html", dir.Sub("link.html"));
  EXPECT_TRUE(Check({"--report", dir.Sub("link.html"), OutputKind::kHtml}).ok());
  fs::create_symlink("missing.html", dir.Sub("dangling.html"));
  const OutputPath dangling{"--report", dir.Sub("dangling.html"), OutputKind::kHtml};
  ExpectRefused(Check(dangling), dangling, "is a symlink to a missing file");
  fs::create_symlink("loop-b", dir.Sub("loop-a"));
  fs::create_symlink("loop-a", dir.Sub("loop-b"));
  const OutputPath loop{"--checkpoint-dir", dir.Sub("loop-a"), OutputKind::kDirectory};
  ExpectRefused(Check(loop), loop, "is a symlink loop");
  const OutputPath under_loop{"--save", dir.Sub("loop-a/m.pt"), OutputKind::kModel};
  ExpectRefused(Check(under_loop), under_loop, "symlink loop");
  // A db reached through a symlink is still a db.
  const std::string db = MakeDb(dir, "s.db");
  fs::create_symlink(db, dir.Sub("alias"));
  const OutputPath via_alias{"--metrics", dir.Sub("alias/m.jsonl"), OutputKind::kJsonLines};
  ExpectRefused(Check(via_alias), via_alias, "is inside the db " + db);
}

TEST(CheckOutputs, AnOutputIsNeitherAnInputNorAnotherOutput) {
  TempDir dir;
  WriteFile(dir.Sub("in.pt"), std::string("PK\x03\x04", 4));
  fs::create_directories(dir.Sub("raw/cats"));
  const std::vector<FlagPath> inputs = {{"--model", dir.Sub("in.pt")}, {"RAW", dir.Sub("raw")}};
  const OutputPath onto_model{"--save", dir.Sub("in.pt"), OutputKind::kModel};
  ExpectRefused(Check(onto_model, inputs), onto_model, "is the input --model " + dir.Sub("in.pt"));
  fs::create_hard_link(dir.Sub("in.pt"), dir.Sub("hard.pt"));
  const OutputPath hard_link{"--save", dir.Sub("hard.pt"), OutputKind::kModel};
  ExpectRefused(Check(hard_link, inputs), hard_link, "is the input --model");
  const OutputPath into_raw{"--png", dir.Sub("raw/cats/x.png"), OutputKind::kPng};
  ExpectRefused(Check(into_raw, inputs), into_raw, "is inside the input RAW " + dir.Sub("raw"));

  const OutputPath metrics{"--metrics", dir.Sub("run.out"), OutputKind::kJsonLines};
  const OutputPath report{"--report", dir.Sub("./run.out"), OutputKind::kHtml};
  ExpectRefused(CheckOutputs({metrics, report}, {}), report, "is also --metrics; each output needs a path of its own");
}

TEST(CheckOutputs, AnUnwritablePlaceIsFoundBeforeAnyWorkAndNothingIsLeft) {
  TempDir dir;
  const OutputPath no_dir{"--save", dir.Sub("missing/m.pt"), OutputKind::kModel};
  ExpectRefused(Check(no_dir), no_dir, "no directory " + dir.Sub("missing"));
  const OutputPath proc{"--report", "/proc/self/report.html", OutputKind::kHtml};
  ExpectRefused(Check(proc), proc, "cannot create files in /proc/");
  // A checkpoint directory is created with its parents: the nearest existing one is probed.
  EXPECT_TRUE(Check({"--checkpoint-dir", dir.Sub("a/b/c"), OutputKind::kDirectory}).ok());
  const OutputPath under_proc{"--checkpoint-dir", "/proc/self/a/b", OutputKind::kDirectory};
  EXPECT_FALSE(Check(under_proc).ok());
  EXPECT_TRUE(testing::FileNames(dir.path()).empty());  // the probes left nothing, created no directory
}

TEST(RedirectedStdout, NamesTheFileStdoutWasRedirectedTo) {
  TempDir dir;
  const int saved = ::dup(STDOUT_FILENO);
  std::FILE* file = std::fopen(dir.Sub("out.txt").c_str(), "w");
  ASSERT_NE(file, nullptr);
  ::dup2(::fileno(file), STDOUT_FILENO);
  const std::optional<OutputPath> out = RedirectedStdout();
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::fclose(file);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->flag, "stdout");
  EXPECT_EQ(fs::path(out->path), fs::canonical(dir.Sub("out.txt")));
}

}  // namespace
}  // namespace granary
