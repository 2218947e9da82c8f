// NumPy's files (.npy arrays, .npz archives of them) where prep is given
// them for a dataset: named, with the granary.write call that writes them
// (prep reads no array files; Python reads them in one line).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace granary {

// "a NumPy array (dtype '<f4', shape (100, 8))" where `head` (a file's first
// bytes) starts a .npy file; "" otherwise.
std::string NumpyArrayFacts(std::string_view head);

// The names of the arrays a .npz archive at `path` holds (its zip entries,
// each "NAME.npy", found in the zip's central directory), in their order;
// empty where `path` is no zip of .npy entries or cannot be read.
std::vector<std::string> NumpyArchiveArrays(const std::string& path);

// An array as the advice loads it: its name ("x_train") and the Python
// expression that loads it ("d['x_train']", "np.load('raw/x_train.npy')").
struct NamedArray {
  std::string name;
  std::string expression;
};

// The granary.write call that writes `arrays` to `db` as samples of
// (features, label): features and labels paired by their names (x/X,
// features, data, images, inputs with y, labels, targets; the same split
// word, if any: x_train with y_train), a split each:
// "granary.write('db', {'train': zip(A, B), 'test': zip(C, D)})", or
// "granary.write('db', zip(A, B))" for one pair without a split word;
// "" where no pair is named so.
std::string WriteArraysCall(const std::vector<NamedArray>& arrays, const std::string& db);

// `name` in the folder `dir` as the user spelled the folder ("raw/x.npy",
// "x.npy" where `dir` is ""), for the Python a refusal prints.
std::string InFolder(const std::string& dir, const std::string& name);

// `text` as a Python string literal in single quotes ('it\'s').
std::string PythonString(const std::string& text);

// prep's refusal of NumPy files, with the Python that writes them: where
// `raw` is a .npy file (its folder's other .npy files paired with it), a
// .npz archive, or a folder whose only tables are .npy or .npz files; ""
// where it is none of these. `db` is the db being built, named in the call ("db" where
// empty).
std::string NumpyAdvice(const std::string& raw, const std::string& db);

}  // namespace granary
