#include "trainer/models/script.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <map>
#include <sstream>

#include "base/file.h"
#include "trainer/models/model_card.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

namespace nn = torch::nn;

std::string FirstLine(std::string text) {
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

std::string IntList(const at::IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::string Real(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  std::string s = out.str();
  return s.find_first_of(".e") == std::string::npos ? s + ".0" : s;
}

// The forward of the library layers the built-in models use, in TorchScript,
// computing what LibTorch's C++ modules compute; "" for other modules.
std::string LayerForward(const nn::Module& m) {
  if (dynamic_cast<const nn::LinearImpl*>(&m) != nullptr) {
    // aten::linear, as Python's nn.Linear calls it: the op the INT8 passes match.
    return "def forward(self, x):\n    return torch.linear(x, self.weight, self.bias)\n";
  }
  if (const auto* conv = dynamic_cast<const nn::Conv2dImpl*>(&m)) {
    const auto& o = conv->options;
    const auto* padding = c10::get_if<torch::ExpandingArray<2>>(&o.padding());
    if (padding == nullptr || o.padding_mode().index() != 0) return "";  // only explicit zero padding
    return "def forward(self, x):\n    return torch.conv2d(x, self.weight, self.bias, " + IntList(*o.stride()) + ", " +
           IntList(**padding) + ", " + IntList(*o.dilation()) + ", " + std::to_string(o.groups()) + ")\n";
  }
  if (const auto* bn = dynamic_cast<const nn::BatchNorm2dImpl*>(&m)) {
    const auto& o = bn->options;
    if (!o.affine() || !o.track_running_stats() || !o.momentum().has_value()) return "";
    return "def forward(self, x):\n    return torch.batch_norm(x, self.weight, self.bias, self.running_mean, "
           "self.running_var, self.training, " +
           Real(*o.momentum()) + ", " + Real(o.eps()) + ", False)\n";
  }
  if (const auto* drop = dynamic_cast<const nn::DropoutImpl*>(&m)) {
    return "def forward(self, x):\n    return torch.dropout(x, " + Real(drop->options.p()) + ", self.training)\n";
  }
  return "";
}

// "torch::nn::Conv2dImpl" -> "__torch__.granary.m3.Conv2d": a class name
// unique in the unit that ends as Python's does (".Conv2d", ".BatchNorm2d"),
// which is what LibTorch's conv-BatchNorm folding matches.
std::string ClassName(const nn::Module& m, int* counter) {
  std::string name = m.name();
  if (auto colon = name.rfind(':'); colon != std::string::npos) name = name.substr(colon + 1);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0) name.resize(name.size() - 4);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return "__torch__.granary.m" + std::to_string((*counter)++) + "." + name;
}

// Layers whose forward reads self.bias get one even without a bias: None,
// typed Optional[Tensor] and marked a parameter, as in a scripted nn.Conv2d.
bool ReadsBias(const nn::Module& m) {
  return dynamic_cast<const nn::LinearImpl*>(&m) != nullptr || dynamic_cast<const nn::Conv2dImpl*>(&m) != nullptr;
}

StatusOr<torch::jit::Module> Export(const nn::Module& m, const std::shared_ptr<torch::jit::CompilationUnit>& unit,
                                    const std::string& path, int* counter) {
  std::string source = LayerForward(m);
  if (const auto* scriptable = dynamic_cast<const Scriptable*>(&m)) source = scriptable->TorchScriptForward();
  if (source.empty()) {
    return Status::InvalidArgument("--save: module " + path + " (" + m.name() + ") cannot be written as TorchScript");
  }
  torch::jit::Module out(c10::QualifiedName(ClassName(m, counter)), unit);
  out.register_attribute("training", c10::BoolType::get(), false);
  for (const auto& p : m.named_parameters(/*recurse=*/false)) {
    out.register_parameter(p.key(), p.value().detach().contiguous().clone(), /*is_buffer=*/false);
  }
  if (ReadsBias(m) && !out.hasattr("bias")) {
    out.register_attribute("bias", c10::OptionalType::create(c10::TensorType::get()), c10::IValue(), /*is_param=*/true);
  }
  for (const auto& b : m.named_buffers(/*recurse=*/false)) {
    out.register_buffer(b.key(), b.value().detach().contiguous().clone());
  }
  for (const auto& child : m.named_children()) {
    GRANARY_ASSIGN_OR_RETURN(torch::jit::Module sub, Export(*child.value(), unit, path + "." + child.key(), counter));
    out.register_module(child.key(), sub);
  }
  out.define(source);
  return out;
}

// The submodule of `module` at dotted `path` ("layer4.1" of "layer4.1.conv1").
torch::jit::Module Submodule(torch::jit::Module module, const std::string& path) {
  std::string::size_type start = 0;
  while (start < path.size()) {
    const std::string::size_type dot = std::min(path.find('.', start), path.size());
    module = module.attr(path.substr(start, dot - start)).toModule();
    start = dot + 1;
  }
  return module;
}

}  // namespace

