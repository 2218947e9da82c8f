// granary._native.encode_table (native_table.cc), defined on the module by native.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace granary {

void DefineTable(pybind11::module_& m);

}  // namespace granary
