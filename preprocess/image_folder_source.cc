// Image folders as torchvision's ImageFolder reads them: RAW/<class>/**/*.jpg
// (or RAW/train/<class>/..., RAW/val|test/<class>/...).
#include <sys/stat.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <map>
#include <set>
#include <tuple>

#include "base/file.h"
#include "preprocess/class_labels.h"
#include "preprocess/folder_layout.h"
#include "preprocess/image.h"
#include "preprocess/image_facts.h"
#include "preprocess/image_labels.h"
#include "preprocess/source.h"
#include "preprocess/stratified.h"
#include "store/output_path.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// Kept for every image for the whole build, so it stays small: the path
// relative to RAW (also how the image is named in messages) and the label.
struct ImageItem {
  std::string name;
  int64_t label = 0;
};

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
    thread_local Image image;
    GRANARY_RETURN_IF_ERROR(ReadFile(raw_ + "/" + item.name, &file));
    if (file.empty()) return Status::InvalidArgument("empty file");
    GRANARY_RETURN_IF_ERROR(DecodeImage(reinterpret_cast<const uint8_t*>(file.data()), file.size(), transform_, &image));
    sample->fields.resize(2);
    sample->fields[0].assign(reinterpret_cast<const char*>(image.pixels.data()), image.pixels.size());
    sample->fields[1].assign(reinterpret_cast<const char*>(&item.label), sizeof(item.label));
    facts_.Record(index, image);
    return Status::OK();
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

// A file or directory by identity, whatever path reached it.
using FileId = std::pair<dev_t, ino_t>;

// What walking an image folder has seen so far. Within a split each
// directory is listed once and each file taken once, however symlinks
// (cycles, links across classes) or hard links reach them again; a file in
// two splits is kept in both, and noted.
struct Walk {
  std::set<FileId> roots;  // RAW, each split's folder, each class folder: walked only as themselves
  std::set<FileId> dirs;   // listed in the split being walked (the roots included)
  std::set<FileId> files;  // taken as images in the split being walked
  std::map<FileId, std::string> first_split;  // each image's first split
  std::string split;                          // the split being walked
  std::vector<std::string> skipped_links;     // directory links to a folder already walked
  std::vector<std::string> reached_again;     // plain folders walked earlier through a link
  std::vector<std::string> duplicates;        // images reached a second time in a split
  std::vector<std::string> overlaps;          // images of a split that an earlier split holds too
  std::vector<std::string> aliases;           // class folders that are the same folder as another class's
  std::vector<std::string> ignored;           // files without an image extension
  std::vector<std::string> undecoded;         // images of a format prep does not decode (.bmp, .gif, ...)
  std::vector<std::string> hidden;            // dotfiles (macOS's ._x.jpg) and hidden folders
  std::map<std::string, InputFile> inputs;    // every image taken, by its path relative to RAW
  std::set<FileId> left_out;                  // folders not walked (granary dbs inside RAW)

  void StartSplit(const std::string& name) {
    split = name;
    dirs = roots;
    files.clear();
  }
};

bool Identify(const fs::path& p, struct stat* st) { return ::stat(p.c_str(), st) == 0; }

