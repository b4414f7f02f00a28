// Appends rows to a CSV file with a fixed header, flushing each row so a live run can be read
// and a crash loses nothing already logged. Fields are quoted only when they need it (RFC 4180).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace mgpu {

class CsvWriter {
 public:
  // Creates (truncates) `path` and writes the header row. Throws mgpu::Error.
  CsvWriter(const std::string& path, std::vector<std::string> columns);
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  // `fields` must have one entry per column; throws std::invalid_argument otherwise.
  void AppendRow(const std::vector<std::string>& fields);
  size_t column_count() const { return columns_.size(); }

  // "3.25" style formatting shared by all numeric fields: shortest form that round-trips.
  static std::string Number(double value);

 private:
  void WriteLine(const std::vector<std::string>& fields);

  std::string path_;
  std::vector<std::string> columns_;
  std::FILE* file_ = nullptr;
};

// Quotes a field for CSV if it holds a comma, quote or line break.
std::string CsvEscape(const std::string& field);

}  // namespace mgpu
