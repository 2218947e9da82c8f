// Image folders as torchvision's ImageFolder reads them: RAW/<class>/**/*.jpg
// (or RAW/train/<class>/..., RAW/val|test/<class>/...).
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>

#include "preprocess/image.h"
#include "preprocess/source.h"
#include "store/file.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// Kept for every image for the whole build, so it stays small: the path
// relative to RAW (also how the image is named in messages) and the label.
struct ImageItem {
  std::string name;
  int64_t label = 0;
};

bool HasImageExtension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<std::string> SortedSubdirs(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ImageSplit : public SplitSource {
 public:
  ImageSplit(std::string name, std::string raw, std::vector<ImageItem> items, uint64_t raw_bytes,
             ImageTransform transform)
      : name_(std::move(name)),
        raw_(std::move(raw)),
        items_(std::move(items)),
        transform_(transform),
        raw_bytes_(raw_bytes) {}

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return items_.size(); }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override { return items_[index].name; }

  Status Produce(uint64_t index, Sample* sample) const override {
    const ImageItem& item = items_[index];
    thread_local std::string file;
    thread_local Image image;
    GRANARY_RETURN_IF_ERROR(ReadFile(raw_ + "/" + item.name, &file));
    if (file.empty()) return Status::InvalidArgument("empty file");
    GRANARY_RETURN_IF_ERROR(DecodeImage(reinterpret_cast<const uint8_t*>(file.data()), file.size(), transform_, &image));
    sample->fields.resize(2);
    sample->fields[0].assign(reinterpret_cast<const char*>(image.pixels.data()), image.pixels.size());
    sample->fields[1].assign(reinterpret_cast<const char*>(&item.label), sizeof(item.label));
    return Status::OK();
  }

 private:
  std::string name_;
  std::string raw_;
  std::vector<ImageItem> items_;
  ImageTransform transform_;
  uint64_t raw_bytes_ = 0;
};

// Lists the images under root/<class>/ for each class in `classes`, in class
// then path order; files without an image extension go to *ignored.
Status ListImages(const fs::path& root, const fs::path& raw, const std::vector<std::string>& classes,
                  std::vector<ImageItem>* items, uint64_t* bytes, std::vector<std::string>* ignored) {
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path dir = root / classes[label];
    if (!fs::is_directory(dir)) continue;
    std::vector<ImageItem> found;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) return Status::IOError(dir.string(), "list", ec.value());
      if (!it->is_regular_file(ec)) continue;
      const std::string rel = fs::relative(it->path(), raw, ec).string();
      if (!HasImageExtension(it->path())) {
        ignored->push_back(rel);
        continue;
      }
      found.push_back({rel, static_cast<int64_t>(label)});
      *bytes += static_cast<uint64_t>(it->file_size(ec));
    }
    std::sort(found.begin(), found.end(), [](const ImageItem& a, const ImageItem& b) { return a.name < b.name; });
    items->insert(items->end(), found.begin(), found.end());
  }
  return Status::OK();
}

}  // namespace

StatusOr<Source> OpenImageFolderSource(const std::string& dir, const ImageFolderOptions& options) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::NotFound(dir + ": no such folder");
  if (!fs::is_directory(dir, ec)) return Status::InvalidArgument(dir + ": is not a folder");
  if (options.width < 1 || options.height < 1) return Status::InvalidArgument("--size must be positive");
  if (options.channels != 1 && options.channels != 3) return Status::InvalidArgument("--channels must be 1 or 3");
  if (options.val_fraction < 0 || options.val_fraction >= 1) {
    return Status::InvalidArgument("--val-fraction must be in [0, 1)");
  }
  const fs::path raw(dir);
  const std::vector<std::string> top = SortedSubdirs(raw);
  const bool has_train = std::find(top.begin(), top.end(), "train") != top.end();
  std::vector<std::pair<std::string, fs::path>> split_roots;  // name, folder of class folders
  if (has_train) {
    split_roots.push_back({"train", raw / "train"});
    for (const char* other : {"val", "test"}) {
      if (std::find(top.begin(), top.end(), other) != top.end()) split_roots.push_back({other, raw / other});
    }
  } else {
    split_roots.push_back({"train", raw});
  }
  const std::vector<std::string> classes = SortedSubdirs(split_roots[0].second);
  if (classes.empty()) {
    return Status::NotFound(dir + ": no class folders (expected " + split_roots[0].second.string() +
                            "/<class>/*.jpg|jpeg|png)");
  }
  for (size_t s = 1; s < split_roots.size(); ++s) {
    for (const std::string& c : SortedSubdirs(split_roots[s].second)) {
      if (std::find(classes.begin(), classes.end(), c) == classes.end()) {
        return Status::InvalidArgument((split_roots[s].second / c).string() + ": class '" + c +
                                       "' does not appear in " + split_roots[0].second.string());
      }
    }
  }

  Source source;
  source.info.kind = "image-folder";
  source.info.path = dir;
  source.info.label_field = "label";
  source.info.class_names = classes;
  source.info.num_classes = static_cast<int64_t>(classes.size());
  source.info.schema.fields = {
      {"image", DType::kUInt8, {options.height, options.width, options.channels}, "HWC"},
      {"label", DType::kInt64, {}, ""}};
  ImageTransform transform{options.width, options.height, options.channels};
  std::vector<std::string> ignored;
  for (const auto& [name, root] : split_roots) {
    std::vector<ImageItem> items;
    uint64_t bytes = 0;
    GRANARY_RETURN_IF_ERROR(ListImages(root, raw, classes, &items, &bytes, &ignored));
    if (split_roots.size() == 1 && options.val_fraction > 0) {
      // Deterministic split by a hash of the relative path: stable when files are added.
      std::vector<ImageItem> train, val;
      for (ImageItem& item : items) {
        const uint64_t h = XXH64(item.name.data(), item.name.size(), 0);
        (static_cast<double>(h % 1000000) < options.val_fraction * 1e6 ? val : train).push_back(std::move(item));
      }
      items = std::move(train);
      if (options.limit > 0 && val.size() > options.limit) val.resize(options.limit);
      if (options.limit > 0 && items.size() > options.limit) items.resize(options.limit);
      // The file bytes are split in proportion to the counts.
      const uint64_t total = items.size() + val.size();
      const uint64_t val_bytes = total > 0 ? bytes * val.size() / total : 0;
      source.splits.push_back(std::make_unique<ImageSplit>("train", dir, std::move(items), bytes - val_bytes, transform));
      source.splits.push_back(std::make_unique<ImageSplit>("val", dir, std::move(val), val_bytes, transform));
      continue;
    }
    if (options.limit > 0 && items.size() > options.limit) items.resize(options.limit);
    if (items.empty()) return Status::NotFound(root.string() + ": no .jpg, .jpeg or .png files in its class folders");
    source.splits.push_back(std::make_unique<ImageSplit>(name, dir, std::move(items), bytes, transform));
  }
  if (!ignored.empty()) {
    std::string note = "ignored " + std::to_string(ignored.size()) + " file(s) without a .jpg/.jpeg/.png extension:";
    for (size_t i = 0; i < ignored.size() && i < 5; ++i) note += " " + ignored[i];
    if (ignored.size() > 5) note += " ...";
    source.info.notes.push_back(note);
  }
  return source;
}

}  // namespace granary
