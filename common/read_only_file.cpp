#include "common/read_only_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

ReadOnlyFile::ReadOnlyFile(const std::string& path) : path_(path), fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_ < 0) throw BadInputError(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
}

ReadOnlyFile::~ReadOnlyFile() { close(fd_); }

int64_t ReadOnlyFile::Size() const {
  struct stat info;
  if (fstat(fd_, &info) != 0) throw BadInputError(fmt::format("{}: cannot stat: {}", path_, std::strerror(errno)));
  return info.st_size;
}

int64_t ReadOnlyFile::ReadAt(int64_t offset, void* out, int64_t length) const {
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd_, static_cast<char*>(out) + done, static_cast<size_t>(length - done),
                            static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw BadInputError(fmt::format("{}: cannot read at byte {}: {}", path_, offset + done, std::strerror(errno)));
    if (n == 0) break;
    done += n;
  }
  return done;
}

}  // namespace mgpu
