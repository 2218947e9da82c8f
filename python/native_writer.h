// granary._native.Writer (native_writer.cc), defined on the module by native.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace granary {

void DefineWriter(pybind11::module_& m);

}  // namespace granary
