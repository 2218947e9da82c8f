#include "trainer/models/quantize.h"

#include <torch/csrc/jit/passes/fold_conv_bn.h>
#include <torch/csrc/jit/passes/quantization/finalize.h>
#include <torch/csrc/jit/passes/quantization/insert_observers.h>
#include <torch/csrc/jit/passes/quantization/insert_quant_dequant.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "trainer/models/model_card.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// The observers InsertObservers copies in front of each value to quantize,
// written in TorchScript as Python's are scripted by quantize_jit. The passes
// read `dtype`, `qscheme` (and `ch_axis`) and call calculate_qparams().
//
// Activations: per tensor, affine quint8 over [min, max] (widened to hold 0).
constexpr const char* kActivationObserver = R"(
def forward(self, x):
    if x.numel() > 0:
        y = x.detach().float()
        self.min_val = torch.minimum(torch.min(y), self.min_val)
        self.max_val = torch.maximum(torch.max(y), self.max_val)
    return x

def calculate_qparams(self):
    if bool(self.min_val > self.max_val):
        return torch.ones([1]), torch.zeros([1]).long()
    lo = torch.clamp(self.min_val, max=0.0)
    hi = torch.clamp(self.max_val, min=0.0)
    scale = torch.clamp((hi - lo) / 255.0, min=1.1920928955078125e-07)
    zero_point = torch.clamp(torch.round(-lo / scale), 0, 255).long()
    return scale.reshape([1]), zero_point.reshape([1])
)";

// Weights: per output channel (dimension 0), symmetric qint8.
constexpr const char* kWeightObserver = R"(
def forward(self, x):
    y = torch.flatten(x.detach().float(), 1)
    lo = torch.amin(y, [1])
    hi = torch.amax(y, [1])
    if self.min_val.numel() == 0:
        self.min_val = lo
        self.max_val = hi
    else:
        self.min_val = torch.minimum(lo, self.min_val)
        self.max_val = torch.maximum(hi, self.max_val)
    return x

def calculate_qparams(self):
    bound = torch.maximum(-torch.clamp(self.min_val, max=0.0), torch.clamp(self.max_val, min=0.0))
    scale = torch.clamp(bound / 127.5, min=1.1920928955078125e-07)
    return scale, torch.zeros_like(scale).long()
)";

torch::jit::Module Observer(const std::string& name, const char* source, c10::ScalarType dtype, c10::QScheme qscheme,
                            const torch::Tensor& initial_min, const torch::Tensor& initial_max) {
  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m(c10::QualifiedName("__torch__.granary.quantize." + name), unit);
  m.register_attribute("training", c10::BoolType::get(), false);
  m.register_attribute("dtype", c10::IntType::get(), static_cast<int64_t>(dtype));
  m.register_attribute("qscheme", c10::IntType::get(), static_cast<int64_t>(qscheme));
  m.register_attribute("ch_axis", c10::IntType::get(), int64_t{0});
  m.register_buffer("min_val", initial_min);
  m.register_buffer("max_val", initial_max);
  m.define(source);
  return m;
}

torch::jit::QConfigDict Int8QConfig() {
  const float inf = std::numeric_limits<float>::infinity();
  torch::jit::Module activation = Observer("ActivationObserver", kActivationObserver, c10::kQUInt8,
                                           c10::kPerTensorAffine, torch::tensor(inf), torch::tensor(-inf));
  torch::jit::Module weight = Observer("WeightObserver", kWeightObserver, c10::kQInt8, c10::kPerChannelSymmetric,
                                       torch::empty({0}), torch::empty({0}));
  return {{"", std::make_tuple(activation, weight)}};
}

bool IsQuantizedLayer(const torch::jit::Node* node) {
  const std::string kind = node->kind().toQualString();
  return kind.rfind("quantized::", 0) == 0 &&
         (kind.find("conv") != std::string::npos || kind.find("linear") != std::string::npos);
}

// The ops that hold a layer's weight (what a layer computes, whatever its
// module): the ones worth quantizing.
bool IsWeightedOp(const torch::jit::Node* node) {
  static const char* kOps[] = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution",
                               "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
                               "aten::linear", "aten::matmul", "aten::mm", "aten::addmm", "aten::bmm",
                               "aten::einsum", "aten::embedding", "aten::embedding_bag", "aten::lstm",
                               "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::bilinear"};
  const std::string kind = node->kind().toQualString();
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return kind == op; });
}

