#include "data/regular_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace mgpu {

std::string WhyNotARegularFile(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) == 0) {
    if (S_ISREG(info.st_mode)) return "";
    if (S_ISFIFO(info.st_mode)) return "a FIFO (named pipe), not a regular file";
    if (S_ISDIR(info.st_mode)) return "a folder, not a regular file";
    return "a device or socket, not a regular file";
  }
  const int stat_error = errno;
  if (stat_error == ELOOP) return "a symbolic link loop, not a regular file";
  struct stat link {};
  if (stat_error == ENOENT && lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    std::vector<char> target(4096);
    const ssize_t length = readlink(path.c_str(), target.data(), target.size());
    return fmt::format("a dangling symbolic link to '{}', not a regular file",
                       length > 0 ? std::string(target.data(), static_cast<size_t>(length)) : "?");
  }
  return fmt::format("cannot be examined: {}", std::strerror(stat_error));
}

}  // namespace mgpu
