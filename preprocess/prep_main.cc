// prep: builds granary dbs from raw datasets (`prep build RAW DB`), and
// inspects and verifies them (info, verify, cat). Flags become options of
// preprocess/ and store/ calls; the loader has its own CLI (loader/loader_main.cc).
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "base/cli_flags.h"
#include "base/environment.h"
#include "base/file.h"
#include "base/json_text.h"
#include "preprocess/build.h"
#include "preprocess/build_advice.h"
#include "preprocess/inputs.h"
#include "preprocess/inspect.h"
#include "preprocess/prep_flags.h"
#include "preprocess/source.h"
#include "store/db.h"
#include "store/db_writer.h"
#include "store/format.h"
#include "store/output_path.h"
#include "store/verify.h"

namespace {

using granary::BuildArgs;
using granary::kNonNegative;

std::atomic<bool> g_cancel{false};

void OnSignal(int) { g_cancel.store(true); }

int Fail(const granary::Status& s) { return granary::PrintFailure("prep", s); }

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// A build onto an existing db (without --force): up to date (said, and an
// empty source returned: nothing to build), or with --update the source
// with its unchanged items read from the old db (*reused counts them) and
// the old db to be replaced; refused when the db was built with other
// options, or when RAW changed and --update was not given.
granary::StatusOr<granary::Source> UpToDateOrUpdated(BuildArgs& a, granary::Source source, uint64_t* reused) {
  granary::StatusOr<granary::DbInputs> old = granary::ReadDbInputs(a.db);
  if (!old.ok()) {
    if (old.status().code() != granary::Status::Code::kNotFound) {
      return granary::Status::FailedPrecondition(old.status().message() + "; pass --force to rebuild " + a.db);
    }
    return granary::Status::FailedPrecondition(a.db + ": already exists (pass --force to replace it)");
  }
  const granary::InputChanges c = granary::CompareInputs(old.value(), source, a.options);
  if (!c.options.empty()) {
    std::string list;
    for (const std::string& o : c.options) list += (list.empty() ? "" : "; ") + o;
    return granary::Status::FailedPrecondition(a.db + ": was built with other options (" + list +
                                               "): pass --force to rebuild it with these");
  }
  if (c.none()) {
    if (a.json) {
      std::cout << granary::DumpJson({{"db", a.db}, {"ok", true}, {"up_to_date", true}, {"inputs", c.unchanged}})
                << std::endl;
    } else {
      std::fprintf(stderr, "prep: %s is up to date (%llu input file%s unchanged)\n", granary::Printable(a.db).c_str(),
                   static_cast<unsigned long long>(c.unchanged), c.unchanged == 1 ? "" : "s");
    }
    return granary::Source();
  }
  if (!a.update) {
    return granary::Status::FailedPrecondition(a.db + ": RAW changed since it was built (" + c.FilesText() +
                                               "): pass --update to bring it up to date, or --force to rebuild it");
  }
  granary::StatusOr<std::unique_ptr<granary::DbReader>> old_db = granary::DbReader::Open(a.db);
  if (!old_db.ok()) return old_db.status().WithContext("--update");
  a.options.overwrite = true;
  if (!a.json) std::fprintf(stderr, "prep: updating %s (%s)\n", granary::Printable(a.db).c_str(), c.FilesText().c_str());
  return granary::ReuseUnchangedItems(std::move(source), old.value(),
                                      std::shared_ptr<const granary::DbReader>(std::move(old_db).value()), reused);
}

// The source's notes, then what producing its items found.
std::vector<std::string> AllNotes(std::vector<std::string> notes, const std::vector<std::string>& produced) {
  notes.insert(notes.end(), produced.begin(), produced.end());
  return notes;
}

// The finished build's summary: JSON on stdout with --json, else lines on stderr.
void PrintBuildSummary(const BuildArgs& a, const granary::Source& source, const granary::BuildSummary& s,
                       uint64_t reused) {
  uint64_t written = 0, rejected = 0;
  for (const auto& split : s.splits) {
    written += split.written;
    rejected += split.rejected;
  }
  if (a.json) {
    nlohmann::json j = {{"db", a.db},
                        {"ok", true},
                        {"seconds", s.seconds},
                        {"threads", s.threads},
                        {"written", written},
                        {"rejected", rejected},
                        {"raw_bytes", s.raw_bytes},
                        {"payload_bytes", s.payload_bytes},
                        {"db_bytes", s.stored_bytes},
                        {"items_per_s", written / std::max(s.seconds, 1e-9)},
                        {"content_hash", s.content_hash},
                        {"dictionary_bytes", s.dictionary_bytes},
                        {"reused", reused},
                        {"splits", nlohmann::json::array()},
                        {"rejected_items", nlohmann::json::array()},
                        {"notes", AllNotes(source.info.notes, s.notes)},
                        {"warnings", s.warnings}};
    for (const auto& split : s.splits) {
      j["splits"].push_back(
          {{"name", split.name}, {"read", split.read}, {"written", split.written}, {"rejected", split.rejected}});
    }
    for (const auto& r : s.rejected) j["rejected_items"].push_back({{"item", r.item}, {"reason", r.reason}});
    std::cout << granary::DumpJson(j) << std::endl;
    return;
  }
  std::fprintf(stderr, "prep: built %s in %.2fs with %d thread(s)\n", granary::Printable(a.db).c_str(), s.seconds,
               s.threads);
  if (reused > 0) {
    std::fprintf(stderr, "  %llu item(s) copied from the old db, the rest read from RAW\n",
                 static_cast<unsigned long long>(reused));
  }
  for (const auto& split : s.splits) {
    std::fprintf(stderr, "  %-8s %llu read, %llu written, %llu rejected\n", split.name.c_str(),
                 static_cast<unsigned long long>(split.read), static_cast<unsigned long long>(split.written),
                 static_cast<unsigned long long>(split.rejected));
  }
  for (const auto& r : s.rejected) std::fprintf(stderr, "  rejected %s: %s\n", granary::Printable(r.item).c_str(),
                                              granary::Printable(r.reason).c_str());
  std::fprintf(stderr, "  %.0f items/s; raw %.1f MB, decoded %.1f MB, db %.1f MB (%.2fx of decoded, %.3fx of raw)\n",
               written / std::max(s.seconds, 1e-9), s.raw_bytes / 1e6, s.payload_bytes / 1e6, s.stored_bytes / 1e6,
               s.payload_bytes > 0 ? static_cast<double>(s.stored_bytes) / s.payload_bytes : 0.0,
               s.raw_bytes > 0 ? static_cast<double>(s.stored_bytes) / s.raw_bytes : 0.0);
  std::fprintf(stderr, "  zstd dictionary: %s%s\n",
               s.dictionary_bytes > 0 ? (std::to_string(s.dictionary_bytes) + " bytes, ").c_str() : "",
               s.dictionary_note.c_str());
  std::fprintf(stderr, "  content hash %s\n", s.content_hash.c_str());
  for (const std::string& note : s.notes) std::fprintf(stderr, "prep: note: %s\n", granary::Printable(note).c_str());
}

int RunBuild(BuildArgs& a) {
  // A failure is one line on stderr, and with --json also an object on stdout
  // (with the warnings said before it: the db that would not fit its disk).
  std::vector<std::string> warnings;
  auto fail = [&](const granary::Status& status) {
    if (a.json) {
      std::cout << granary::DumpJson({{"db", a.db}, {"ok", false}, {"error", status.message()}, {"warnings", warnings}})
                << std::endl;
    }
    return Fail(status);
  };
  std::error_code ec;
  const bool exists = std::filesystem::exists(std::filesystem::symlink_status(a.db, ec));
  if (!a.class_names.empty()) a.raw.class_names = SplitCommas(a.class_names);
  a.raw.db = a.db;
  a.raw.show_progress = !a.no_progress && ::isatty(STDERR_FILENO);
  granary::StatusOr<granary::Source> source = granary::OpenSource(a.raw);
  if (!source.ok()) return fail(source.status());
  for (const std::string& note : source->info.notes) {
    std::fprintf(stderr, "prep: note: %s\n", granary::Printable(note).c_str());
  }

  granary::BuildOptions& o = a.options;
  o.db_path = a.db;
  o.on_error = a.on_error == "fail" ? granary::OnError::kFail : granary::OnError::kSkip;
  o.dictionary = a.dictionary == "on"    ? granary::DictionaryMode::kOn
                 : a.dictionary == "off" ? granary::DictionaryMode::kOff
                                         : granary::DictionaryMode::kAuto;
  o.max_reject_fraction = a.max_rejects;
  o.show_progress = !a.no_progress && ::isatty(STDERR_FILENO);
  o.cancel = &g_cancel;
  o.on_warning = [progress = o.show_progress, &warnings](const std::string& warning) {
    // Above the progress line, which is drawn again after it.
    std::fprintf(stderr, "%sprep: warning: %s\n", progress ? "\r\033[K" : "", granary::Printable(warning).c_str());
    warnings.push_back(warning);
  };
  uint64_t reused = 0;
  if (exists && !o.overwrite) {
    granary::StatusOr<granary::Source> updated = UpToDateOrUpdated(a, std::move(source).value(), &reused);
    if (!updated.ok()) return fail(updated.status());
    if (updated->splits.empty()) return 0;  // up to date: said, nothing to build
    source = std::move(updated);
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto summary = granary::BuildDb(source.value(), o);
  if (!summary.ok()) {
    if (summary.status().code() == granary::Status::Code::kBusy) return fail(summary.status());
    granary::Status s = summary.status().WithContext("build of " + a.db + " failed, no db written");
    // One piece of advice: a --resume that failed has said what to do; a
    // full disk needs room before any resume.
    if (a.options.resume || !granary::HasResumableBuild(a.db)) return fail(s);
    const bool rejects = s.message().find(granary::kMoreThanMaxRejects) != std::string::npos;
    // Where no item read was taken, the work kept is none: what to fix is what the line names.
    if (rejects && s.message().find(granary::kEveryItemRejected) != std::string::npos) {
      const std::string advice = granary::MissingValuesAdvice(a.raw.missing, s.message());
      return fail(granary::Status::InvalidArgument(s.message() + advice));
    }
    return fail(granary::Status::FailedPrecondition(s.message() + " (" + a.db + ".partial keeps the work done" +
                                                    granary::PartialAdvice(a.db, a.raw.missing, s.message()) + ")"));
  }

  PrintBuildSummary(a, source.value(), summary.value(), reused);
  return 0;
}

int RunInfo(const std::string& path, bool json) {
  auto db = granary::DbReader::Open(path);
  if (!db.ok()) return Fail(db.status());
  std::cout << (json ? granary::DescribeDbJson(*db.value()) : granary::DescribeDb(*db.value()));
  return 0;
}

int RunVerify(const std::string& path, bool json) {
  const bool tty = !json && ::isatty(STDERR_FILENO);
  auto report = granary::VerifyDb(path, [&](const std::string& shard, uint64_t records) {
    if (tty) std::fprintf(stderr, "verify: %s (%llu samples)\n", granary::Printable(shard).c_str(), static_cast<unsigned long long>(records));
  });
  if (!report.ok()) return Fail(report.status());
  const granary::VerifyReport& r = report.value();
  if (json) {
    nlohmann::json j = {{"db", path},
                        {"ok", r.ok()},
                        {"samples_expected", r.samples_expected},
                        {"samples_ok", r.samples_ok},
                        {"content_hash", r.content_hash},
                        {"problems", r.problems}};
    std::cout << granary::DumpJson(j) << std::endl;
  } else {
    constexpr size_t kShown = 100;
    for (size_t i = 0; i < r.problems.size() && i < kShown; ++i) std::printf("%s\n", granary::Printable(r.problems[i]).c_str());
    if (r.problems.size() > kShown) std::printf("... and %zu more problems\n", r.problems.size() - kShown);
    std::printf("verify: %s: %llu of %llu samples ok, %zu problem(s)%s\n", granary::Printable(path).c_str(),
                static_cast<unsigned long long>(r.samples_ok), static_cast<unsigned long long>(r.samples_expected),
                r.problems.size(), r.ok() ? ", content hash matches" : "");
  }
  return r.ok() ? 0 : 1;
}

int RunCat(const std::string& path, const granary::CatOptions& options, bool json) {
  auto db = granary::DbReader::Open(path);
  if (!db.ok()) return Fail(db.status());
  auto text = granary::DescribeRecord(*db.value(), options, json);
  if (!text.ok()) return Fail(text.status());
  std::cout << text.value();
  return 0;
}

// No output replaces what is not its own (store/output_path.h): a build's
// db, cat's --png and stdout redirected to a file are not inside a db, and
// --png is not the input; checked before any work starts.
granary::Status CheckOutputs(bool building, const BuildArgs& b, const std::string& db_path,
                             const granary::CatOptions& cat) {
  std::vector<granary::OutputPath> outputs;
  std::vector<granary::FlagPath> inputs;
  // A db built again without --force, --update or --resume is only compared
  // with RAW (up to date, or refused): it may be another user's, read-only.
  std::error_code ec;
  const bool compared_only = !b.options.overwrite && !b.update && !b.options.resume &&
                             std::filesystem::exists(std::filesystem::path(b.db) / granary::format::kManifestFile, ec);
  if (building && !compared_only) {  // the builder keeps its db apart from RAW itself (DbWriterOptions::inputs)
    outputs.push_back({"DB", b.db, granary::OutputKind::kDb});
  } else {
    outputs.push_back({"--png", cat.png_path, granary::OutputKind::kPng});
    inputs.push_back({"DB", db_path});
  }
  if (std::optional<granary::OutputPath> out = granary::RedirectedStdout()) outputs.push_back(*out);
  return granary::CheckOutputs(outputs, inputs);
}

// "prep build photos/*.jpg db": the shell gives prep each file the pattern
// matched, where it takes one RAW and one DB. After the parse refused the
// extra paths: how many came, and that RAW is the folder that holds them.
std::string ExtraPathsAdvice(const CLI::App& app, const CLI::App& build, const BuildArgs& b) {
  if (!build.parsed()) return "";
  std::vector<std::string> paths = {b.raw.raw, b.db};
  for (const std::string& arg : app.remaining(true)) {
    if (!arg.empty() && arg[0] != '-') paths.push_back(arg);
  }
  if (paths.size() <= 2) return "";
  std::error_code ec;
  const bool files = std::filesystem::is_regular_file(b.raw.raw, ec);
  return "; prep build takes one RAW and one DB, and was given " + std::to_string(paths.size()) + " paths (" +
         granary::Printable(paths.front()) + ", " + granary::Printable(paths[1]) + ", ...)" +
         (files ? ": where a shell pattern (RAW/*.jpg) gave the files it matched, name the folder that holds them "
                  "(RAW/<class>/*.jpg, or a CSV file)"
                : "");
}

}  // namespace

int main(int argc, char** argv) {
  granary::RaiseOpenFileLimit();
  // A build frees and allocates the same memory over and over: LMDB's dirty
  // pages (a record of a few KiB each, 16 MB a write transaction, freed at
  // every commit), decoded images, encoded records. By default glibc hands
  // freed memory back to the kernel past 128 KiB and maps buffers above that
  // anew, so each commit's pages fault in again (a fifth of an --update's
  // CPU, docs/BENCHMARKS.md); kept, they are reused. Peak RSS is unchanged.
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  const int cores = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  CLI::App app{"Builds granary dbs from raw datasets (see README.md and docs/FORMAT.md)."};
  app.require_subcommand(1);
  BuildArgs b;
  // Where a compressed table is decompressed, as other programs choose a temporary directory.
  b.raw.temp_dir = granary::Environment::OfProcess().Get("TMPDIR", "/tmp");
  if (b.raw.temp_dir.empty()) b.raw.temp_dir = "/tmp";
  CLI::App* build = app.add_subcommand("build", "build a db from a raw dataset folder");
  granary::AddInputFlags(build, &b);
  granary::AddOutputFlags(build, cores, &b);
  std::string db_path;
  bool json = false;
  CLI::App* info = app.add_subcommand("info", "describe a db: schema, splits, sizes, compression, build options");
  info->add_option("db", db_path, "db directory")->required();
  info->add_flag("--json", json, "print the manifest and sizes as JSON");
  CLI::App* verify = app.add_subcommand("verify", "read and check every record and the content hash");
  verify->add_option("db", db_path, "db directory")->required();
  verify->add_flag("--json", json, "print the report as JSON");
  granary::CatOptions cat_options;
  CLI::App* cat = app.add_subcommand("cat", "print one record's fields");
  cat->add_option("db", db_path, "db directory")->required();
  cat->add_option("--split", cat_options.split, "split")->capture_default_str();
  cat->add_option("index,--index", cat_options.index, "record index within the split (prep cat DB 5, or --index 5)")
      ->required()
      ->check(kNonNegative);
  cat->add_option("--max-values", cat_options.max_values, "values shown per field (0: all)")
      ->capture_default_str()
      ->check(kNonNegative);
  cat->add_option("--png", cat_options.png_path, "write the record's image field to this PNG file");
  cat->add_flag("--json", json, "print the record as JSON (all values, exact; NaN and infinities as strings)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "prep: %s%s%s (see prep --help)\n", e.what(), granary::ParseErrorAdvice(app).c_str(),
                 ExtraPathsAdvice(app, *build, b).c_str());
    return 2;
  }
  // "out/new.db/" names the db "out/new.db": the db is a directory, however it is written.
  for (std::string* path : {&b.db, &db_path}) {
    while (path->size() > 1 && path->back() == '/') path->pop_back();
  }
  if (granary::Status writable = CheckOutputs(build->parsed(), b, db_path, cat_options); !writable.ok()) {
    return Fail(writable);
  }
  for (const char* flag : {"label", "regression", "no-header", "missing", "size", "channels"}) {
    if (build->count(std::string("--") + flag) > 0) b.raw.given.insert(flag);
  }
  int code = 2;
  if (build->parsed()) code = RunBuild(b);
  if (info->parsed()) code = RunInfo(db_path, json);
  if (verify->parsed()) code = RunVerify(db_path, json);
  if (cat->parsed()) code = RunCat(db_path, cat_options, json);
  if (granary::Status flushed = granary::FlushStdout(); !flushed.ok()) return Fail(flushed);
  return code;
}
