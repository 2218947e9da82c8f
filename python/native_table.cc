#include "python/native_table.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>

#include "preprocess/encode_table.h"
#include "python/native_common.h"

namespace granary {

void DefineTable(py::module_& m) {
  // A CSV file's rows as the features of a model whose card names them
  // (granary.load_table): (features N x F float32, header, rows' fields,
  // {column: missing values}, {column: values none of its categories}, notes).
  m.def("encode_table", [](const std::string& path, const std::vector<std::string>& names, const std::string& who,
                           const std::string& temp_dir) {
    StatusOr<EncodedTable> encoded = Status::OK();
    {
      py::gil_scoped_release release;
      encoded = EncodeTable(path, names, who, temp_dir);
    }
    EncodedTable table = ValueOrThrow(std::move(encoded));
    py::array_t<float> features({static_cast<py::ssize_t>(table.rows.size()), static_cast<py::ssize_t>(names.size())});
    if (!table.features.empty()) {
      std::memcpy(features.mutable_data(), table.features.data(), table.features.size() * sizeof(float));
    }
    py::list rows;
    for (const std::vector<std::string>& fields : table.rows) rows.append(OsStrs(fields));
    return py::make_tuple(features, OsStrs(table.header), rows, table.missing, table.unseen, OsStrs(table.notes));
  }, py::arg("path"), py::arg("names"), py::arg("who"), py::arg("temp_dir") = "/tmp");
}

}  // namespace granary
