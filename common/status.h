// Status and errors at mgpu's process and RPC boundaries.
//
// Inside the worker's math, failures are exceptions (mgpu::Error and subclasses); at a process
// boundary they become a Status, whose code is the process exit code users rely on:
//   0 success, 1 anything else, 2 bad input (config, flags, data files), 3 training diverged.
// Every message says what went wrong, where (file, flag, key, rank), and how to fix it.
#pragma once

#include <stdexcept>
#include <string>

namespace mgpu {

enum class ExitCode : int { kOk = 0, kFailure = 1, kBadInput = 2, kDiverged = 3 };

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status BadInput(std::string message) { return Status(ExitCode::kBadInput, std::move(message)); }
  static Status Failure(std::string message) { return Status(ExitCode::kFailure, std::move(message)); }
  static Status Diverged(std::string message) { return Status(ExitCode::kDiverged, std::move(message)); }

  bool ok() const { return code_ == ExitCode::kOk; }
  ExitCode code() const { return code_; }
  int exit_code() const { return static_cast<int>(code_); }
  const std::string& message() const { return message_; }
  // "bad input: <message>" etc., for logs.
  std::string ToString() const;

 private:
  Status(ExitCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ExitCode code_ = ExitCode::kOk;
  std::string message_;
};

// Base of mgpu's exceptions; carries the exit code the failure maps to.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }
  Status ToStatus() const;

 private:
  ExitCode code_;
};

// Bad configuration, flags or data files: exit code 2.
class BadInputError : public Error {
 public:
  explicit BadInputError(const std::string& message) : Error(ExitCode::kBadInput, message) {}
};

// Non-finite loss with --on-nonfinite stop: exit code 3.
class DivergedError : public Error {
 public:
  explicit DivergedError(const std::string& message) : Error(ExitCode::kDiverged, message) {}
};

// Converts whatever was thrown into a Status (mgpu::Error keeps its code; others are code 1).
Status StatusFromCurrentException();

}  // namespace mgpu
