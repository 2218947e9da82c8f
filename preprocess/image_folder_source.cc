// Image folders as torchvision's ImageFolder reads them: RAW/<class>/**/*.jpg
// (or RAW/train/<class>/..., RAW/val|test/<class>/...).
#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <map>

#include "base/file.h"
#include "base/names_text.h"
#include "preprocess/class_labels.h"
#include "preprocess/folder_layout.h"
#include "preprocess/image.h"
#include "preprocess/image_facts.h"
#include "preprocess/image_folder_walk.h"
#include "preprocess/image_labels.h"
#include "preprocess/masks_and_boxes.h"
#include "preprocess/progress.h"
#include "preprocess/source.h"
#include "preprocess/stratified.h"
#include "store/output_path.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// A walk of this many files or more shows a line counting them (on a terminal).
constexpr uint64_t kListingLineFiles = 10000;

class ImageSplit : public SplitSource {
 public:
  // `unlabelled`: why an item of label -1 has none (no row of a --labels table names it).
  ImageSplit(std::string name, std::string raw, std::vector<ImageItem> items, uint64_t raw_bytes,
             ImageTransform transform, std::string unlabelled = "")
      : name_(std::move(name)),
        raw_(std::move(raw)),
        items_(std::move(items)),
        transform_(transform),
        raw_bytes_(raw_bytes),
        unlabelled_(std::move(unlabelled)) {}

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return items_.size(); }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override { return items_[index].name; }
  int64_t ItemLabel(uint64_t index) const override { return items_[index].label; }

  Status Produce(uint64_t index, Sample* sample) const override {
    const ImageItem& item = items_[index];
    if (item.label < 0) return Status::InvalidArgument("no label: " + unlabelled_);
    thread_local std::string file;
    GRANARY_RETURN_IF_ERROR(ReadFile(raw_ + "/" + item.name, &file));
    return DecodeImageItem(file, item.label, transform_, index, &facts_, sample);
  }

  const ImageFacts& facts() const { return facts_; }

 private:
  std::string name_;
  std::string raw_;
  std::vector<ImageItem> items_;
  ImageTransform transform_;
  uint64_t raw_bytes_ = 0;
  std::string unlabelled_;
  mutable ImageFacts facts_{items_.size()};
};

// Sets `source`'s produced notes to DecodedImageNotes of its image splits.
void NoteDecodedImages(Source* source, const ImageTransform& transform) {
  std::vector<const ImageFacts*> facts;
  for (const auto& split : source->splits) {
    if (const auto* images = dynamic_cast<const ImageSplit*>(split.get())) facts.push_back(&images->facts());
  }
  source->produced_notes = [facts, transform] { return DecodedImageNotes(facts, transform); };
}

// The images below split.root, a split labelled by the table in it
// (split.labels), as train/'s `classes` by name; an image no row names is
// kept with label -1, rejected by name when built. The table's hash is
// recorded as the split's `<split>_labels_hash` option.
Status ListTableLabelledImages(const SplitRoot& split, const fs::path& raw, const std::vector<std::string>& classes,
                               const ImageFolderOptions& options, Walk* walk, std::vector<ImageItem>* items,
                               uint64_t* bytes, SourceInfo* info) {
  std::vector<std::string> found;
  GRANARY_RETURN_IF_ERROR(ListImagesBelow(split.root, raw, walk, &found, bytes));
  const std::string table = fs::path(split.labels).lexically_relative(raw).string();
  walk->ignored.erase(std::remove(walk->ignored.begin(), walk->ignored.end(), table), walk->ignored.end());
  std::sort(found.begin(), found.end());
  std::vector<std::string> in_split;  // relative to the split's folder, as its table names them
  const std::string prefix = split.root.lexically_relative(raw).string() + "/";
  for (const std::string& name : found) {
    in_split.push_back(name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : name);
  }
  GRANARY_ASSIGN_OR_RETURN(ImageLabels labels,
                           ImageLabels::Read(split.labels, "", in_split, options.temp_dir, {classes, "train/'s"}));
  for (size_t i = 0; i < found.size(); ++i) items->push_back({std::move(found[i]), labels.ClassOf(in_split[i])});
  for (std::string& note : labels.Notes()) info->notes.push_back(std::move(note));
  info->options[split.name + "_labels_hash"] = labels.content_hash();
  return Status::OK();
}

// A note naming the classes none of `items` has.
void NoteEmptyClasses(const std::vector<ImageItem>& items, const std::vector<std::string>& classes,
                      std::vector<std::string>* notes) {
  std::vector<bool> has_images(classes.size(), false);
  for (const ImageItem& item : items) {
    if (item.label >= 0) has_images[static_cast<size_t>(item.label)] = true;  // -1: unlabelled (--labels)
  }
  std::vector<std::string> empty;
  for (size_t label = 0; label < classes.size(); ++label) {
    if (!has_images[label]) empty.push_back(classes[label]);
  }
  if (!empty.empty()) {
    notes->push_back(std::to_string(empty.size()) + " class(es) with no image in train: " + NamesText(empty) +
                     " (their labels stay, with no samples)");
  }
}