StatusOr<std::string> ReplaceHead(torch::jit::Module& module, int64_t outputs) {
  const std::string head = HeadWeight(module);
  if (head.empty()) {
    return Status::InvalidArgument("--new-head: the model has no linear layer (a 2-dim weight) to replace");
  }
  const std::string::size_type dot = head.rfind('.');
  const std::string owner_path = dot == std::string::npos ? "" : head.substr(0, dot);
  torch::jit::Module owner = owner_path.empty() ? module : Submodule(module, owner_path);
  const torch::Tensor old = owner.attr("weight").toTensor();
  const int64_t inputs = old.size(1);
  // As torch.nn.Linear initialises itself: weight and bias uniform in +-1/sqrt(inputs).
  const double bound = 1.0 / std::sqrt(static_cast<double>(inputs));
  torch::NoGradGuard no_grad;
  const auto like = torch::TensorOptions().dtype(old.dtype());
  owner.register_parameter("weight", torch::empty({outputs, inputs}, like).uniform_(-bound, bound)
                                         .set_requires_grad(old.requires_grad()), false);
  if (owner.hasattr("bias") && owner.attr("bias").isTensor()) {
    const torch::Tensor bias = owner.attr("bias").toTensor();
    owner.register_parameter("bias", torch::empty({outputs}, like).uniform_(-bound, bound)
                                         .set_requires_grad(bias.requires_grad()), false);
  }
  const std::string name = owner_path.empty() ? "the module's own" : "'" + owner_path + "'";
  return "its last linear layer, " + name + " (" + std::to_string(old.size(0)) + " outputs), replaced by one of " +
         std::to_string(outputs) + ", initialised at random";
}

std::string HeadWeight(const torch::jit::Module& module) {
  std::string head;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    const std::string::size_type dot = p.name.rfind('.');
    const std::string leaf = dot == std::string::npos ? p.name : p.name.substr(dot + 1);
    if (leaf == "weight" && p.value.dim() == 2) head = p.name;
  }
  return head;
}

StatusOr<std::string> FreezeAllButHead(torch::jit::Module& module,
                                       std::vector<std::pair<std::string, bool>>* before) {
  const std::string head = HeadWeight(module);
  if (head.empty()) return Status::InvalidArgument("--freeze: the model has no linear layer (a 2-dim weight) to train");
  const std::string owner = head.substr(0, head.size() - std::string("weight").size());  // "fc." or ""
  int64_t kept = 0, trained = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    const bool in_head = p.name == head || p.name == owner + "bias";
    before->emplace_back(p.name, p.value.requires_grad());
    p.value.requires_grad_(in_head);
    (in_head ? trained : kept) += p.value.numel();
  }
  const std::string name = owner.empty() ? "the module's own" : "'" + owner.substr(0, owner.size() - 1) + "'";
  return "all but its last linear layer, " + name + ", frozen: " + std::to_string(trained) + " of " +
         std::to_string(trained + kept) + " parameters train";
}

std::string NewHeadAdvice(int64_t classes) {
  return "to fine-tune it on the db's classes, --new-head replaces its last linear layer with one of " +
         std::to_string(classes) + " outputs";
}

