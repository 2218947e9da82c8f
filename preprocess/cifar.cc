#include "preprocess/cifar.h"

#include <cctype>
#include <filesystem>

#include "base/file.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

bool IsFile(const std::string& dir, const std::string& name) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / name, ec);
}

// A path as it can stand inside a Python string in a shell command; "ROOT"
// where it holds anything else.
std::string PathForCommand(const std::string& path) {
  for (char c : path) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("/._-+").find(c) == std::string::npos) {
      return "ROOT";
    }
  }
  return path;
}

// The Python version is pickles of numpy arrays, which only Python reads
// safely: say where the binary version is, and how to write this one from
// Python through torchvision.
Status RefusePythonVersion(const std::string& dir, bool cifar100) {
  const std::string kind = cifar100 ? "CIFAR-100" : "CIFAR-10";
  const std::string folder = cifar100 ? "cifar-100-python" : "cifar-10-batches-py";
  const std::string dataset = cifar100 ? "CIFAR100" : "CIFAR10";
  fs::path path(dir);
  if (path.filename().empty()) path = path.parent_path();  // "dir/"
  std::string root = path.parent_path().string();
  if (root.empty()) root = ".";
  root = PathForCommand(root);
  std::string message =
      dir + ": holds " + kind + " as Python pickles (the version torchvision downloads); prep reads CIFAR's binary "
      "version (" + (cifar100 ? "cifar-100-binary.tar.gz" : "cifar-10-binary.tar.gz") + ", beside the Python one "
      "on the CIFAR page: extract it and build from the folder it makes), or write this one from Python: "
      "python3 -c \"import granary, torchvision.datasets as d; granary.write('DB', {'train': d." + dataset + "('" +
      root + "', train=True), 'test': d." + dataset + "('" + root + "', train=False)})\"";
  if (path.filename().string() != folder) {
    message += " (torchvision reads the folder as ROOT/" + folder + ": rename it, or move it there)";
  }
  return Status::InvalidArgument(message);
}

// Checks that `path` is a whole, non-zero number of `record_bytes` records.
Status CheckRecords(const std::string& path, int record_bytes, const std::string& kind) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return Status::IOError(path, "stat", ec.value());
  if (size == 0 || size % static_cast<uintmax_t>(record_bytes) != 0) {
    return Status::InvalidArgument(path + ": " + std::to_string(size) + " bytes is not a whole number of " + kind +
                                   "'s " + std::to_string(record_bytes) + "-byte records (a cut download?)");
  }
  return Status::OK();
}

StatusOr<CifarDataset> FindCifar10(const std::string& dir) {
  CifarDataset found;
  found.kind = "CIFAR-10";
  CifarSplitFiles train{"train", {}};
  int missing = 0;  // the first data_batch_K.bin not there
  for (int k = 1; k <= 5; ++k) {
    const std::string name = "data_batch_" + std::to_string(k) + ".bin";
    if (!IsFile(dir, name)) {
      missing = missing == 0 ? k : missing;
    } else if (missing != 0) {
      return Status::NotFound(dir + ": has data_batch_" + std::to_string(k) + ".bin but no data_batch_" +
                              std::to_string(missing) + ".bin (CIFAR-10's training set is data_batch_1..5.bin)");
    } else {
      train.paths.push_back((fs::path(dir) / name).string());
    }
  }
  if (train.paths.empty()) {
    return Status::NotFound(dir + ": has no data_batch_1.bin (CIFAR-10's training set is data_batch_1..5.bin)");
  }
  found.splits.push_back(std::move(train));
  if (IsFile(dir, "test_batch.bin")) found.splits.push_back({"test", {(fs::path(dir) / "test_batch.bin").string()}});
  if (IsFile(dir, "batches.meta.txt")) found.names_path = (fs::path(dir) / "batches.meta.txt").string();
  return found;
}

