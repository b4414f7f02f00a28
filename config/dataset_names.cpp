#include "config/dataset_names.h"

#include <cstdlib>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

const std::vector<std::string>& DatasetNames() {
  static const std::vector<std::string> names = {"fashion-mnist", "mnist", "cifar10", "imagefolder",
                                                 "synthetic", "webdataset"};
  return names;
}

std::string DefaultDataDir(const std::string& dataset) {
  if (dataset == "fashion-mnist") {
    const char* env = std::getenv("FASHION_MNIST_DIR");
    return env != nullptr && *env != '\0' ? env : "/usr/share/datasets/fashion-mnist";
  }
  if (dataset == "mnist") {
    const char* env = std::getenv("MNIST_DIR");
    if (env != nullptr && *env != '\0') return env;
    throw BadInputError("--dataset mnist needs its IDX files: pass --data-dir DIR or set MNIST_DIR "
                        "(no Debian package ships MNIST; Fashion-MNIST is the default data set)");
  }
  if (dataset == "cifar10") {
    const char* env = std::getenv("CIFAR10_DIR");
    if (env != nullptr && *env != '\0') return env;
    throw BadInputError("--dataset cifar10 needs its binary batches (data_batch_1.bin .. "
                        "data_batch_5.bin, test_batch.bin): pass --data-dir DIR or set "
                        "CIFAR10_DIR. No Debian package ships CIFAR-10 and mgpu downloads "
                        "nothing: fetch cifar-10-binary.tar.gz on a machine with network access "
                        "and unpack it");
  }
  if (dataset == "synthetic") return "";
  if (dataset == "imagefolder") {
    throw BadInputError("--dataset imagefolder needs --data-dir DIR, a folder with train/<class>/ "
                        "and test/<class>/ sub-folders of .jpg or .png images");
  }
  throw BadInputError(fmt::format("data set '{}' has no default folder; pass --data-dir", dataset));
}

}  // namespace mgpu
