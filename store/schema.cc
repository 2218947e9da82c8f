#include "store/schema.h"

#include <set>

namespace granary {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t bytes;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kUInt8, "uint8", 1},  {DType::kInt8, "int8", 1},       {DType::kInt16, "int16", 2},
    {DType::kInt32, "int32", 4},  {DType::kInt64, "int64", 8},     {DType::kFloat32, "float32", 4},
    {DType::kFloat64, "float64", 8},
};

}  // namespace

size_t DTypeBytes(DType dtype) { return kDTypes[static_cast<int>(dtype)].bytes; }
const char* DTypeName(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }

StatusOr<DType> ParseDType(const std::string& name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return Status::InvalidArgument("unknown dtype '" + name + "'");
}

bool FieldSpec::HasVariableDims() const {
  for (int64_t d : shape) {
    if (d == kVariableDim) return true;
  }
  return false;
}

int64_t FieldSpec::FixedElements() const { return NumElements(shape); }

int Schema::FieldIndex(const std::string& name) const {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Status Schema::Validate() const {
  if (fields.empty()) return Status::InvalidArgument("schema has no fields");
  if (fields.size() > 0xFFFF) return Status::InvalidArgument("schema has more than 65535 fields");
  std::set<std::string> names;
  for (const FieldSpec& f : fields) {
    if (f.name.empty()) return Status::InvalidArgument("schema field with an empty name");
    if (!names.insert(f.name).second) {
      return Status::InvalidArgument("schema field '" + f.name + "' appears twice");
    }
    if (f.IsText() && !(f.dtype == DType::kUInt8 && f.shape == Shape{kVariableDim})) {
      return Status::InvalidArgument("schema field '" + f.name + "': layout '" + f.layout + "' (text) is for uint8 of "
                                     "shape [-1], not " + DTypeName(f.dtype) + " " + ShapeToString(f.shape));
    }
    if (!f.layout.empty() && !f.IsText() && !((f.layout == "CHW" || f.layout == "HWC") && f.shape.size() == 3)) {
      return Status::InvalidArgument("schema field '" + f.name + "': layout '" + f.layout +
                                     "' needs a 3-dim shape and is CHW or HWC (or utf-8, for text)");
    }
    for (int64_t d : f.shape) {
      if (d <= 0 && d != kVariableDim) {
        return Status::InvalidArgument("schema field '" + f.name + "' has dim " + std::to_string(d));
      }
    }
  }
  return Status::OK();
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace granary