StatusOr<CifarDataset> FindCifar100(const std::string& dir, const std::string& label) {
  CifarDataset found;
  found.kind = "CIFAR-100";
  found.label_bytes = 2;
  const bool coarse = label == "coarse";
  found.label_offset = coarse ? 0 : 1;
  found.num_classes = coarse ? 20 : 100;
  if (!IsFile(dir, "train.bin")) return Status::NotFound(dir + ": has no train.bin (CIFAR-100's training set)");
  found.splits.push_back({"train", {(fs::path(dir) / "train.bin").string()}});
  if (IsFile(dir, "test.bin")) found.splits.push_back({"test", {(fs::path(dir) / "test.bin").string()}});
  const std::string names = coarse ? "coarse_label_names.txt" : "fine_label_names.txt";
  if (IsFile(dir, names)) found.names_path = (fs::path(dir) / names).string();
  return found;
}

}  // namespace

bool LooksLikeCifar(const std::string& dir) {
  for (const char* name : {"data_batch_1.bin", "test_batch.bin", "batches.meta.txt", "fine_label_names.txt",
                           "data_batch_1", "batches.meta"}) {
    if (IsFile(dir, name)) return true;
  }
  return IsFile(dir, "meta") && IsFile(dir, "train") && IsFile(dir, "test");  // cifar-100-python
}

StatusOr<CifarDataset> FindCifarDataset(const std::string& dir, const std::string& label) {
  const bool cifar100 = IsFile(dir, "train.bin") || IsFile(dir, "fine_label_names.txt");
  const bool cifar10 = IsFile(dir, "data_batch_1.bin") || IsFile(dir, "test_batch.bin") ||
                       IsFile(dir, "batches.meta.txt");
  if (!cifar10 && !cifar100) {
    if (IsFile(dir, "data_batch_1") || IsFile(dir, "batches.meta")) return RefusePythonVersion(dir, false);
    if (IsFile(dir, "meta") && IsFile(dir, "train")) return RefusePythonVersion(dir, true);
    return Status::NotFound(dir + ": no CIFAR dataset found (expected CIFAR-10's data_batch_1..5.bin and "
                                  "test_batch.bin, or CIFAR-100's train.bin and test.bin)");
  }
  if (cifar10 && cifar100) {
    return Status::InvalidArgument(dir + ": holds files of both CIFAR-10 (data_batch_*.bin) and CIFAR-100 "
                                         "(train.bin): build each from a folder of its own");
  }
  if (cifar10 && !label.empty()) {
    return Status::InvalidArgument("--label " + label + ": CIFAR-10 has one label; --label fine or coarse picks "
                                   "CIFAR-100's");
  }
  if (cifar100 && !label.empty() && label != "fine" && label != "coarse") {
    return Status::InvalidArgument("--label " + label + ": CIFAR-100's labels are fine (100 classes, the default) "
                                   "and coarse (20 superclasses)");
  }
  StatusOr<CifarDataset> found = cifar10 ? FindCifar10(dir) : FindCifar100(dir, label);
  if (!found.ok()) return found;
  for (const CifarSplitFiles& split : found->splits) {
    for (const std::string& path : split.paths) {
      GRANARY_RETURN_IF_ERROR(CheckRecords(path, found->record_bytes(), found->kind));
    }
  }
  return found;
}

StatusOr<std::vector<std::string>> ReadCifarClassNames(const std::string& names_path, int count) {
  std::string text;
  GRANARY_RETURN_IF_ERROR(ReadBoundedFile(names_path, 1 << 20, &text));
  std::vector<std::string> names;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos) names.push_back(line.substr(first, line.find_last_not_of(" \t\r") + 1 - first));
    start = end + 1;
  }
  if (static_cast<int>(names.size()) != count) {
    return Status::InvalidArgument(names_path + ": " + std::to_string(names.size()) + " class names, the labels need " +
                                   std::to_string(count));
  }
  return names;
}

}  // namespace granary
