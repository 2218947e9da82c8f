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
#include <vector>

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

// What granary changed of a model file before training it: --new-head's
// head made anew, --freeze's parameters made to keep their values.
struct ScriptChanges {
  std::string new_head;  // what ReplaceHead did, or ""
  std::string frozen;    // what FreezeAllButHead did, or ""
  // Each parameter's requires_grad before FreezeAllButHead changed it, so
  // that a saved copy is the file it was (trained whole in a later run).
  std::vector<std::pair<std::string, bool>> requires_grad_before;
};

class ScriptModel : public Classifier {
 public:
  explicit ScriptModel(torch::jit::Module module, ScriptChanges changes = {});
  torch::Tensor forward(torch::Tensor x) override;
  // With parameters frozen (--freeze), the module stays in eval mode: its
  // BatchNorm statistics and dropout are as they were trained.
  void train(bool on = true) override;
  const torch::jit::Module& module() const { return module_; }
  const ScriptChanges& changes() const { return changes_; }

 private:
  torch::jit::Module module_;
  ScriptChanges changes_;
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

// The name of `module`'s last 2-dim weight (its last linear layer's: "fc.weight"), or "".
std::string HeadWeight(const torch::jit::Module& module);

// Every parameter of `module` but its last linear layer's (HeadWeight and
// its bias) made not to require grad, the head's made to; what each was
// before into *before. What was done ("all but its last linear layer,
// 'fc2', frozen: 5125 of 3269509 parameters train"); InvalidArgument for a
// module without a linear layer.
StatusOr<std::string> FreezeAllButHead(torch::jit::Module& module,
                                       std::vector<std::pair<std::string, bool>>* before);

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
