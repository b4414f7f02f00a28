// Writes TensorBoard event files natively: TFRecord framing (length, masked CRC-32C of the length,
// payload, masked CRC-32C of the payload) around serialized tensorboard.Event protobufs.
//
// One writer owns one file `<folder>/events.out.tfevents.<seconds>.<host>.<pid>.<suffix>`.
// Each AddScalar appends one record and flushes, so TensorBoard can follow a live run and a
// crash loses at most the record being written. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace mgpu {

class TensorBoardWriter {
 public:
  // Creates the file and writes the "brain.Event:2" header record. Throws mgpu::Error.
  explicit TensorBoardWriter(const std::string& folder, const std::string& suffix = "mgpu");
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void AddScalar(const std::string& tag, double value, int64_t step);
  const std::string& path() const { return path_; }

 private:
  void WriteRecord(const std::string& payload);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mgpu
