#include "trainer/report/observer.h"

#include <utility>

namespace granary {

void EpochReport::Set(const std::string& name, std::variant<double, uint64_t, std::string> value) {
  for (EpochFigure& f : figures) {
    if (f.name == name) {
      f.value = std::move(value);
      return;
    }
  }
  figures.push_back({name, std::move(value)});
}

const EpochFigure* EpochReport::Find(const std::string& name) const {
  for (const EpochFigure& f : figures) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::optional<double> EpochReport::Number(const std::string& name) const {
  const EpochFigure* f = Find(name);
  if (f == nullptr) return std::nullopt;
  if (const double* d = std::get_if<double>(&f->value)) return *d;
  if (const uint64_t* u = std::get_if<uint64_t>(&f->value)) return static_cast<double>(*u);
  return std::nullopt;
}

}  // namespace granary
