// Builds a model by name for a data set's shape.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/classifier.h"

namespace mgpu {

struct ModelShape {
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  int64_t height = 28;
  int64_t width = 28;
};

// Names accepted by MakeModel, in the order help texts list them.
const std::vector<std::string>& ModelNames();

// Throws BadInputError for an unknown name or a shape the model cannot take.
std::shared_ptr<Classifier> MakeModel(const std::string& name, const ModelShape& shape);

}  // namespace mgpu
