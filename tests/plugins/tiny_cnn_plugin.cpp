// The example model plugin (models/model_plugin.h) that the integration tests train with
// --model plugin:LIB.so:tiny_cnn, plus two factories that go wrong on purpose.
#include <stdexcept>

#include "models/model_plugin.h"

namespace {

// conv 8@3x3 (pad 1) → ReLU → max-pool 2 → fc classes: the fully connected layer sees where in
// the image a feature is, which the tests' data (a band whose row is the class) needs.
class TinyCnn : public mgpu::Classifier {
 public:
  TinyCnn(int64_t in_channels, int64_t num_classes, int64_t height, int64_t width)
      : conv_(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, 8, 3).padding(1)))),
        fc_(register_module("fc", torch::nn::Linear(8 * (height / 2) * (width / 2), num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::relu(conv_(x)), 2);  // (B, 8, H/2, W/2)
    return fc_(x.flatten(1));                         // (B, classes)
  }

 private:
  torch::nn::Conv2d conv_;
  torch::nn::Linear fc_;
};

}  // namespace

MGPU_MODEL_PLUGIN_INFO();

extern "C" MGPU_MODEL_PLUGIN_EXPORT void* mgpu_model_tiny_cnn(const MgpuModelShape* shape, char* error,
                                                              size_t error_size) {
  return mgpu::HandOverModel(error, error_size, [&] {
    return std::make_shared<TinyCnn>(shape->in_channels, shape->num_classes, shape->height, shape->width);
  });
}

// One logit too many: mgpu's shape check refuses it.
extern "C" MGPU_MODEL_PLUGIN_EXPORT void* mgpu_model_wrong_classes(const MgpuModelShape* shape, char* error,
                                                                   size_t error_size) {
  return mgpu::HandOverModel(error, error_size, [&] {
    return std::make_shared<TinyCnn>(shape->in_channels, shape->num_classes + 1, shape->height, shape->width);
  });
}

// A factory that cannot build its model: the message reaches mgpu's error.
extern "C" MGPU_MODEL_PLUGIN_EXPORT void* mgpu_model_failing(const MgpuModelShape*, char* error, size_t error_size) {
  return mgpu::HandOverModel(error, error_size, []() -> std::shared_ptr<mgpu::Classifier> {
    throw std::invalid_argument("tiny test factory refuses on purpose");
  });
}
