#include "trainer/models/precision.h"

#include <ATen/autocast_mode.h>

#include <fstream>

namespace granary {
namespace {

// Autocast on for this thread while alive, as Python's torch.autocast("cpu").
class CpuAutocast {
 public:
  CpuAutocast() : was_enabled_(at::autocast::is_cpu_enabled()), was_dtype_(at::autocast::get_autocast_cpu_dtype()) {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuAutocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
  }
  CpuAutocast(const CpuAutocast&) = delete;
  CpuAutocast& operator=(const CpuAutocast&) = delete;

 private:
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

}  // namespace

Precision Precision::Create(const ModelConfig& config) {
  Precision p;
  p.bf16_ = config.precision == ComputeType::kBf16;
  p.channels_last_ = config.channels_last;
  return p;
}

void Precision::Prepare(Classifier& model) const {
  if (!channels_last_) return;
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : model.parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

torch::Tensor Precision::Forward(Classifier& model, const torch::Tensor& input) const {
  if (!bf16_) return model.forward(input);
  CpuAutocast autocast;
  return model.forward(input).to(torch::kFloat32);
}

bool CpuHasNativeBf16() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) {
      return line.find(" avx512_bf16") != std::string::npos || line.find(" amx_bf16") != std::string::npos;
    }
  }
  return false;
}

}  // namespace granary
