// Package::info(): what the Python API needs to know about a package without re-parsing YAML: which
// inputs the spec takes (the same rules as Validation.h), its fixed scale and normalisation, dims,
// dtypes, io flags and kernels. Values are plain Python types (str, bool, int, float, list).
#pragma once

#include <pybind11/pybind11.h>

#include "dgps/runtime/Package.h"

namespace dgps::python {

pybind11::dict describePackage(const Package& package);

}  // namespace dgps::python
