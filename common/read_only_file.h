// A file opened for positioned reads (pread), closed when the object goes: what the loader's tar
// index and its per-sample reads share. Errors are BadInputError naming the path, as a data file
// that cannot be read is the user's input.
#pragma once

#include <cstdint>
#include <string>

namespace mgpu {

class ReadOnlyFile {
 public:
  // Opens `path`; throws BadInputError saying why it cannot be opened.
  explicit ReadOnlyFile(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // The file's size in bytes. Throws BadInputError.
  int64_t Size() const;
  // Reads up to `length` bytes at `offset` into `out`, retrying short reads; returns how many
  // (fewer only at the end of the file). Throws BadInputError on a read error.
  int64_t ReadAt(int64_t offset, void* out, int64_t length) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_;
};

}  // namespace mgpu
