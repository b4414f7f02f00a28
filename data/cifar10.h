// Readers for CIFAR-10's binary release (cifar-10-binary.tar.gz, folder cifar-10-batches-bin):
// data_batch_1.bin .. data_batch_5.bin (training) and test_batch.bin, each a sequence of
// records of 1 label byte (0-9) followed by 3072 pixel bytes (1024 red, 1024 green, 1024 blue,
// rows top to bottom), 10000 records per file; and for its Python release, the one torchvision
// downloads (cifar-10-python.tar.gz, folder cifar-10-batches-py): data_batch_1 .. data_batch_5
// and test_batch, each a pickled dict whose b'data' is a (10000, 3072) numpy uint8 array of the
// same pixel layout and whose b'labels' is a list of 10000 ints (data/python_pickle.h).
//
// Validated like the IDX reader: a missing file, a size that is not a whole number of records,
// a record count other than the expected one and a label above 9 are BadInputError naming the
// file, what is wrong and what was expected.
#pragma once

#include <cstdint>
#include <string>

#include "data/image_dataset.h"

namespace mgpu {

constexpr int64_t kCifarImageBytes = 3 * 32 * 32;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;
constexpr int64_t kCifarRecordsPerFile = 10000;

// Reads one batch file into a data set named `name` (no class names or statistics).
// `records_per_file` is the count the file must hold; tests use small files.
ImageDataset ReadCifarBatch(const std::string& path, int64_t records_per_file = kCifarRecordsPerFile);
// The same for a batch of the Python release.
ImageDataset ReadCifarPythonBatch(const std::string& path, int64_t records_per_file = kCifarRecordsPerFile);

// Loads the five training batches and the test batch from `folder` or from its
// cifar-10-batches-bin or cifar-10-batches-py sub-folder (where the archives unpack; so
// torchvision's root folder works too), the binary release first, with class names airplane ..
// truck and the training set's per-channel mean and standard deviation.
TrainTestSplit LoadCifar10(const std::string& folder, int64_t records_per_file = kCifarRecordsPerFile);

}  // namespace mgpu