// Split `name` of `items` (their files `bytes` in all) into `source`: with
// options.val_fraction, as train and val (by a hash of each image's path:
// stable when files are added), each cut to options.limit, stratified.
void AddSplits(const std::string& name, std::vector<ImageItem> items, uint64_t bytes,
               const ImageFolderOptions& options, const std::string& dir, const ImageTransform& transform,
               const std::string& unlabelled, Source* source) {
  if (options.val_fraction <= 0) {
    KeepStratified(&items, options.limit, [](const ImageItem& i) { return i.label; });
    source->splits.push_back(std::make_unique<ImageSplit>(name, dir, std::move(items), bytes, transform, unlabelled));
    return;
  }
  std::vector<ImageItem> train, val;
  for (ImageItem& item : items) {
    const uint64_t h = XXH64(item.name.data(), item.name.size(), 0);
    (static_cast<double>(h % 1000000) < options.val_fraction * 1e6 ? val : train).push_back(std::move(item));
  }
  KeepStratified(&val, options.limit, [](const ImageItem& i) { return i.label; });
  KeepStratified(&train, options.limit, [](const ImageItem& i) { return i.label; });
  // The file bytes are split in proportion to the counts.
  const uint64_t total = train.size() + val.size();
  const uint64_t val_bytes = total > 0 ? bytes * val.size() / total : 0;
  source->splits.push_back(
      std::make_unique<ImageSplit>("train", dir, std::move(train), bytes - val_bytes, transform, unlabelled));
  source->splits.push_back(std::make_unique<ImageSplit>("val", dir, std::move(val), val_bytes, transform, unlabelled));
}

// "none of --like tr.db's classes (ant, bee), so a model ...": the end of
// the refusal of a class a build --like that db finds and the db lacks.
std::string NoneOfLikeClasses(const LikeDb& like) {
  return "none of " + like.named + "'s classes (" + NamesText(like.class_names) + "), so a model trained on it has "
         "no output for it: move it out, or build without --like";
}

// The images `found` (sorted paths below `dir`), each of the class its file
// name says (ClassFromName: cat.0.jpg, cat.1.jpg are class "cat"), into
// *items; the classes, sorted, into *names (--like: that db's, each name
// one of them). An image whose name says no class gets -1 (rejected by name
// when built). InvalidArgument where the names give fewer than two classes
// (without --like), or more than kMaxLabelValues.
Status LabelByName(const std::string& dir, std::vector<std::string> found, const LikeDb& like,
                   std::vector<ImageItem>* items, std::vector<std::string>* names) {
  std::vector<std::string> said;  // each image's class by its name
  std::map<std::string, int64_t> classes;
  for (const std::string& name : like.class_names) classes.emplace(name, 0);
  for (size_t i = 0; i < found.size(); ++i) {
    said.push_back(ClassFromName(found[i]));
    if (said.back().empty() || !classes.emplace(said.back(), 0).second || like.path.empty()) continue;
    return Status::InvalidArgument((fs::path(dir) / found[i]).string() + ": its name says class '" + said.back() +
                                   "', which is " + NoneOfLikeClasses(like));
  }
  if (!like.path.empty()) {
    *names = like.class_names;
    for (size_t k = 0; k < names->size(); ++k) classes[(*names)[k]] = static_cast<int64_t>(k);
  } else if (classes.size() < 2 || classes.size() > kMaxLabelValues) {
    return Status::InvalidArgument(
        dir + ": --label-from-name: the " + std::to_string(found.size()) + " images' names (without their number) " +
        "give " + std::to_string(classes.size()) + " class(es)" +
        (classes.empty() ? "" : " (" + classes.begin()->first + (classes.size() > 1 ? ", ..." : "") + ")") +
        ": it needs names that say their class, as cat.0.jpg and dog.0.jpg do");
  } else {
    for (auto& [name, index] : classes) {
      index = static_cast<int64_t>(names->size());
      names->push_back(name);
    }
  }
  for (size_t i = 0; i < found.size(); ++i) {
    items->push_back({std::move(found[i]), said[i].empty() ? -1 : classes.at(said[i])});
  }
  return Status::OK();
}

