// NumPy's files given to prep for a dataset: named, with the granary.write
// call that writes them, its arrays paired by their names.
#include "preprocess/numpy_files.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

std::string Le(uint64_t value, int width) {
  std::string bytes;
  for (int i = 0; i < width; ++i) bytes += static_cast<char>(value >> (8 * i) & 0xFF);
  return bytes;
}

// A zip as Python's zipfile ends one: entries' data (here filler), their central directory, with ZIP64's
// record and locator where `zip64`, and the end record.
std::string Zip(const std::vector<std::string>& names, bool zip64 = false) {
  std::string directory;
  for (const std::string& name : names) {
    directory += "PK\x01\x02" + std::string(24, '\0') + Le(name.size(), 2) + Le(0, 2) + Le(0, 2) +
                 std::string(12, '\0') + name;
  }
  const std::string data(1000, 'd');
  std::string end = zip64 ? "PK\x06\x06" + std::string(52, '\0') + "PK\x06\x07" + std::string(16, '\0') : "";
  end += "PK\x05\x06" + std::string(8, '\0') + Le(directory.size(), 4) + Le(data.size(), 4) + Le(0, 2);
  return data + directory + end;
}

std::vector<NamedArray> Arrays(const std::vector<std::string>& names) {
  std::vector<NamedArray> arrays;
  for (const std::string& name : names) arrays.push_back({name, "d['" + name + "']"});
  return arrays;
}

TEST(NumpyFiles, AnArraysHeaderIsNamedWithItsDtypeAndShape) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100, 8), }";
  const std::string npy = std::string("\x93NUMPY\x01\x00", 8) + Le(header.size(), 2) + header;
  EXPECT_EQ(NumpyArrayFacts(npy), "a NumPy array (dtype '<f4', shape (100, 8))");
  EXPECT_EQ(NumpyArrayFacts(npy.substr(0, 12)), "a NumPy array (.npy)");  // cut short: named without its facts
  EXPECT_EQ(NumpyArrayFacts("label,a\n1,2\n"), "");
}

TEST(NumpyFiles, AnArchivesArraysAreReadFromItsCentralDirectory) {
  TempDir dir;
  testing::WriteFile(dir.Sub("mnist.npz"), Zip({"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"}));
  EXPECT_EQ(NumpyArchiveArrays(dir.Sub("mnist.npz")),
            (std::vector<std::string>{"x_train", "y_train", "x_test", "y_test"}));
  testing::WriteFile(dir.Sub("big.npz"), Zip({"X.npy", "y.npy"}, /*zip64=*/true));
  EXPECT_EQ(NumpyArchiveArrays(dir.Sub("big.npz")), (std::vector<std::string>{"X", "y"}));
  testing::WriteFile(dir.Sub("images.zip"), Zip({"cat/1.jpg"}));  // a zip of something else
  EXPECT_TRUE(NumpyArchiveArrays(dir.Sub("images.zip")).empty());
  const std::string whole = Zip({"X.npy"});
  testing::WriteFile(dir.Sub("cut.npz"), whole.substr(0, whole.size() - 30));  // no end record
  EXPECT_TRUE(NumpyArchiveArrays(dir.Sub("cut.npz")).empty());
  // An end record whose directory size points before the file's start, or at bytes that are no entry.
  testing::WriteFile(dir.Sub("lies.npz"), "PK\x05\x06" + std::string(8, '\0') + Le(1 << 30, 4) + Le(0, 6));
  EXPECT_TRUE(NumpyArchiveArrays(dir.Sub("lies.npz")).empty());
  testing::WriteFile(dir.Sub("odd.npz"), std::string(60, 'x') + "PK\x05\x06" + std::string(8, '\0') + Le(50, 4) +
                                             Le(0, 6));
  EXPECT_TRUE(NumpyArchiveArrays(dir.Sub("odd.npz")).empty());
  EXPECT_TRUE(NumpyArchiveArrays(dir.Sub("absent.npz")).empty());
}

TEST(NumpyFiles, FeaturesAndLabelsArePairedBySplitAsTheirNamesSay) {
  EXPECT_EQ(WriteArraysCall(Arrays({"x_train", "y_train", "x_test", "y_test"}), "db"),
            "granary.write('db', {'train': zip(d['x_train'], d['y_train']), 'test': zip(d['x_test'], d['y_test'])})");
  EXPECT_EQ(WriteArraysCall(Arrays({"X", "y"}), "out"), "granary.write('out', zip(d['X'], d['y']))");
  EXPECT_EQ(WriteArraysCall(Arrays({"testX", "testy", "trainX", "trainy"}), "db"),
            "granary.write('db', {'train': zip(d['trainX'], d['trainy']), 'test': zip(d['testX'], d['testy'])})");
  EXPECT_EQ(WriteArraysCall(Arrays({"train_images", "train_labels", "validation-images", "validation-labels"}), "db"),
            "granary.write('db', {'train': zip(d['train_images'], d['train_labels']), "
            "'val': zip(d['validation-images'], d['validation-labels'])})");
  EXPECT_EQ(WriteArraysCall(Arrays({"data", "target", "feature_names"}), "db"),
            "granary.write('db', zip(d['data'], d['target']))");  // a name with other words is neither
  // Kaggle's unlabelled test set is left out; what cannot be told apart gives no call.
  EXPECT_EQ(WriteArraysCall(Arrays({"X_train", "y_train", "X_test"}), "db"),
            "granary.write('db', {'train': zip(d['X_train'], d['y_train'])})");
  EXPECT_EQ(WriteArraysCall(Arrays({"X", "images", "y"}), "db"), "");
  EXPECT_EQ(WriteArraysCall(Arrays({"X", "y", "x_test", "y_test"}), "db"), "");
  EXPECT_EQ(WriteArraysCall(Arrays({"weights", "bias"}), "db"), "");
  EXPECT_EQ(PythonString("it's a\\b\n"), "'it\\'s a\\\\b\\n'");
}

TEST(NumpyFiles, PrepsRefusalOfAFolderOfArraysWritesThemAll) {
  TempDir dir;
  const std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 28, 28), }";
  testing::WriteFile(dir.Sub("X_train.npy"), std::string("\x93NUMPY\x01\x00", 8) + Le(header.size(), 2) + header);
  testing::WriteFile(dir.Sub("y_train.npy"), std::string("\x93NUMPY\x01\x00", 8));
  const std::string call = "granary.write('my db', {'train': zip(np.load('" + dir.Sub("X_train.npy") +
                           "'), np.load('" + dir.Sub("y_train.npy") + "'))})";
  EXPECT_EQ(NumpyAdvice(dir.path(), "my db"),
            dir.path() + ": holds NumPy arrays (X_train.npy, y_train.npy): prep reads CSV tables, IDX files and image "
                         "folders, not arrays; write them from Python: import numpy as np, granary; " + call);
  EXPECT_EQ(NumpyAdvice(dir.Sub("X_train.npy"), "my db"),
            dir.Sub("X_train.npy") + ": is a NumPy array (dtype '|u1', shape (3, 28, 28)): prep reads CSV tables, "
                                     "IDX files and image folders, not arrays; write them from Python: import numpy "
                                     "as np, granary; " + call);
  testing::WriteFile(dir.Sub("train.jsonl"), "{}\n");  // another table beside them: the folder's refusal names both
  EXPECT_EQ(NumpyAdvice(dir.path(), "db"), "");
  testing::WriteFile(dir.Sub("table.csv"), "a,label\n1,0\n");
  EXPECT_EQ(NumpyAdvice(dir.Sub("table.csv"), "db"), "");
}

}  // namespace
}  // namespace granary