ScriptModel::ScriptModel(torch::jit::Module module, ScriptChanges changes)
    : module_(std::move(module)), changes_(std::move(changes)) {
  // The script module's own tensors, under names nn::Module accepts: the
  // optimizer, the sync and channels-last then act on what forward uses. A
  // module none of whose parameters requires grad is an exported one (--save
  // writes them so, as inference files are): all its floating-point ones train.
  bool frozen = true;
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) frozen = frozen && !p.value.requires_grad();
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
    std::string name = p.name;
    std::replace(name.begin(), name.end(), '.', '_');
    register_parameter(name, p.value, frozen ? p.value.is_floating_point() : p.value.requires_grad());
  }
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
    std::string name = b.name;
    std::replace(name.begin(), name.end(), '.', '_');
    register_buffer(name, b.value);
  }
  train(true);
}

torch::Tensor ScriptModel::forward(torch::Tensor x) { return module_.forward({std::move(x)}).toTensor(); }

void ScriptModel::train(bool on) {
  Classifier::train(on);
  module_.train(on && changes_.frozen.empty());
}

Status CheckModelFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Status::InvalidArgument("--model " + path + ": no such file (a TorchScript module saved from Python)");
    }
    return Status::IOError(path, "--model", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("--model " + path + ": is " + FileTypeName(st.st_mode) +
                                   ", not a TorchScript file");
  }
  return Status::OK();
}

StatusOr<std::shared_ptr<Classifier>> LoadScriptModel(const ModelSpec& spec) {
  GRANARY_RETURN_IF_ERROR(CheckModelFile(spec.name));
  try {
    torch::jit::Module module = torch::jit::load(spec.name);
    if (!module.find_method("forward")) {
      return Status::InvalidArgument("--model " + spec.name + ": the TorchScript module has no forward method");
    }
    ScriptChanges changes;
    if (spec.new_head) {
      StatusOr<std::string> replaced = ReplaceHead(module, spec.classes);
      if (!replaced.ok()) return replaced.status().WithContext("--model " + spec.name);
      changes.new_head = replaced.value();
    }
    if (spec.freeze) {
      StatusOr<std::string> froze = FreezeAllButHead(module, &changes.requires_grad_before);
      if (!froze.ok()) return froze.status().WithContext("--model " + spec.name);
      changes.frozen = froze.value();
    }
    return std::shared_ptr<Classifier>(std::make_shared<ScriptModel>(std::move(module), std::move(changes)));
  } catch (const std::exception& e) {
    return Status::InvalidArgument("--model " + spec.name + ": not a TorchScript module that LibTorch can load (" +
                                   FirstLine(e.what()) + ")");
  }
}

StatusOr<torch::jit::Module> ToTorchScript(const Classifier& model) {
  if (const auto* script = dynamic_cast<const ScriptModel*>(&model)) {
    torch::NoGradGuard no_grad;  // the copy's tensors are leaves, whose requires_grad may be set
    torch::jit::Module copy = script->module().deepcopy();
    copy.eval();
    // Each parameter's requires_grad as the module has it, or as the file had
    // it before --freeze: a later run of the copy trains what the file's own
    // parameters say.
    std::map<std::string, bool> trains;
    for (const auto& p : script->module().named_parameters(/*recurse=*/true)) trains[p.name] = p.value.requires_grad();
    for (const auto& [name, was] : script->changes().requires_grad_before) trains[name] = was;
    for (const auto& p : copy.named_parameters(/*recurse=*/true)) p.value.requires_grad_(trains[p.name]);
    return copy;
  }
  StatusOr<torch::jit::Module> out = Status::FailedPrecondition("not exported");
  GRANARY_RETURN_IF_ERROR(CatchTorch("--save", [&] {
    int counter = 0;
    out = Export(model, std::make_shared<torch::jit::CompilationUnit>(), "model", &counter);
  }));
  if (out.ok()) out->eval();
  return out;
}

Status SaveTorchScript(const Classifier& model, const std::string& path, const std::string& card_json) {
  GRANARY_ASSIGN_OR_RETURN(torch::jit::Module module, ToTorchScript(model));
  std::ostringstream bytes;
  GRANARY_RETURN_IF_ERROR(CatchTorch("--save", [&] { module.save(bytes, {{kModelCardName, card_json}}); }));
  return WriteFileAtomically(path, bytes.str()).WithContext("--save " + path);
}

}  // namespace granary