// Every image below `dir`, labelled by the table options.labels (--labels)
// or by its name (--label-from-name), into `source` (its schema and kind set).
Status AddLabelledImages(const std::string& dir, const ImageFolderOptions& options, const ImageTransform& transform,
                         Source* source) {
  const fs::path raw(dir);
  std::vector<std::string> hidden, dbs;
  (void)SortedSubdirs(raw, &hidden, &dbs);
  Walk walk;
  struct stat st;
  if (Identify(raw, &st)) walk.roots.insert({st.st_dev, st.st_ino});
  for (const std::string& db : dbs) {
    if (Identify(raw / db, &st)) walk.left_out.insert({st.st_dev, st.st_ino});
  }
  walk.StartSplit("train");
  ProgressLine listing("listing " + dir, kListingLineFiles, options.show_progress, ProgressUnit::kFiles);
  walk.progress = &listing;
  std::vector<std::string> found;
  uint64_t bytes = 0;
  GRANARY_RETURN_IF_ERROR(ListImagesBelow(raw, raw, &walk, &found, &bytes));
  if (found.empty()) {
    std::sort(walk.undecoded.begin(), walk.undecoded.end());
    return Status::NotFound(dir + ": no .jpg, .jpeg, .png or .webp files below it" +
                            (walk.undecoded.empty() ? "" : "; " + UndecodedNote(walk.undecoded)));
  }
  std::sort(found.begin(), found.end());
  std::vector<ImageItem> items;
  std::string unlabelled;
  if (options.label_from_name) {
    GRANARY_RETURN_IF_ERROR(LabelByName(dir, std::move(found), options.like, &items, &source->info.class_names));
    source->info.options["layout"] = "names";
    unlabelled = "its name is no class followed by a number (as cat.0.jpg is)";
  } else {
    const KnownClasses like = {options.like.class_names, options.like.named + "'s"};
    GRANARY_ASSIGN_OR_RETURN(ImageLabels labels,
                             ImageLabels::Read(options.labels, options.label_column, found, options.temp_dir, like));
    for (std::string& name : found) {
      const int64_t label = labels.ClassOf(name);
      items.push_back({std::move(name), label});
    }
    source->info.class_names = labels.class_names();
    for (std::string& note : labels.Notes()) source->info.notes.push_back(std::move(note));
    source->info.options["layout"] = "labels";
    source->info.options["labels"] = options.labels;
    source->info.options["labels_hash"] = labels.content_hash();
    source->info.options["label"] = labels.label_column();
    unlabelled = "no row of " + options.labels + " names it";
  }
  source->info.num_classes = static_cast<int64_t>(source->info.class_names.size());
  NoteEmptyClasses(items, source->info.class_names, &source->info.notes);
  NoteTopFolders(raw, hidden, dbs, FolderLayout::kSplits, &source->info.notes);
  AddSplits("train", std::move(items), bytes, options, dir, transform, unlabelled, source);
  for (auto& [path, input] : walk.inputs) source->info.inputs.push_back(std::move(input));
  NoteWalk(&walk, &source->info.notes);
  return Status::OK();
}

// The classes of a folder built --like a db: the db's, in its order, where
// every class folder found (`*classes`, below `train`) is one of them.
Status TakeLikeClasses(const fs::path& train, const LikeDb& like, std::vector<std::string>* classes) {
  for (const std::string& c : *classes) {
    if (std::find(like.class_names.begin(), like.class_names.end(), c) == like.class_names.end()) {
      return Status::InvalidArgument((train / c).string() + ": class '" + c + "' is " + NoneOfLikeClasses(like));
    }
  }
  *classes = like.class_names;
  return Status::OK();
}

