// TorchScript in and out. `--model FILE.pt` trains a module saved from Python
// (torch.jit.script or torch.jit.trace) through ScriptModel, which exposes the
// script module's own parameter and buffer tensors, so the loop, the sync and
// the optimizers work on it unchanged. `--save FILE.pt` writes any trained
// model as TorchScript: a loaded module as it is, a built-in one rebuilt as a
// script module of the same structure (the same names, its layers' forward
// written in TorchScript), which `torch.jit.load` runs with the same logits.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>

#include "trainer/models/registry.h"

namespace granary {

// Built-in modules that can be written as TorchScript say how their forward
// reads in TorchScript, over their children and parameters by name.
class Scriptable {
 public:
  virtual ~Scriptable() = default;
  // "def forward(self, x):\n    ...": one method, four-space indent; children
  // are called as self.child.forward(x) (LibTorch's C++ frontend has no __call__).
  virtual std::string TorchScriptForward() const = 0;
};

class ScriptModel : public Classifier {
 public:
  // `new_head`: what ReplaceHead did to `module`, or "".
  explicit ScriptModel(torch::jit::Module module, std::string new_head = "");
  torch::Tensor forward(torch::Tensor x) override;
  void train(bool on = true) override;
  const torch::jit::Module& module() const { return module_; }
  const std::string& new_head() const { return new_head_; }

 private:
  torch::jit::Module module_;
  std::string new_head_;
};

// OK if `path` is a regular file (following links); else InvalidArgument
// saying what it is: no such file, a directory, a character device...
Status CheckModelFile(const std::string& path);

// --new-head: the last linear layer of `module` (its last 2-dim weight, as
// fc is torchvision ResNet's and the head a model train saved) made one of
// `outputs` outputs, initialised as torch.nn.Linear initialises one, so
// that a model trained on other classes is fine-tuned on a db's. Says what
// it replaced; InvalidArgument where the module has no such layer.
StatusOr<std::string> ReplaceHead(torch::jit::Module& module, int64_t outputs);

// What a model file of other classes than a db's `classes` is told: --new-head.
std::string NewHeadAdvice(int64_t classes);

// Loads spec.name as TorchScript (spec.new_head: then ReplaceHead). InvalidArgument naming the file and the
// first line of LibTorch's reason if it does not load or has no forward.
StatusOr<std::shared_ptr<Classifier>> LoadScriptModel(const ModelSpec& spec);

// `model` as a TorchScript module (copies of its tensors, in eval mode).
// InvalidArgument naming the first module that cannot be written.
StatusOr<torch::jit::Module> ToTorchScript(const Classifier& model);

// ToTorchScript with `card_json` (model_card.h) as its extra file
// granary.json, written atomically to `path` (nothing there on failure).
Status SaveTorchScript(const Classifier& model, const std::string& path, const std::string& card_json);

}  // namespace granary
