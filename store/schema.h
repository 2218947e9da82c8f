// Schema: the named, typed fields every record of a db holds. Plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

enum class DType : uint8_t { kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat32, kFloat64 };

// Calls f(T{}) with T the C++ type of `dtype` (uint8_t ... double) and
// returns what it returns: the one switch over dtypes.
template <typename F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kUInt8: return f(uint8_t{});
    case DType::kInt8: return f(int8_t{});
    case DType::kInt16: return f(int16_t{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: break;
  }
  return f(double{});
}

size_t DTypeBytes(DType dtype);
// float32 or float64: of a label field, a number to predict (regression).
inline bool IsFloatDType(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kFloat64; }
const char* DTypeName(DType dtype);  // "uint8", "float32", ...
StatusOr<DType> ParseDType(const std::string& name);

// A shape is a list of dims; kVariableDim marks a dim that each record states.
using Shape = std::vector<int64_t>;
inline constexpr int64_t kVariableDim = -1;

inline constexpr char kTextLayout[] = "utf-8";

struct FieldSpec {
  std::string name;
  DType dtype = DType::kUInt8;
  Shape shape;  // {} is a scalar
  // What the dims mean: "CHW" or "HWC" for an image field of 3 dims;
  // kTextLayout for a uint8 field of shape [-1] whose bytes are UTF-8 text
  // (granary.write of a Python str, which Python readers give back as str);
  // "" otherwise.
  std::string layout;

  bool HasVariableDims() const;
  bool IsText() const { return layout == kTextLayout; }
  // Elements for a fixed shape; precondition: !HasVariableDims().
  int64_t FixedElements() const;
};

struct Schema {
  std::vector<FieldSpec> fields;

  // Index of the field called `name`, or -1.
  int FieldIndex(const std::string& name) const;
  // Unique non-empty names, known dtypes, dims positive or kVariableDim.
  Status Validate() const;
};

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[1, 28, 28]"

}  // namespace granary
