#include "launcher/serve/job_outputs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "common/files.h"
#include "common/split.h"
#include "launcher/run/job_summary.h"
#include "report/run_summary.h"

namespace mgpu {
namespace {

constexpr size_t kHeadBytes = 4096;  // the header row
constexpr size_t kTailBytes = 4096;  // holds the last rows

std::string ReadRange(int fd, off_t offset, size_t size) {
  std::string bytes(size, '\0');
  const ssize_t n = ::pread(fd, bytes.data(), size, offset);
  bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return bytes;
}

int Column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::optional<JobProgress> ReadProgress(const std::string& run_folder) {
  const std::string path = run_folder + "/metrics.csv";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  const std::string head = ReadRange(fd, 0, kHeadBytes);
  const off_t tail_start = size > static_cast<off_t>(kTailBytes) ? size - static_cast<off_t>(kTailBytes) : 0;
  const std::string tail = ReadRange(fd, tail_start, kTailBytes);
  ::close(fd);
  const size_t header_end = head.find('\n');
  if (header_end == std::string::npos) return std::nullopt;
  const std::vector<std::string> header = SplitAt(head.substr(0, header_end), ',');
  const int step = Column(header, "step"), epoch = Column(header, "epoch"), loss = Column(header, "loss"),
            speed = Column(header, "images_per_second");
  if (step < 0 || epoch < 0 || loss < 0 || speed < 0) return std::nullopt;
  // Only lines that end with a newline are complete: a row may be in the middle of being written.
  const size_t last_newline = tail.rfind('\n');
  if (last_newline == std::string::npos || tail_start + static_cast<off_t>(last_newline) <= static_cast<off_t>(header_end)) {
    return std::nullopt;  // no row after the header yet
  }
  const size_t previous = last_newline == 0 ? std::string::npos : tail.rfind('\n', last_newline - 1);
  if (previous == std::string::npos && tail_start > 0) return std::nullopt;  // a row longer than the tail
  const size_t line_start = previous == std::string::npos ? 0 : previous + 1;
  const std::string line = tail.substr(line_start, last_newline - line_start);
  const std::vector<std::string> cells = SplitAt(line, ',');
  if (cells.size() != header.size()) return std::nullopt;
  JobProgress progress;
  progress.step = std::strtoll(cells[static_cast<size_t>(step)].c_str(), nullptr, 10);
  progress.epoch = std::strtoll(cells[static_cast<size_t>(epoch)].c_str(), nullptr, 10) + 1;
  progress.loss = std::strtod(cells[static_cast<size_t>(loss)].c_str(), nullptr);
  progress.images_per_second = std::strtod(cells[static_cast<size_t>(speed)].c_str(), nullptr);
  return progress;
}

std::optional<JobResult> ReadResult(const std::string& run_folder) {
  const std::string path = run_folder + "/summary.json";
  if (!IsRegularFile(path)) return std::nullopt;
  try {
    const RunSummary summary = RunSummaryFromJson(nlohmann::json::parse(ReadFile(path)));
    JobResult result;
    result.status = summary.status;
    result.error = summary.error;
    result.test_accuracy = summary.test_accuracy.value_or(0.0);
    result.test_loss = summary.test_loss.value_or(0.0);
    result.steps = summary.steps.value_or(0);
    result.total_seconds = summary.total_seconds.value_or(0.0);
    result.resumed_from = summary.resumed_from.value_or("");
    if (summary.launcher) result.images_per_second = WorldImagesPerSecond(*summary.launcher);
    return result;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string LatestCheckpoint(const std::string& run_folder) { return run_folder + "/checkpoints/latest.ckpt"; }

}  // namespace mgpu
