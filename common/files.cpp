#include "common/files.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/status.h"

namespace mgpu {

namespace {
std::string ErrnoText() { return std::strerror(errno); }
}  // namespace

void WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ExitCode::kFailure, "cannot create " + tmp + ": " + ErrnoText());
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = ErrnoText();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(ExitCode::kFailure, "cannot write " + tmp + ": " + err);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string err = ErrnoText();
    ::unlink(tmp.c_str());
    throw Error(ExitCode::kFailure, "cannot flush " + tmp + ": " + err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = ErrnoText();
    ::unlink(tmp.c_str());
    throw Error(ExitCode::kFailure, "cannot rename " + tmp + " to " + path + ": " + err);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInputError("cannot read " + path + ": " + ErrnoText());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void MakeDirectories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw Error(ExitCode::kFailure, "cannot create folder " + path + ": " + ec.message());
}

std::string TimestampForPath() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y%m%d-%H%M%S", &local);
  return buffer;
}

long long PeakRssBytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<long long>(usage.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

}  // namespace mgpu
