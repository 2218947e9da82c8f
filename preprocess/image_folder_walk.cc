#include "preprocess/image_folder_walk.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <tuple>

#include "preprocess/folder_layout.h"
#include "preprocess/progress.h"

namespace granary {

namespace fs = std::filesystem;

bool Identify(const fs::path& p, struct stat* st) { return ::stat(p.c_str(), st) == 0; }

Status ListImagesBelow(const fs::path& dir, const fs::path& raw, Walk* walk, std::vector<std::string>* found,
                       uint64_t* bytes) {
  std::vector<fs::path> pending = {dir};
  while (!pending.empty()) {
    const fs::path current = std::move(pending.back());
    pending.pop_back();
    std::vector<fs::path> entries;
    std::error_code ec;
    for (fs::directory_iterator it(current, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
    if (ec.value() == EACCES) {
      return Status::FailedPrecondition(current.string() + ": this user may not list it (Permission denied): make it "
                                        "readable (chmod -R a+rX " + current.string() +
                                        "), or move it out of RAW: prep reads every folder below a class's");
    }
    if (ec) return Status::IOError(current.string(), "list", ec.value());
    std::sort(entries.begin(), entries.end());
    // Every entry's stat first, on every core: a folder of many images
    // costs a syscall each, most of what listing it (and so saying a db is
    // up to date) takes.
    std::vector<struct stat> stats(entries.size());
    std::vector<char> exists(entries.size());
    tbb::parallel_for(tbb::blocked_range<size_t>(0, entries.size(), 256), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t k = r.begin(); k != r.end(); ++k) exists[k] = Identify(entries[k], &stats[k]);
      if (walk->progress != nullptr) walk->progress->Add(r.size(), 0);
    });
    for (size_t k = entries.size(); k-- > 0;) {  // reversed: the stack pops them in order
      const fs::path& e = entries[k];
      const std::string rel = e.lexically_relative(raw).string();
      if (IsHiddenOrSystem(e.filename().string())) {
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

std::string NoteListing(const std::string& what, const std::vector<std::string>& names) {
  std::string note = what + ":";
  for (size_t i = 0; i < names.size() && i < 5; ++i) note += " " + names[i];
  if (names.size() > 5) note += " ...";
  return note;
}

std::string UndecodedNote(const std::vector<std::string>& undecoded) {
  return NoteListing("left out " + std::to_string(undecoded.size()) + " image(s) of a format prep does not decode",
                     undecoded) +
         " (prep reads JPEG, PNG and WebP: convert them, or write the folder with "
         "granary.write(torchvision.datasets.ImageFolder(...)), which reads what PIL reads)";
}

void NoteWalk(Walk* walk, std::vector<std::string>* notes) {
  std::sort(walk->ignored.begin(), walk->ignored.end());
  std::sort(walk->undecoded.begin(), walk->undecoded.end());
  std::sort(walk->hidden.begin(), walk->hidden.end());
  const std::pair<const std::vector<std::string>*, std::pair<const char*, const char*>> kinds[] = {
      {&walk->ignored, {"ignored ", " file(s) without a .jpg/.jpeg/.png/.webp extension"}},
      {&walk->hidden, {"skipped ", " hidden or system file(s) or folder(s) (a name starting with '.', "
                                      "lost+found, __MACOSX, @eaDir)"}},
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

}  // namespace granary
