#include "report/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/status.h"
#include "common/crc32c.h"
#include "tensorboard/event.pb.h"

namespace mgpu {
namespace {

double WallTime() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

void AppendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& folder, const std::string& suffix) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  path_ = folder + "/events.out.tfevents." + std::to_string(static_cast<long long>(WallTime())) +
          "." + host + "." + std::to_string(::getpid()) + "." + suffix;
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) {
    throw Error(ExitCode::kFailure, "cannot create TensorBoard event file " + path_ + ": " +
                                        std::strerror(errno));
  }
  tensorboard::Event header;
  header.set_wall_time(WallTime());
  header.set_file_version("brain.Event:2");
  WriteRecord(header.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::AddScalar(const std::string& tag, double value, int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  tensorboard::Summary::Value* scalar = event.mutable_summary()->add_value();
  scalar->set_tag(tag);
  scalar->set_simple_value(static_cast<float>(value));
  WriteRecord(event.SerializeAsString());
}

void TensorBoardWriter::WriteRecord(const std::string& payload) {
  std::string header;
  AppendLittleEndian(header, payload.size(), 8);
  const uint32_t length_crc = MaskedCrc32c(header.data(), header.size());
  AppendLittleEndian(header, length_crc, 4);
  std::string footer;
  AppendLittleEndian(footer, MaskedCrc32c(payload.data(), payload.size()), 4);
  const bool ok = std::fwrite(header.data(), 1, header.size(), file_) == header.size() &&
                  std::fwrite(payload.data(), 1, payload.size(), file_) == payload.size() &&
                  std::fwrite(footer.data(), 1, footer.size(), file_) == footer.size() &&
                  std::fflush(file_) == 0;
  if (!ok) throw Error(ExitCode::kFailure, "cannot write " + path_ + ": " + std::strerror(errno));
}

}  // namespace mgpu
