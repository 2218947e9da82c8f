// Walking an image folder: each directory listed once and each image taken
// once, however links reach them, with what was left out noted.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "preprocess/source.h"

namespace granary {

class ProgressLine;

// Kept for every image for the whole build, so it stays small: the path
// relative to RAW (also how the image is named in messages) and the label.
struct ImageItem {
  std::string name;
  int64_t label = 0;
};

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
  ProgressLine* progress = nullptr;           // counts each entry examined, where set

  void StartSplit(const std::string& name) {
    split = name;
    dirs = roots;
    files.clear();
  }
};

// stat(2) of `p` into *st; false where it fails (a dangling link, a file gone).
bool Identify(const std::filesystem::path& p, struct stat* st);

// Lists the images below `dir` (following directory links) into *found,
// named relative to `raw`, and adds their bytes to *bytes.
Status ListImagesBelow(const std::filesystem::path& dir, const std::filesystem::path& raw, Walk* walk,
                       std::vector<std::string>* found, uint64_t* bytes);

// Lists the images under root/<class>/ for each class in `classes`, in class
// then path order. The class folders are walked in the order of their real
// paths, a link after the folder it names: an image reached through links
// belongs to the class folder that holds it, and a class folder that is a
// link to another class's folder (an alias) is skipped, named in the walk.
Status ListImages(const std::filesystem::path& root, const std::filesystem::path& raw,
                  const std::vector<std::string>& classes, Walk* walk, std::vector<ImageItem>* items,
                  uint64_t* bytes);

// "<what>: a b c ..." naming the first few of `names`, for a note.
std::string NoteListing(const std::string& what, const std::vector<std::string>& names);

// The images a walk left out for their format, named, with what to do.
std::string UndecodedNote(const std::vector<std::string>& undecoded);

// A note for each kind of file or folder the walk left out, or took in two splits.
void NoteWalk(Walk* walk, std::vector<std::string>* notes);

}  // namespace granary