// Lists the images below `dir` (following directory links) into *found,
// named relative to `raw`, and adds their bytes to *bytes.
Status ListImagesBelow(const fs::path& dir, const fs::path& raw, Walk* walk, std::vector<std::string>* found,
                       uint64_t* bytes) {
  std::vector<fs::path> pending = {dir};
  while (!pending.empty()) {
    const fs::path current = std::move(pending.back());
    pending.pop_back();
    std::vector<fs::path> entries;
    std::error_code ec;
    for (fs::directory_iterator it(current, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
    if (ec) return Status::IOError(current.string(), "list", ec.value());
    std::sort(entries.begin(), entries.end());
    // Every entry's stat first, on every core: a folder of many images
    // costs a syscall each, most of what listing it (and so saying a db is
    // up to date) takes.
    std::vector<struct stat> stats(entries.size());
    std::vector<char> exists(entries.size());
    tbb::parallel_for(tbb::blocked_range<size_t>(0, entries.size(), 256), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t k = r.begin(); k != r.end(); ++k) exists[k] = Identify(entries[k], &stats[k]);
    });
    for (size_t k = entries.size(); k-- > 0;) {  // reversed: the stack pops them in order
      const fs::path& e = entries[k];
      const std::string rel = e.lexically_relative(raw).string();
      if (e.filename().string()[0] == '.') {
        walk->hidden.push_back(rel);
        continue;
      }
      if (!exists[k]) continue;  // a dangling link: no file to read
      const struct stat& st = stats[k];
      const FileId id{st.st_dev, st.st_ino};
      if (S_ISDIR(st.st_mode)) {
        if (walk->left_out.count(id) > 0) continue;
        if (!walk->dirs.insert(id).second) {
          (fs::is_symlink(e, ec) ? walk->skipped_links : walk->reached_again).push_back(rel);
          continue;
        }
        pending.push_back(e);
      } else if (S_ISREG(st.st_mode)) {
        if (!HasImageExtension(e)) {
          (HasOtherImageExtension(e) ? walk->undecoded : walk->ignored).push_back(rel);
        } else if (!walk->files.insert(id).second) {
          walk->duplicates.push_back(rel);
        } else {
          found->push_back(rel);
          *bytes += static_cast<uint64_t>(st.st_size);
          walk->inputs[rel] = {rel, static_cast<uint64_t>(st.st_size),
                               int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
          const auto [first, fresh] = walk->first_split.emplace(id, walk->split);
          if (!fresh && first->second != walk->split) walk->overlaps.push_back(rel + " (" + first->second + ")");
        }
      }
    }
  }
  return Status::OK();
}

// Lists the images under root/<class>/ for each class in `classes`, in class
// then path order. The class folders are walked in the order of their real
// paths, a link after the folder it names: an image reached through links
// belongs to the class folder that holds it, and a class folder that is a
// link to another class's folder (an alias) is skipped, named in the walk.
Status ListImages(const fs::path& root, const fs::path& raw, const std::vector<std::string>& classes, Walk* walk,
                  std::vector<ImageItem>* items, uint64_t* bytes) {
  std::vector<std::tuple<std::string, bool, size_t>> order;  // real path, is a link, label
  for (size_t label = 0; label < classes.size(); ++label) {
    std::error_code ec;
    const fs::path dir = root / classes[label];
    order.emplace_back(fs::weakly_canonical(dir, ec).string(), fs::is_symlink(dir, ec), label);
  }
  std::sort(order.begin(), order.end());
  std::set<FileId> listed;  // class folders, by identity
  for (const auto& [real, link, label] : order) {
    const fs::path dir = root / classes[label];
    struct stat st;
    if (!Identify(dir, &st) || !S_ISDIR(st.st_mode)) continue;
    if (!listed.insert({st.st_dev, st.st_ino}).second) {
      walk->aliases.push_back(dir.lexically_relative(raw).string() + "/");
      continue;
    }
    std::vector<std::string> found;
    GRANARY_RETURN_IF_ERROR(ListImagesBelow(dir, raw, walk, &found, bytes));
    std::sort(found.begin(), found.end());
    for (std::string& name : found) items->push_back({std::move(name), static_cast<int64_t>(label)});
  }
  std::stable_sort(items->begin(), items->end(),
                   [](const ImageItem& a, const ImageItem& b) { return a.label < b.label; });
  return Status::OK();
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
                           ImageLabels::Read(split.labels, "", in_split, options.temp_dir, classes));
  for (size_t i = 0; i < found.size(); ++i) items->push_back({std::move(found[i]), labels.ClassOf(in_split[i])});
  for (std::string& note : labels.Notes()) info->notes.push_back(std::move(note));
  info->options[split.name + "_labels_hash"] = labels.content_hash();
  return Status::OK();
}

// "<what>: a b c ..." naming the first few of `names`, for a note.
std::string NoteListing(const std::string& what, const std::vector<std::string>& names) {
  std::string note = what + ":";
  for (size_t i = 0; i < names.size() && i < 5; ++i) note += " " + names[i];
  if (names.size() > 5) note += " ...";
  return note;
}

// The images a walk left out for their format, named, with what to do.
std::string UndecodedNote(const std::vector<std::string>& undecoded) {
  return NoteListing("left out " + std::to_string(undecoded.size()) + " image(s) of a format prep does not decode",
                     undecoded) +
         " (prep reads JPEG, PNG and WebP: convert them, or write the folder with "
         "granary.write(torchvision.datasets.ImageFolder(...)), which reads what PIL reads)";
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
    notes->push_back(std::to_string(empty.size()) + " class(es) with no image in train: " + FolderNames(empty) +
                     " (their labels stay, with no samples)");
  }
}

