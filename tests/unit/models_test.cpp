// Specification of the model zoo: parameter counts of the reference implementations and
// output shapes.
#include <gtest/gtest.h>

#include "common/status.h"
#include "models/model_factory.h"

namespace mgpu {
namespace {

TEST(LeNet, HasTheClassicParameterCount) {
  auto model = MakeModel("lenet", ModelShape{1, 10, 28, 28});
  EXPECT_EQ(CountParameters(*model), 61706);
}

TEST(LeNet, MapsImagesToLogits) {
  auto model = MakeModel("lenet", ModelShape{3, 7, 32, 32});
  torch::Tensor logits = model->forward(torch::randn({5, 3, 32, 32}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{5, 7}));
}

TEST(ModelFactory, RejectsUnknownNamesAndImpossibleShapes) {
  EXPECT_THROW(MakeModel("resnet9000", ModelShape{}), BadInputError);
  EXPECT_THROW(MakeModel("lenet", ModelShape{1, 10, 8, 8}), BadInputError);
}

}  // namespace
}  // namespace mgpu
