// An image-classification folder in torchvision's ImageFolder layout:
//   DIR/train/<class>/*.{jpg,jpeg,png}   DIR/test/<class>/*.{jpg,jpeg,png}
// Class names are train's sub-folder names, sorted; test's sub-folders must be among them.
// Images are decoded in parallel threads (libjpeg-turbo, libpng), converted to RGB, resized to
// image_size x image_size (antialiased bilinear, aspect ratio not kept, as
// transforms.Resize((S, S))) and held in memory as uint8. Other files are ignored; an entry with
// an image's name that is not a regular file (a FIFO, a broken symbolic link) is a bad image. Mean and
// standard deviation are ImageNet's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image_dataset.h"

namespace mgpu {

struct ImageFolderOptions {
  int64_t image_size = 64;
  // An image that cannot be decoded: "fail" (BadInputError listing the paths) or "skip" (left
  // out, each one reported in TrainTestSplit::warnings).
  std::string on_bad_image = "fail";
  int threads = 0;  // decoding threads; 0: one per hardware thread
};

TrainTestSplit LoadImageFolder(const std::string& folder, const ImageFolderOptions& options);

// The files of an image folder, without reading them (the streaming loader's index).
struct ImageFolderSplit {
  std::vector<std::string> paths;  // sorted by class, then by name
  std::vector<int64_t> labels;     // index into class_names
};
struct ImageFolderListing {
  std::vector<std::string> class_names;
  ImageFolderSplit train;
  ImageFolderSplit test;
};
// Checks the layout as LoadImageFolder does; throws BadInputError.
ImageFolderListing ListImageFolder(const std::string& folder);

}  // namespace mgpu
