// --dataset's values and the default of --data-dir, without LibTorch (data/datasets.h loads them).
#pragma once

#include <string>
#include <vector>

namespace mgpu {

// Names accepted by LoadDataset, in the order help texts list them.
const std::vector<std::string>& DatasetNames();

// Default folder of a named data set: $FASHION_MNIST_DIR or Debian's
// /usr/share/datasets/fashion-mnist for fashion-mnist; $MNIST_DIR for mnist; $CIFAR10_DIR for
// cifar10; "" for synthetic (nothing is read). Throws BadInputError, saying to pass --data-dir,
// where there is none.
std::string DefaultDataDir(const std::string& dataset);

}  // namespace mgpu
