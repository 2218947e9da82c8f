// TorchScript out and in: every built-in model, written with --save's code,
// runs in Python's torch.jit.load (Debian's python3-torch) with the logits the
// C++ model gives; a module scripted in Python trains through ScriptModel.
#include "trainer/models/script.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "tests/trainer/models_util.h"
#include "trainer/models/model_card.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

using testing::ModelCase;
using testing::RunCommand;
using testing::TempDir;

// The same deterministic batch in C++ and in Python.
torch::Tensor InputBatch(const Shape& input) {
  Shape shape = {3};
  shape.insert(shape.end(), input.begin(), input.end());
  return torch::sin(torch::arange(NumElements(shape), torch::kFloat32) * 0.37f).view(shape);
}
const char kPythonBatch[] = "torch.sin(torch.arange(n, dtype=torch.float32) * 0.37).view(shape)";

// Logits of `path` on InputBatch(input), computed by Python.
torch::Tensor PythonLogits(const std::string& path, const Shape& input, const TempDir& dir) {
  std::string shape = "[3";
  for (int64_t d : input) shape += ", " + std::to_string(d);
  shape += "]";
  const std::string script =
      "import json, math, torch\n"
      "shape = " +
      shape +
      "\n"
      "n = math.prod(shape)\n"
      "m = torch.jit.load('" +
      path +
      "')\n"
      "with torch.no_grad():\n"
      "    print(json.dumps(m(" +
      kPythonBatch + ").tolist()))\n";
  testing::WriteFile(dir.Sub("logits.py"), script);
  auto r = RunCommand("/usr/bin/python3 " + dir.Sub("logits.py"), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto rows = nlohmann::json::parse(r.out, nullptr, false);
  if (rows.is_discarded()) return torch::Tensor();
  std::vector<float> values;
  for (const auto& row : rows) {
    for (const auto& v : row) values.push_back(v.get<float>());
  }
  return torch::tensor(values).view({3, -1});
}

TEST(TorchScript, EveryBuiltInModelSavedRunsInPythonWithTheSameLogits) {
  TempDir dir;
  const ModelCase cases[] = {
      {"mlp", {5}}, {"convnet", {1, 12, 12}}, {"resnet", {3, 16, 16}}, {"mobilenet", {3, 16, 16}}};
  for (const ModelCase& c : cases) {
    SCOPED_TRACE(c.model);
    ModelSpec spec{c.model, c.input, 4, 0.3};
    spec.width = 0.5;
    if (c.model == "mlp") {
      spec.input_mean = torch::tensor({0.1, 0.2, -0.3, 0.0, 0.5}, torch::kFloat64);
      spec.input_std = torch::tensor({2.0, 0.5, 1.0, 3.0, 0.25}, torch::kFloat64);
    }
    torch::manual_seed(11);
    std::shared_ptr<Classifier> model = CreateModel(spec).value();
    // Move BatchNorm's running statistics off their initial values.
    model->train();
    for (int i = 0; i < 3; ++i) model->forward(InputBatch(c.input) * (i + 2));
    model->eval();
    torch::Tensor want;
    {
      torch::NoGradGuard no_grad;
      want = model->forward(InputBatch(c.input));
    }
    const std::string path = dir.Sub(c.model + ".pt");
    ModelCard card;
    card.input_field = "image";
    card.input_shape = c.input;
    card.mean = 0.5;
    card.stddev = 0.25;
    card.classes = {"a", "b", "c", "d"};
    if (c.model == "mlp") card.input_names = {"x", "y", "colour=blue", "colour=red", "z"};
    Status saved = SaveTorchScript(*model, path, ModelCardJson(card));
    ASSERT_TRUE(saved.ok()) << saved.ToString();
    // The file carries what the model expects of its input.
    StatusOr<std::optional<ModelCard>> read = ReadModelCard(path);
    ASSERT_TRUE(read.ok() && read->has_value()) << read.status().ToString();
    EXPECT_EQ(ModelCardJson(read->value()), ModelCardJson(card));
    torch::Tensor got = PythonLogits(path, c.input, dir);
    ASSERT_TRUE(got.defined());
    EXPECT_TRUE(torch::allclose(got, want, 1e-4, 1e-5)) << got << want;
    // And LibTorch loads it back as a model that gives the same logits.
    StatusOr<std::shared_ptr<Classifier>> loaded = LoadScriptModel({path, c.input, 4, 0});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    loaded.value()->eval();
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::allclose(loaded.value()->forward(InputBatch(c.input)), want, 1e-5, 1e-6));
  }
}

// A module scripted in Python: its parameters are the ones forward uses, so
// an optimizer step through ScriptModel changes its output; train/eval reach
// it (dropout on, then off).
TEST(TorchScript, APythonScriptedModuleTrainsThroughScriptModel) {
  TempDir dir;
  const std::string path = dir.Sub("net.pt");
  ASSERT_EQ(testing::SaveScriptedNet(
                "class Net(torch.nn.Module):\n"
                "    def __init__(self):\n"
                "        super().__init__()\n"
                "        self.body = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(),\n"
                "                                        torch.nn.Dropout(0.5))\n"
                "        self.head = torch.nn.Linear(8, 3)\n"
                "    def forward(self, x):\n"
                "        return self.head(self.body(x))\n",
                path, dir),
            "");
  StatusOr<std::shared_ptr<Classifier>> model = LoadScriptModel({path, {5}, 3, 0});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Classifier& net = *model.value();
  EXPECT_EQ(net.parameters().size(), 4u);
  torch::Tensor x = InputBatch({5});
  net.eval();
  torch::Tensor before = net.forward(x).detach().clone();
  EXPECT_TRUE(torch::equal(net.forward(x), before));  // eval: dropout off, deterministic
  net.train();
  torch::optim::SGD sgd(net.parameters(), torch::optim::SGDOptions(0.5));
  torch::nll_loss(torch::log_softmax(net.forward(x), 1), torch::tensor({0, 1, 2})).backward();
  sgd.step();
  net.eval();
  EXPECT_FALSE(torch::allclose(net.forward(x), before));
}

