// Which reading of an image folder a build takes (FolderLayout: RAW's top
// folders as classes, or as train/val/test splits holding class folders),
// decided from the whole folder, and the folder listings it is decided from.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "preprocess/source.h"

namespace granary {

// The split a top folder stands for in the splits layout, by its name in
// any case, '_' and '-' aside: train (training, train_set), val (valid,
// validation), test (testing, test_set); empty if its name is no split's.
// (Kaggle's datasets name them Training/ and Testing/ as often as not.)
std::string SplitOfFolder(const std::string& name);

// The folder among `folders` that stands for split `split` ("train"); ""
// if none does.
std::string FolderOfSplit(const std::vector<std::string>& folders, const std::string& split);

// `text` with its ASCII letters in lower case (bytes beyond ASCII as they are).
std::string AsciiLower(std::string text);

// `p`'s extension in lower case (".jpg" for "a.JPG"); "" if it has none.
std::string LowerExtension(const std::filesystem::path& p);

// Whether `p` names a JPEG, PNG or WebP by its extension (any case).
bool HasImageExtension(const std::filesystem::path& p);

// Whether `p` names an image of a format prep does not decode (BMP, GIF,
// TIFF, PPM/PGM, HEIC, AVIF, JPEG XL), which torchvision's ImageFolder may
// read: such files are named apart from other files a walk leaves out.
bool HasOtherImageExtension(const std::filesystem::path& p);

// Whether `p` names a table or array file of a format prep does not read
// (JSON Lines, JSON, Parquet, Excel, OpenDocument, Feather, HDF5, NumPy,
// pickle), which a folder is named by where it holds no dataset prep reads.
bool HasOtherTableExtension(const std::filesystem::path& p);

// Whether a file or folder named `name` is passed over as no data: hidden
// (".git", macOS's "._x.jpg"), or one a file system, an archiver or an OS
// makes beside the user's files: "lost+found" (at the root of every ext4
// file system, readable by root alone), "__MACOSX" (a zip made on a Mac),
// "@eaDir" (a Synology NAS's thumbnails, in every folder it indexed),
// "$RECYCLE.BIN" and "System Volume Information" (a disk Windows has used).
bool IsHiddenOrSystem(const std::string& name);

// The folders directly in `dir`, sorted by name: hidden and system ones
// (IsHiddenOrSystem) and granary dbs (a db built inside its own raw folder)
// are not classes or splits; they are set aside into *hidden and *dbs when
// given.
std::vector<std::string> SortedSubdirs(const std::filesystem::path& dir, std::vector<std::string>* hidden = nullptr,
                                       std::vector<std::string>* dbs = nullptr);

// The images directly in `dir` (not in its subfolders), sorted.
std::vector<std::string> LooseImages(const std::filesystem::path& dir);

// The class a file name says, as datasets without class folders name their
// images: the name without its extension, then without a trailing number
// and the separators before it ("cat.0.jpg" and "cat.123.jpg": "cat";
// "Abyssinian_100.jpg": "Abyssinian"; "great_pyrenees_12.jpg":
// "great_pyrenees"); only the file name of a path counts. "" for a name that
// is a number alone ("0001.jpg") or ends in no number ("sunset.jpg").
std::string ClassFromName(const std::string& path);

// How RAW's top folders are read, decided from the whole folder unless
// `requested` says: as splits (train/ and val|validation|test/ holding the
// class folders, nothing else beside them) when that reading leaves out no
// image; as classes (each top folder a class, as torchvision's ImageFolder
// reads any folder) when there is no train/, or when reading train/ as a
// split would leave out images (class folders beside it, images loose in
// it). Where both readings take every image but folders without images
// stand beside the splits, or a split holds a class train/ lacks, the folder
// is ambiguous: refused, naming both readings.
// Notes what a user might not expect into *notes.
StatusOr<FolderLayout> ChooseLayout(const std::filesystem::path& raw, const std::vector<std::string>& top,
                                    FolderLayout requested, std::vector<std::string>* notes);

// Where an image folder read as classes has two or more class folders that
// hold the same class folders (a dataset's splits under names prep does
// not read as splits: Intel's seg_train/ and seg_test/, each of the six
// classes; or a level further down, seg_train/seg_train/), what to say of
// it (after "RAW: "), naming them, with the links that name them as
// splits; "" otherwise.
// *refused where a word of one's name says a split (seg_train): the build
// is refused; otherwise (fold1/, fold2/) it is a note. Where the folders
// they share are images/ beside masks/ (COVID/{images,masks}/: the masks
// would be samples of their class), the refusal says that, with the links
// that leave the masks out.
std::string SplitsNamedOtherwise(const std::filesystem::path& raw, const std::vector<std::string>& classes,
                                 bool* refused);

// The folders that hold a split's class folders: RAW itself, or RAW/train
// (and val, validation, test) in the splits layout.
struct SplitRoot {
  std::string name;  // the split
  std::filesystem::path root;
  // The table labelling the images below `root`, where the split has no
  // class folders but a table (TableLabelledSplits); "": class folders.
  std::string labels;
};

// The split folders among `splits` (other than train/) that hold images,
// none of train/'s class folders, and one table directly in them (.csv,
// .tsv, .txt): each folder's name and its table, which labels its images
// (Tiny ImageNet's val/ with val/images/ and val/val_annotations.txt).
// Where there is one, the split folders with images but neither class
// folders nor a table go to *unlabelled (its test/: no labels, left out);
// where there is none, those holding their images directly, in no folder
// (a test set without labels as Kaggle ships one: test/*.jpg beside
// train/<class>/).
std::map<std::string, std::string> TableLabelledSplits(const std::filesystem::path& raw,
                                                       const std::vector<std::string>& splits,
                                                       std::vector<std::string>* unlabelled);

// Notes on what RAW holds that is no class or split: hidden folders, granary
// dbs, and (classes layout) images outside any class folder.
void NoteTopFolders(const std::filesystem::path& raw, const std::vector<std::string>& hidden,
                    const std::vector<std::string>& dbs, FolderLayout layout, std::vector<std::string>* notes);

// The split roots of `layout`, and the classes: train's class folders; a
// class in another split that train lacks is refused.
Status FindSplitRoots(const std::filesystem::path& raw, const std::vector<std::string>& top, FolderLayout layout,
                      std::vector<SplitRoot>* split_roots, std::vector<std::string>* classes);

}  // namespace granary
