#include "trainer/models/registry.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

TEST(Models, ConvNetMapsAnImageBatchToLogits) {
  auto model = CreateModel({"convnet", {1, 28, 28}, 10, 0.4});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  torch::Tensor logits = model.value()->forward(torch::rand({5, 1, 28, 28}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{5, 10}));
  EXPECT_FALSE(model.value()->parameters().empty());
}

TEST(Models, InputsAModelCannotTakeAreRefusedNamingIt) {
  auto flat = CreateModel({"convnet", {30}, 2, 0});
  EXPECT_EQ(flat.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(flat.status().message().find("model convnet: needs a 3-dim image input"), std::string::npos)
      << flat.status().message();
  EXPECT_EQ(CreateModel({"convnet", {1, 28, 28}, 1, 0}).status().code(), Status::Code::kInvalidArgument);
  auto unknown = CreateModel({"transformer", {1, 28, 28}, 10, 0});
  EXPECT_NE(unknown.status().message().find("known: convnet"), std::string::npos) << unknown.status().message();
  EXPECT_TRUE(IsKnownModel("convnet"));
  EXPECT_FALSE(IsKnownModel("transformer"));
}

}  // namespace
}  // namespace granary
