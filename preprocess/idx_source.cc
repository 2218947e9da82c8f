#include <algorithm>
#include <filesystem>
#include <set>

#include "preprocess/idx.h"
#include "preprocess/source.h"

namespace granary {
namespace {

class IdxSplit : public SplitSource {
 public:
  IdxSplit(std::string name, std::string images_path, IdxArray images, IdxArray labels, uint64_t count,
           uint64_t raw_bytes)
      : name_(std::move(name)),
        images_path_(std::move(images_path)),
        images_(std::move(images)),
        labels_(std::move(labels)),
        count_(count),
        raw_bytes_(raw_bytes) {
    image_bytes_ = images_.data.size() / static_cast<size_t>(images_.dims[0]);
  }

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return count_; }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override {
    return images_path_ + "[" + std::to_string(index) + "]";
  }

  Status Produce(uint64_t index, Sample* sample) const override {
    sample->fields.resize(2);
    sample->fields[0].assign(reinterpret_cast<const char*>(images_.data.data()) + index * image_bytes_, image_bytes_);
    const int64_t label = labels_.data[index];
    sample->fields[1].assign(reinterpret_cast<const char*>(&label), sizeof(label));
    return Status::OK();
  }

 private:
  std::string name_;
  std::string images_path_;
  IdxArray images_;
  IdxArray labels_;
  uint64_t count_;
  uint64_t raw_bytes_;
  size_t image_bytes_ = 0;
};

uint64_t FileBytes(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

}  // namespace

StatusOr<Source> OpenIdxSource(const std::string& dir, const IdxSourceOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(std::vector<IdxSplitFiles> found, FindIdxDataset(dir));

  Source source;
  source.info.kind = "idx";
  source.info.path = dir;
  source.info.label_field = "label";
  Shape image_shape;
  int max_label = -1;
  std::set<uint8_t> seen_labels;  // in any split
  for (const IdxSplitFiles& files : found) {
    GRANARY_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(files.images_path));
    GRANARY_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(files.labels_path));
    if (images.dtype != DType::kUInt8 || images.dims.size() < 2 || images.dims.size() > 4) {
      return Status::InvalidArgument(files.images_path + ": expected uint8 images with 2 or 3 dims per image");
    }
    for (int64_t dim : images.dims) {
      if (dim <= 0) {
        return Status::InvalidArgument(files.images_path + ": declares dims " + ShapeToString(images.dims) +
                                       ", no images to read (every dim must be at least 1)");
      }
    }
    if (labels.dtype != DType::kUInt8 || labels.dims.size() != 1) {
      return Status::InvalidArgument(files.labels_path + ": expected a 1-dim uint8 label file");
    }
    if (labels.dims[0] != images.dims[0]) {
      return Status::InvalidArgument(files.labels_path + ": " + std::to_string(labels.dims[0]) + " labels for " +
                                     std::to_string(images.dims[0]) + " images in " + files.images_path);
    }
    Shape shape(images.dims.begin() + 1, images.dims.end());
    if (shape.size() == 2) shape.insert(shape.begin(), 1);  // CHW with C = 1
    if (image_shape.empty()) {
      image_shape = shape;
    } else if (shape != image_shape) {
      return Status::InvalidArgument(files.images_path + ": image shape " + ShapeToString(shape) + " differs from " +
                                     ShapeToString(image_shape) + " of the train split");
    }
    for (uint8_t l : labels.data) {
      max_label = std::max<int>(max_label, l);
      seen_labels.insert(l);
    }
    uint64_t count = static_cast<uint64_t>(images.dims[0]);
    if (options.limit > 0) count = std::min(count, options.limit);
    uint64_t raw = FileBytes(files.images_path) + FileBytes(files.labels_path);
    source.splits.push_back(std::make_unique<IdxSplit>(files.name, files.images_path, std::move(images),
                                                       std::move(labels), count, raw));
  }
  source.info.schema.fields = {{"image", DType::kUInt8, image_shape, image_shape.size() == 3 ? "CHW" : ""},
                               {"label", DType::kInt64, {}, ""}};
  source.info.num_classes = max_label + 1;
  if (const size_t empty = static_cast<size_t>(max_label + 1) - seen_labels.size(); empty > 0) {
    std::string absent;
    for (int l = 0, listed = 0; l <= max_label && listed < 8; ++l) {
      if (!seen_labels.count(static_cast<uint8_t>(l))) absent += (listed++ > 0 ? ", " : "") + std::to_string(l);
    }
    source.info.notes.push_back("labels run 0.." + std::to_string(max_label) + ": " +
                                std::to_string(max_label + 1) + " classes, " + std::to_string(empty) +
                                " of which no sample has (" + absent + (empty > 8 ? ", ..." : "") +
                                "; a stray label?)");
  }
  if (!options.class_names.empty()) {
    if (static_cast<int64_t>(options.class_names.size()) < source.info.num_classes) {
      return Status::InvalidArgument("--class-names gives " + std::to_string(options.class_names.size()) +
                                     " names, the labels need " + std::to_string(source.info.num_classes));
    }
    source.info.class_names = options.class_names;
    source.info.num_classes = static_cast<int64_t>(options.class_names.size());
  } else {
    for (int i = 0; i < source.info.num_classes; ++i) source.info.class_names.push_back(std::to_string(i));
  }
  return source;
}

}  // namespace granary
