#include "loader/class_counts.h"

#include "loader/pixels.h"

namespace granary {

StatusOr<std::vector<uint64_t>> ClassCounts(const DbReader& db, const std::string& split, const std::string& label,
                                            int64_t classes, bool skip_corrupt) {
  const int field = db.schema().FieldIndex(label);
  if (field < 0) return Status::InvalidArgument(db.path() + ": no label field '" + label + "'");
  const DType dtype = db.schema().fields[field].dtype;
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<SplitReader> reader, SplitReader::Create(db, split));
  std::vector<uint64_t> counts(static_cast<size_t>(classes));
  for (uint64_t i = 0; i < reader->size(); ++i) {
    const FieldView* fields = nullptr;
    if (Status read = reader->Read(i, &fields); !read.ok()) {
      if (skip_corrupt && read.code() == Status::Code::kCorruption) continue;
      return read.WithContext("counting the classes");
    }
    const int64_t c = ScalarAs<int64_t>(dtype, fields[field].data);
    if (c < 0 || c >= classes) {
      return Status::Corruption(db.path() + ": split '" + split + "', sample " + std::to_string(i) + ": label " +
                                std::to_string(c) + " outside the db's " + std::to_string(classes) + " classes");
    }
    ++counts[static_cast<size_t>(c)];
  }
  return counts;
}

std::vector<float> BalancedWeights(const std::vector<uint64_t>& counts) {
  double samples = 0, present = 0;
  for (uint64_t n : counts) {
    samples += static_cast<double>(n);
    present += n > 0 ? 1 : 0;
  }
  std::vector<float> weights;
  for (uint64_t n : counts) {
    weights.push_back(n == 0 ? 0.0f : static_cast<float>(samples / (present * static_cast<double>(n))));
  }
  return weights;
}

}  // namespace granary
