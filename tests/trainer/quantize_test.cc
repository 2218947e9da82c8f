// INT8 post-training quantization through LibTorch's graph-mode passes: every
// built-in model has all its conv and linear layers quantized, gives logits
// close to its fp32 ones, and runs in Python's torch.jit.load with the same
// INT8 logits; a module the passes cannot quantize is refused, one with an
// op they leave in fp32 has it named.
#include "trainer/models/quantize.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "tests/trainer/models_util.h"
#include "trainer/models/model_card.h"
#include "trainer/models/script.h"

namespace granary {
namespace {

using testing::Batched;
using testing::RunCommand;
using testing::TempDir;

// The same deterministic batch in C++ and in Python; `phase` gives others
// like it.
torch::Tensor Deterministic(const Shape& shape, float phase = 0) {
  return torch::sin(torch::arange(NumElements(shape), torch::kFloat32) * 0.37f + phase).view(shape) * 2;
}

// Calibration: `count` batches of 8 samples like Deterministic's.
CalibrationBatches Batches(const Shape& input, int count) {
  auto done = std::make_shared<int>(0);
  return [input, count, done](torch::Tensor* batch) -> StatusOr<bool> {
    if (*done == count) return false;
    *batch = Deterministic(Batched(8, input), static_cast<float>(++*done));
    return true;
  };
}
std::string PythonDeterministic(const Shape& shape) {
  std::string dims;
  for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  return "torch.sin(torch.arange(" + std::to_string(NumElements(shape)) + ", dtype=torch.float32) * 0.37).view(" +
         dims + ") * 2";
}

int WeightedLayers(const Classifier& model) {
  int layers = 0;
  for (const auto& m : model.modules(/*include_self=*/false)) {
    layers += m->as<torch::nn::Conv2d>() != nullptr || m->as<torch::nn::Linear>() != nullptr;
  }
  return layers;
}

TEST(Int8, EveryBuiltInModelHasEveryConvAndLinearQuantized) {
  TempDir dir;
  const std::pair<const char*, Shape> cases[] = {
      {"mlp", {6}}, {"convnet", {1, 12, 12}}, {"resnet", {3, 16, 16}}, {"mobilenet", {3, 16, 16}}};
  for (const auto& [name, input] : cases) {
    SCOPED_TRACE(name);
    ModelSpec spec{name, input, 5, 0.2};
    spec.width = 0.5;
    if (spec.name == "mlp") {
      spec.input_mean = torch::zeros({6}, torch::kFloat64);
      spec.input_std = torch::ones({6}, torch::kFloat64);
    }
    torch::manual_seed(3);
    std::shared_ptr<Classifier> model = CreateModel(spec).value();
    model->train();  // BatchNorm statistics off their initial values, to be folded
    for (int i = 0; i < 3; ++i) model->forward(torch::randn(Batched(8, input)) * 2 + 0.5);
    model->eval();
    StatusOr<torch::jit::Module> fp32 = ToTorchScript(*model);
    ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
    StatusOr<Int8Model> int8 = QuantizeInt8(fp32.value(), Batches(input, 8), name);
    ASSERT_TRUE(int8.ok()) << int8.status().ToString();
    EXPECT_EQ(int8->int8_layers, WeightedLayers(*model));
    EXPECT_TRUE(int8->fp32_layers.empty()) << int8->fp32_layers.front();

    torch::NoGradGuard no_grad;
    const Shape shape = Batched(16, input);
    const torch::Tensor x = Deterministic(shape);
    const torch::Tensor want = model->forward(x);
    const torch::Tensor got = int8->module.forward({x}).toTensor();
    ASSERT_EQ(got.sizes(), want.sizes());
    // INT8 rounding: within 5% of the fp32 logits (measured: 0.4% to 1.9%).
    EXPECT_LT(((got - want).norm() / want.norm()).item<double>(), 0.05) << got << want;

    // Saved and loaded back by Python: the INT8 logits again.
    const std::string path = dir.Sub(std::string(name) + ".int8.pt");
    StatusOr<std::string> bytes = TorchScriptBytes(int8->module, "save", ModelCardJson({}));
    ASSERT_TRUE(bytes.ok());
    testing::WriteFile(path, bytes.value());
    testing::WriteFile(dir.Sub("run.py"), "import json, torch\n"
                                          "torch.backends.quantized.engine = 'onednn'\n"
                                          "m = torch.jit.load('" +
                                              path + "')\nwith torch.no_grad():\n    print(json.dumps(m(" +
                                              PythonDeterministic(shape) + ").flatten().tolist()))\n");
    auto r = RunCommand("/usr/bin/python3 " + dir.Sub("run.py"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<float> values = nlohmann::json::parse(r.out).get<std::vector<float>>();
    EXPECT_TRUE(torch::allclose(torch::tensor(values).view_as(got), got, 1e-4, 1e-4));
  }
}

TEST(Int8, AModelWithNothingToQuantizeIsRefusedAndAnFp32OpIsNamed) {
  TempDir dir;
  const std::string none = dir.Sub("none.pt");
  ASSERT_EQ(testing::SaveScriptedNet("class Net(torch.nn.Module):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.scale = torch.nn.Parameter(torch.ones(4, 3))\n"
                                     "    def forward(self, x):\n"
                                     "        return torch.matmul(x, self.scale)\n",
                                     none, dir),
            "");
  StatusOr<Int8Model> refused = QuantizeInt8(torch::jit::load(none), Batches({4}, 2), "--model none.pt");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--model none.pt has no layer"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("aten::matmul"), std::string::npos) << refused.status().ToString();

  const std::string mixed = dir.Sub("mixed.pt");
  ASSERT_EQ(testing::SaveScriptedNet("class Net(torch.nn.Module):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.fc = torch.nn.Linear(4, 6)\n"
                                     "        self.mix = torch.nn.Parameter(torch.ones(6, 3))\n"
                                     "    def forward(self, x):\n"
                                     "        return torch.matmul(torch.relu(self.fc(x)), self.mix)\n",
                                     mixed, dir),
            "");
  StatusOr<Int8Model> partly = QuantizeInt8(torch::jit::load(mixed), Batches({4}, 2), "--model mixed.pt");
  ASSERT_TRUE(partly.ok()) << partly.status().ToString();
  EXPECT_EQ(partly->int8_layers, 1);
  ASSERT_EQ(partly->fp32_layers.size(), 1u);
  EXPECT_NE(partly->fp32_layers[0].find("aten::matmul"), std::string::npos) << partly->fp32_layers[0];
  EXPECT_NE(partly->fp32_layers[0].find("no INT8 pattern"), std::string::npos) << partly->fp32_layers[0];
}

}  // namespace
}  // namespace granary
