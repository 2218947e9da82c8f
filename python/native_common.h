// What granary._native's parts share (native.cc: the reader and loader;
// native_writer.cc: the writer): failed Statuses on their way to Python,
// and bytes as Python's str for them.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace granary {

namespace py = pybind11;

// A failed Status on its way to Python, where it becomes the granary.errors
// class for its code with the same one-line message the C++ tools print.
struct StatusError {
  Status status;
  const char* python_class = nullptr;  // instead of the code's class (native.cc's ErrorClassName)
};

// `bytes` (a path, a name, a message naming a path) as Python's str for
// it: the filesystem encoding with surrogateescape, as os.fsdecode does, so
// a name that is not UTF-8 round-trips instead of raising UnicodeDecodeError.
inline py::str OsStr(const std::string& bytes) {
  PyObject* s = PyUnicode_DecodeFSDefaultAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size()));
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

inline py::list OsStrs(const std::vector<std::string>& items) {
  py::list out;
  for (const std::string& item : items) out.append(OsStr(item));
  return out;
}

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}

template <typename T>
T ValueOrThrow(StatusOr<T> s) {
  ThrowIfError(s.status());
  return std::move(s).value();
}

}  // namespace granary
