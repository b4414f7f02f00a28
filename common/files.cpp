#include "common/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include <cerrno>
#include <cstring>
#include <ctime>
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

bool LinkOrWriteAtomically(const std::string& existing, const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::link(existing.c_str(), tmp.c_str()) != 0) {
    WriteFileAtomically(path, contents);
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = ErrnoText();
    ::unlink(tmp.c_str());
    throw Error(ExitCode::kFailure, "cannot rename " + tmp + " to " + path + ": " + err);
  }
  // Where `path` already was a name of `existing`, rename leaves both names in place.
  ::unlink(tmp.c_str());
  return true;
}

void SyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(ExitCode::kFailure, "cannot open folder " + path + ": " + ErrnoText());
  const bool synced = ::fsync(fd) == 0;
  const std::string err = synced ? "" : ErrnoText();
  ::close(fd);
  if (!synced) throw Error(ExitCode::kFailure, "cannot sync folder " + path + ": " + err);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInputError("cannot read " + path + ": " + ErrnoText());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void MakeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      throw Error(ExitCode::kFailure, "cannot create folder " + prefix + ": " + ErrnoText());
    }
    if (slash == std::string::npos) break;
  }
  if (!IsDirectory(path)) throw Error(ExitCode::kFailure, "cannot create folder " + path + ": not a folder");
}

bool PathExists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

bool IsRegularFile(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

long long FileSize(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<long long>(info.st_size) : -1;
}

std::vector<std::string> ListDirectory(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool RemovePath(const std::string& path) { return ::remove(path.c_str()) == 0; }

void RemoveTree(const std::string& path) {
  ::nftw(
      path.c_str(),
      [](const char* entry, const struct stat*, int, struct FTW*) {
        ::remove(entry);  // keep going: remove what can be removed
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

std::string ExecutableDirectory() {
  char buffer[PATH_MAX];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (length <= 0) return ".";
  const std::string self(buffer, static_cast<size_t>(length));
  return self.substr(0, self.rfind('/'));
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
