// OpenCifarSource: CIFAR-10/100's binary version, read a record at a time
// (pread of the record's bytes: nothing held in memory but the open files).
#include <algorithm>
#include <array>

#include "base/file.h"
#include "preprocess/cifar.h"
#include "preprocess/source.h"

namespace granary {
namespace {

class CifarSplit : public SplitSource {
 public:
  CifarSplit(std::string name, const CifarDataset& dataset, std::vector<ReadOnlyFile> files, uint64_t count)
      : name_(std::move(name)),
        kind_(dataset.kind),
        record_bytes_(dataset.record_bytes()),
        label_bytes_(dataset.label_bytes),
        label_offset_(dataset.label_offset),
        num_classes_(dataset.num_classes),
        files_(std::move(files)),
        count_(count) {
    for (const ReadOnlyFile& file : files_) {
      raw_bytes_ += file.size_bytes();
      records_.push_back(file.size_bytes() / static_cast<uint64_t>(record_bytes_));
    }
  }

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return count_; }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override {
    const auto [file, record] = Locate(index);
    return files_[file].path() + "[" + std::to_string(record) + "]";
  }

  Status Produce(uint64_t index, Sample* sample) const override {
    const auto [file, record] = Locate(index);
    std::array<char, 2 + kCifarPixelBytes> bytes;
    GRANARY_RETURN_IF_ERROR(files_[file].ReadAt(record * record_bytes_, record_bytes_, bytes.data()));
    const int64_t label = static_cast<uint8_t>(bytes[label_offset_]);
    if (label >= num_classes_) {
      return Status::InvalidArgument("label " + std::to_string(label) + " is outside " + kind_ + "'s 0.." +
                                     std::to_string(num_classes_ - 1));
    }
    sample->fields.resize(2);
    sample->fields[0].assign(bytes.data() + label_bytes_, kCifarPixelBytes);
    sample->fields[1].assign(reinterpret_cast<const char*>(&label), sizeof(label));
    return Status::OK();
  }

 private:
  // The file holding item `index`, and its record there.
  std::pair<size_t, uint64_t> Locate(uint64_t index) const {
    size_t file = 0;
    while (file + 1 < records_.size() && index >= records_[file]) index -= records_[file++];
    return {file, index};
  }

  std::string name_;
  std::string kind_;
  uint64_t record_bytes_;
  int label_bytes_;
  int label_offset_;
  int64_t num_classes_;
  std::vector<ReadOnlyFile> files_;
  std::vector<uint64_t> records_;  // in each file
  uint64_t count_;
  uint64_t raw_bytes_ = 0;
};

}  // namespace

StatusOr<Source> OpenCifarSource(const std::string& dir, const CifarSourceOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(CifarDataset dataset, FindCifarDataset(dir, options.label));
  Source source;
  source.info.kind = "cifar";
  source.info.path = dir;
  source.info.label_field = "label";
  source.info.num_classes = dataset.num_classes;
  if (dataset.label_bytes == 2) source.info.options["label"] = options.label.empty() ? "fine" : options.label;
  const Shape image_shape = {3, 32, 32};
  source.info.schema.fields = {{"image", DType::kUInt8, image_shape, "CHW"}, {"label", DType::kInt64, {}, ""}};
  for (const CifarSplitFiles& split : dataset.splits) {
    std::vector<ReadOnlyFile> files(split.paths.size());
    uint64_t count = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      GRANARY_RETURN_IF_ERROR(files[i].Open(split.paths[i]));
      count += files[i].size_bytes() / static_cast<uint64_t>(dataset.record_bytes());
    }
    if (options.limit > 0) count = std::min(count, options.limit);
    source.splits.push_back(std::make_unique<CifarSplit>(split.name, dataset, std::move(files), count));
  }
  if (!options.class_names.empty()) {
    if (static_cast<int>(options.class_names.size()) != dataset.num_classes) {
      return Status::InvalidArgument("--class-names gives " + std::to_string(options.class_names.size()) +
                                     " names; " + dataset.kind + "'s labels need " +
                                     std::to_string(dataset.num_classes));
    }
    source.info.class_names = options.class_names;
  } else if (!dataset.names_path.empty()) {
    GRANARY_ASSIGN_OR_RETURN(source.info.class_names, ReadCifarClassNames(dataset.names_path, dataset.num_classes));
  } else {
    for (int i = 0; i < dataset.num_classes; ++i) source.info.class_names.push_back(std::to_string(i));
    source.info.notes.push_back(dir + ": no file of class names (" + dataset.kind + "'s " +
                                (dataset.label_bytes == 1 ? "batches.meta.txt" : "*_label_names.txt") +
                                "): the classes are named 0.." + std::to_string(dataset.num_classes - 1));
  }
  if (dataset.label_bytes == 1 && dataset.splits[0].paths.size() < 5) {
    source.info.notes.push_back(dir + ": " + std::to_string(dataset.splits[0].paths.size()) +
                                " of CIFAR-10's 5 training batches (data_batch_1..5.bin)");
  }
  if (dataset.splits.size() == 1) {
    source.info.notes.push_back(dir + ": no test split (" + dataset.kind + "'s " +
                                (dataset.label_bytes == 1 ? "test_batch.bin" : "test.bin") + " is not there)");
  }
  return source;
}

}  // namespace granary
