#include "report/csv_writer.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "common/real.h"
#include "common/status.h"

namespace mgpu {

std::string CsvEscape(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char c : field) {
    if (c == '"') quoted.push_back('"');
    quoted.push_back(c);
  }
  quoted.push_back('"');
  return quoted;
}

CsvWriter::CsvWriter(const std::string& path, std::vector<std::string> columns)
    : path_(path), columns_(std::move(columns)) {
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) {
    throw Error(ExitCode::kFailure, "cannot create " + path_ + ": " + std::strerror(errno));
  }
  WriteLine(columns_);
}

CsvWriter::~CsvWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void CsvWriter::AppendRow(const std::vector<std::string>& fields) {
  if (fields.size() != columns_.size()) {
    throw std::invalid_argument(fmt::format("{}: row has {} fields, header has {}", path_,
                                            fields.size(), columns_.size()));
  }
  WriteLine(fields);
}

std::string CsvWriter::Number(double value) { return fmt::format("{}", Real{value}); }

void CsvWriter::WriteLine(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line.push_back(',');
    line += CsvEscape(fields[i]);
  }
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw Error(ExitCode::kFailure, "cannot write " + path_ + ": " + std::strerror(errno));
  }
}

}  // namespace mgpu