// A segmentation or detection dataset, which the walk found read as class
// folders (images/ and masks/ as two classes): refused, saying what it is.
Status RefuseMasksOrBoxes(const std::string& dir, const Walk& walk, FolderLayout layout,
                          const std::vector<std::string>& classes) {
  std::vector<std::string> images, others = walk.undecoded;
  others.insert(others.end(), walk.ignored.begin(), walk.ignored.end());
  for (const auto& [path, input] : walk.inputs) images.push_back(path);
  const std::string said = MasksOrBoxesIn(dir, images, others);
  if (said.empty()) return Status::OK();
  // Class folders that each hold masks/ beside images/ (COVID/{images,masks}/, a classification dataset with
  // masks) or a split's classes: OpenSource refuses them as SplitsNamedOtherwise says.
  bool refused_there = false;
  if (layout == FolderLayout::kClasses && !SplitsNamedOtherwise(dir, classes, &refused_there).empty() &&
      refused_there) {
    return Status::OK();
  }
  const char* flag = layout == FolderLayout::kSplits ? "splits" : "classes";
  return Status::InvalidArgument(dir + ": " + said + ". prep builds image classification dbs, an image's class the "
                                 "folder it lies in, and would read this one's folders as classes (" +
                                 NamesText(classes) + "): write its images with their masks or boxes with "
                                 "granary.write (README, \"Masks and boxes\"), or give --layout " + flag +
                                 " to read its folders as classes all the same");
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
  Source source;
  source.info.kind = "image-folder";
  source.info.path = dir;
  source.info.label_field = "label";
  source.info.schema.fields = {
      {"image", DType::kUInt8, {options.height, options.width, options.channels}, "HWC"},
      {"label", DType::kInt64, {}, ""}};
  source.info.items_are_files = true;
  ImageTransform transform{options.width, options.height, options.channels, options.max_decode_bytes};
  if (!options.labels.empty() || options.label_from_name) {
    GRANARY_RETURN_IF_ERROR(AddLabelledImages(dir, options, transform, &source));
    NoteDecodedImages(&source, transform);
    return source;
  }
  const fs::path raw(dir);
  std::vector<std::string> notes, hidden, dbs;
  const std::vector<std::string> top = SortedSubdirs(raw, &hidden, &dbs);
  GRANARY_ASSIGN_OR_RETURN(FolderLayout layout, ChooseLayout(raw, top, options.layout, &notes));
  std::vector<SplitRoot> split_roots;
  std::vector<std::string> classes;
  GRANARY_RETURN_IF_ERROR(FindSplitRoots(raw, top, layout, &split_roots, &classes));
  if (!options.like.path.empty()) GRANARY_RETURN_IF_ERROR(TakeLikeClasses(split_roots[0].root, options.like, &classes));
  NoteTopFolders(raw, hidden, dbs, layout, &notes);
  for (const SplitRoot& split : split_roots) {
    if (split.name == "val" && options.val_fraction > 0) {
      return Status::InvalidArgument("--val-fraction: " + split.root.string() + " is the val split already");
    }
  }

  source.info.class_names = classes;
  source.info.num_classes = static_cast<int64_t>(classes.size());
  // The roots (RAW, each split's folder, each class folder) are only walked as
  // themselves: a link to one from elsewhere is a cycle or a cross link.
  Walk walk;
  std::vector<fs::path> roots = {raw};
  for (const SplitRoot& split : split_roots) {
    roots.push_back(split.root);
    for (const std::string& c : classes) roots.push_back(split.root / c);
  }
  for (const fs::path& root : roots) {
    struct stat st;
    if (Identify(root, &st)) walk.roots.insert({st.st_dev, st.st_ino});
  }
  ProgressLine listing("listing " + dir, kListingLineFiles, options.show_progress, ProgressUnit::kFiles);
  walk.progress = &listing;
  for (const SplitRoot& split : split_roots) {
    const std::string& name = split.name;
    const fs::path& root = split.root;
    std::vector<ImageItem> items;
    uint64_t bytes = 0;
    walk.StartSplit(name);
    if (split.labels.empty()) {
      GRANARY_RETURN_IF_ERROR(ListImages(root, raw, classes, &walk, &items, &bytes));
    } else {
      GRANARY_RETURN_IF_ERROR(
          ListTableLabelledImages(split, raw, classes, options, &walk, &items, &bytes, &source.info));
    }
    if (name == "train") NoteEmptyClasses(items, classes, &source.info.notes);
    if (name == "train" && options.val_fraction > 0) {  // train and test folders: val held out of train
      AddSplits(name, std::move(items), bytes, options, dir, transform, "", &source);
      continue;
    }
    KeepStratified(&items, options.limit, [](const ImageItem& i) { return i.label; });
    if (items.empty()) {
      std::sort(walk.undecoded.begin(), walk.undecoded.end());
      const std::vector<std::string> loose = LooseImages(root);
      return Status::NotFound(root.string() + ": no .jpg, .jpeg, .png or .webp files in its class folders" +
                              (loose.empty() ? "" : "; " + std::to_string(loose.size()) + " image(s) beside them, " +
                                                        "in no class folder: " + NamesText(loose)) +
                              (walk.undecoded.empty() ? "" : "; " + UndecodedNote(walk.undecoded)));
    }
    const std::string unlabelled = split.labels.empty() ? "" : "no row of " + split.labels + " names it";
    source.splits.push_back(std::make_unique<ImageSplit>(name, dir, std::move(items), bytes, transform, unlabelled));
  }
  if (options.layout == FolderLayout::kAuto) GRANARY_RETURN_IF_ERROR(RefuseMasksOrBoxes(dir, walk, layout, classes));
  for (std::string& note : notes) source.info.notes.push_back(std::move(note));
  source.info.options["layout"] = layout == FolderLayout::kSplits ? "splits" : "classes";
  for (auto& [path, input] : walk.inputs) source.info.inputs.push_back(std::move(input));
  NoteWalk(&walk, &source.info.notes);
  NoteDecodedImages(&source, transform);
  return source;
}

}  // namespace granary