// A note for each kind of file or folder the walk left out, or took in two splits.
void NoteWalk(Walk* walk, std::vector<std::string>* notes) {
  std::sort(walk->ignored.begin(), walk->ignored.end());
  std::sort(walk->undecoded.begin(), walk->undecoded.end());
  std::sort(walk->hidden.begin(), walk->hidden.end());
  const std::pair<const std::vector<std::string>*, std::pair<const char*, const char*>> kinds[] = {
      {&walk->ignored, {"ignored ", " file(s) without a .jpg/.jpeg/.png/.webp extension"}},
      {&walk->hidden, {"skipped ", " hidden file(s) or folder(s) (a name starting with '.')"}},
      {&walk->skipped_links, {"skipped ", " link(s) to a folder already walked (a cycle or a cross link)"}},
      {&walk->reached_again, {"skipped ", " folder(s) walked earlier through a link (each is taken once)"}},
      {&walk->aliases,
       {"", " class folder(s) are links to another class's folder, whose images are taken once, as that class's"}},
      {&walk->overlaps,
       {"", " image(s) are the same file as an image of an earlier split (hard or symbolic links), kept in both: "
            "evaluation overlaps training"}},
      {&walk->duplicates, {"skipped ", " image(s) reached a second time through links (each is taken once)"}}};
  if (!walk->undecoded.empty()) notes->push_back(UndecodedNote(walk->undecoded));
  for (const auto& [names, words] : kinds) {
    if (names->empty()) continue;
    notes->push_back(NoteListing(words.first + std::to_string(names->size()) + words.second, *names));
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

// The images `found` (sorted paths below `dir`), each of the class its file
// name says (ClassFromName: cat.0.jpg, cat.1.jpg are class "cat"), into
// *items; the classes, sorted, into *names. An image whose name says no
// class gets -1 (rejected by name when built). InvalidArgument where the
// names give fewer than two classes, or more than kMaxLabelValues.
Status LabelByName(const std::string& dir, std::vector<std::string> found, std::vector<ImageItem>* items,
                   std::vector<std::string>* names) {
  std::vector<std::string> said;  // each image's class by its name
  std::map<std::string, int64_t> classes;
  for (const std::string& name : found) {
    said.push_back(ClassFromName(name));
    if (!said.back().empty()) classes.emplace(said.back(), 0);
  }
  if (classes.size() < 2 || classes.size() > kMaxLabelValues) {
    return Status::InvalidArgument(
        dir + ": --label-from-name: the " + std::to_string(found.size()) + " images' names (without their number) " +
        "give " + std::to_string(classes.size()) + " class(es)" +
        (classes.empty() ? "" : " (" + classes.begin()->first + (classes.size() > 1 ? ", ..." : "") + ")") +
        ": it needs names that say their class, as cat.0.jpg and dog.0.jpg do");
  }
  for (auto& [name, index] : classes) {
    index = static_cast<int64_t>(names->size());
    names->push_back(name);
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
    GRANARY_RETURN_IF_ERROR(LabelByName(dir, std::move(found), &items, &source->info.class_names));
    source->info.options["layout"] = "names";
    unlabelled = "its name is no class followed by a number (as cat.0.jpg is)";
  } else {
    GRANARY_ASSIGN_OR_RETURN(ImageLabels labels,
                             ImageLabels::Read(options.labels, options.label_column, found, options.temp_dir));
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
                                                        "in no class folder: " + FolderNames(loose)) +
                              (walk.undecoded.empty() ? "" : "; " + UndecodedNote(walk.undecoded)));
    }
    const std::string unlabelled = split.labels.empty() ? "" : "no row of " + split.labels + " names it";
    source.splits.push_back(std::make_unique<ImageSplit>(name, dir, std::move(items), bytes, transform, unlabelled));
  }
  for (std::string& note : notes) source.info.notes.push_back(std::move(note));
  source.info.options["layout"] = layout == FolderLayout::kSplits ? "splits" : "classes";
  for (auto& [path, input] : walk.inputs) source.info.inputs.push_back(std::move(input));
  NoteWalk(&walk, &source.info.notes);
  NoteDecodedImages(&source, transform);
  return source;
}

}  // namespace granary
