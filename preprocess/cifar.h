// CIFAR-10 and CIFAR-100 in their binary version (the one the CIFAR page
// offers "for C programs"): finding the files of a dataset folder. Pure
// functions; thread-safe.
//
//   cifar-10-batches-bin/  data_batch_1.bin .. data_batch_5.bin, test_batch.bin,
//                          batches.meta.txt (a class name a line)
//       each record: 1 label byte (0..9), then 3,072 pixel bytes: the 32 x 32
//       red plane, the green, the blue, each row-major (CHW)
//   cifar-100-binary/      train.bin, test.bin, fine_label_names.txt,
//                          coarse_label_names.txt
//       each record: 1 coarse label byte (0..19), 1 fine label byte (0..99),
//       then the 3,072 pixel bytes
//
// The Python version (cifar-10-batches-py: pickles, what torchvision
// downloads) is recognised and refused, saying how to build from it.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

inline constexpr int kCifarPixelBytes = 3 * 32 * 32;

struct CifarSplitFiles {
  std::string name;                // "train" or "test"
  std::vector<std::string> paths;  // read one after another
};

struct CifarDataset {
  std::string kind;         // "CIFAR-10" or "CIFAR-100"
  int label_bytes = 1;      // before each record's pixels
  int label_offset = 0;     // of the label used: CIFAR-100's fine label is byte 1, the coarse byte 0
  int num_classes = 10;
  std::string names_path;   // the class names of that label, a line each ("" if the file is not there)
  std::vector<CifarSplitFiles> splits;
  int record_bytes() const { return label_bytes + kCifarPixelBytes; }
};

// True if `dir` looks like a CIFAR folder of either version (its files named
// as CIFAR names them), for format detection.
bool LooksLikeCifar(const std::string& dir);

// The CIFAR dataset in `dir`. `label` picks CIFAR-100's label: "fine" (or
// ""; its 100 classes) or "coarse" (its 20 superclasses); CIFAR-10 has one.
// NotFound naming what is missing (a gap in data_batch_1..5 included);
// InvalidArgument for the Python version (saying how to build from it), a
// --label CIFAR-10 cannot give, or a file that is no whole number of records.
StatusOr<CifarDataset> FindCifarDataset(const std::string& dir, const std::string& label);

// The class names of `names_path`: its lines without surrounding white space,
// blank lines left out. InvalidArgument naming the file unless there are
// exactly `count`.
StatusOr<std::vector<std::string>> ReadCifarClassNames(const std::string& names_path, int count);

}  // namespace granary