// An error a TorchScript model raises reaches the user as the model's own
// message, not the interpreter's first line.
TEST(TorchScript, AnErrorRaisedInsideAModelKeepsItsOwnMessage) {
  TempDir dir;
  const std::string path = dir.Sub("picky.pt");
  ASSERT_EQ(testing::SaveScriptedNet("class Net(torch.nn.Module):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.head = torch.nn.Linear(5, 3)\n"
                                     "    def forward(self, x):\n"
                                     "        if x.size(0) > 2:\n"
                                     "            raise RuntimeError('picky wants at most 2 samples')\n"
                                     "        return self.head(x)\n",
                                     path, dir),
            "");
  StatusOr<std::shared_ptr<Classifier>> model = LoadScriptModel({path, {5}, 3, 0});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Status s = CatchTorch("training step", [&] { model.value()->forward(InputBatch({5})); });
  EXPECT_NE(s.message().find("training step: "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("picky wants at most 2 samples"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

TEST(TorchScript, AFileThatIsNotAModuleIsRefusedNamingIt) {
  TempDir dir;
  testing::WriteFile(dir.Sub("junk.pt"), "not a zip archive");
  auto junk = LoadScriptModel({dir.Sub("junk.pt"), {5}, 3, 0});
  EXPECT_EQ(junk.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(junk.status().message().find("--model " + dir.Sub("junk.pt") + ": not a TorchScript module"),
            std::string::npos)
      << junk.status().message();
  EXPECT_EQ(junk.status().message().find('\n'), std::string::npos);
  auto missing = LoadScriptModel({dir.Sub("missing.pt"), {5}, 3, 0});
  EXPECT_EQ(missing.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("missing.pt: no such file"), std::string::npos)
      << missing.status().message();
}

// A db whose label k or input element i means another thing than to the
// model (a held-out folder or table built on its own) is refused, naming the
// place and prep build --like; a side that names none is not compared, nor
// are the classes under --new-head, nor classes past the shorter list.
TEST(ModelCard, ADbWhoseClassesOrElementsMeanOtherThingsIsRefused) {
  ModelCard card;
  card.input_field = "features";
  card.classes = {"cat", "dog", "fox"};
  card.input_names = {"x", "colour=blue", "colour=green"};
  Manifest db;
  db.class_names = {"cat", "dog", "fox"};
  db.element_names["features"] = card.input_names;
  EXPECT_TRUE(CheckModelMeetsDb(card, "m.pt", db, "features", false).ok());
  db.class_names = {"dog", "fox"};
  Status s = CheckModelMeetsDb(card, "m.pt", db, "features", false);
  EXPECT_NE(s.message().find("--model m.pt: its classes are cat, dog, fox (its card says) and the db's dog, fox: "
                             "label 0 is 'cat' to the model and 'dog' in the db"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("prep build RAW DB --like TRAIN_DB"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckModelMeetsDb(card, "m.pt", db, "features", /*new_head=*/true).ok());
  db.class_names = {"cat", "dog"};  // fewer, the same in their places: the forward's shape says the rest
  EXPECT_TRUE(CheckModelMeetsDb(card, "m.pt", db, "features", false).ok());
  db.class_names = {};
  EXPECT_TRUE(CheckModelMeetsDb(card, "m.pt", db, "features", false).ok());
  db.class_names = {"0", "1", "2"};  // a db naming them by their indices (IDX files), torchvision's by their names
  EXPECT_TRUE(CheckModelMeetsDb(card, "m.pt", db, "features", false).ok());
  ModelCard numbered = card;
  numbered.classes = {"0", "1", "2"};
  db.class_names = {"1", "2"};  // a table's labels 0, 1, 2 of which it holds 1 and 2: renumbered from 0
  s = CheckModelMeetsDb(numbered, "m.pt", db, "features", false);
  EXPECT_NE(s.message().find("label 0 is '0' to the model and '1' in the db"), std::string::npos) << s.message();
  db.class_names = card.classes;

  db.element_names["features"] = {"x", "colour=green", "colour=pink"};
  s = CheckModelMeetsDb(card, "m.pt", db, "features", true);
  EXPECT_NE(s.message().find("its input's elements are x, colour=blue, colour=green (its card says) and the db's "
                             "field 'features' has x, colour=green, colour=pink: element 1 is 'colour=blue' to the "
                             "model and 'colour=green' in the db"),
            std::string::npos)
      << s.message();
  db.element_names["features"] = {"x", "colour=blue"};
  s = CheckModelMeetsDb(card, "m.pt", db, "features", false);
  EXPECT_NE(s.message().find("element 2 is 'colour=green' to the model and none (it has 2) in the db"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(CheckModelMeetsDb(card, "m.pt", db, "image", false).ok());  // a field the db names no elements of
  card.input_names.clear();
  EXPECT_TRUE(CheckModelMeetsDb(card, "m.pt", db, "features", false).ok());
}

}  // namespace
}  // namespace granary