// The float weight a weighted op reads: a frozen constant of 2 or more
// dimensions; nullptr if none.
const torch::jit::Value* FloatWeight(const torch::jit::Node* node) {
  if (!IsWeightedOp(node)) return nullptr;
  for (const torch::jit::Value* input : node->inputs()) {
    if (input->node()->kind() != c10::prim::Constant) continue;
    const c10::optional<c10::IValue> value = torch::jit::toIValue(input);
    if (!value || !value->isTensor()) continue;
    const torch::Tensor& t = value->toTensor();
    if (t.dim() >= 2 && t.is_floating_point()) return input;
  }
  return nullptr;
}

std::string WhereInCode(const torch::jit::Node* node) {
  const auto file_line = node->sourceRange().file_line_col();
  if (!file_line) return "";
  const std::string& file = std::get<0>(*file_line);
  return " at " + (file.empty() ? std::string("line") : file + ":") + std::to_string(std::get<1>(*file_line));
}

std::string WhyFp32(const torch::jit::Node* node) {
  static const char* kQuantizable[] = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::linear"};
  const std::string kind = node->kind().toQualString();
  for (const char* k : kQuantizable) {
    if (kind == k) return "its input was not quantized there (control flow, or a producer the passes cannot quantize)";
  }
  return "the graph-mode passes have no INT8 pattern for " + kind + " (they quantize conv and linear)";
}

void CountLayers(torch::jit::Block* block, Int8Model* out) {
  for (torch::jit::Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) CountLayers(sub, out);
    if (IsQuantizedLayer(node)) {
      ++out->int8_layers;
    } else if (const torch::jit::Value* weight = FloatWeight(node); weight != nullptr) {
      std::string name = weight->debugName();
      if (name.rfind("self.", 0) == 0) name.erase(0, 5);
      out->fp32_layers.push_back(name + " (" + node->kind().toQualString() + WhereInCode(node) +
                                 "): " + WhyFp32(node));
    }
  }
}

}  // namespace

StatusOr<std::string> UseInt8Engine() {
  const std::vector<at::QEngine>& engines = at::globalContext().supportedQEngines();
  for (at::QEngine engine : {at::QEngine::ONEDNN, at::QEngine::QNNPACK}) {
    if (std::find(engines.begin(), engines.end(), engine) != engines.end()) {
      at::globalContext().setQEngine(engine);
      std::string name = c10::toString(engine);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      return name;
    }
  }
  return Status::FailedPrecondition("--quantize int8: this LibTorch has no quantized engine (onednn or qnnpack)");
}

StatusOr<Int8Model> QuantizeInt8(const torch::jit::Module& fp32, const CalibrationBatches& next,
                                 const std::string& what) {
  GRANARY_ASSIGN_OR_RETURN(std::string engine, UseInt8Engine());
  torch::jit::Module observed;
  GRANARY_RETURN_IF_ERROR(CatchTorch("--quantize int8: observing", [&] {
    torch::jit::Module model = fp32.clone();
    model.eval();
    model = torch::jit::FoldConvBatchNorm(model);
    observed = torch::jit::InsertObservers(model, "forward", Int8QConfig(), /*inplace=*/true);
  }));
  torch::NoGradGuard no_grad;
  for (;;) {
    torch::Tensor batch;
    GRANARY_ASSIGN_OR_RETURN(bool more, next(&batch));
    if (!more) break;
    GRANARY_RETURN_IF_ERROR(CatchTorch("--quantize int8: calibration", [&] { observed.forward({batch}); }));
  }
  Int8Model out;
  GRANARY_RETURN_IF_ERROR(CatchTorch("--quantize int8: quantizing", [&] {
    torch::jit::Module quantized = torch::jit::InsertQuantDeQuant(observed, "forward", /*inplace=*/true,
                                                                  /*debug=*/false);
    out.module = torch::jit::Finalize(quantized);
    out.module.eval();
  }));
  CountLayers(out.module.get_method("forward").graph()->block(), &out);
  if (out.int8_layers == 0) {
    return Status::InvalidArgument("--quantize int8: " + what +
                                   " has no layer LibTorch's graph-mode passes quantize (conv and linear)" +
                                   (out.fp32_layers.empty() ? "" : "; " + out.fp32_layers.front()));
  }
  return out;
}

int CountInt8Layers(const torch::jit::Module& module) {
  Int8Model counted;
  CountLayers(module.get_method("forward").graph()->block(), &counted);
  return counted.int8_layers;
}

StatusOr<std::string> TorchScriptBytes(const torch::jit::Module& module, const std::string& what,
                                       const std::string& card_json) {
  std::ostringstream bytes;
  GRANARY_RETURN_IF_ERROR(CatchTorch(what.c_str(), [&] { module.save(bytes, {{kModelCardName, card_json}}); }));
  return bytes.str();
}

}  // namespace granary
