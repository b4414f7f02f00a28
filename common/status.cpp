#include "common/status.h"

#include <exception>

namespace mgpu {

std::string Status::ToString() const {
  switch (code_) {
    case ExitCode::kOk: return "ok";
    case ExitCode::kBadInput: return "bad input: " + message_;
    case ExitCode::kDiverged: return "training diverged: " + message_;
    case ExitCode::kFailure: break;
  }
  return "error: " + message_;
}

Status Error::ToStatus() const {
  switch (code_) {
    case ExitCode::kOk: break;
    case ExitCode::kBadInput: return Status::BadInput(what());
    case ExitCode::kDiverged: return Status::Diverged(what());
    case ExitCode::kFailure: break;
  }
  return Status::Failure(what());
}

Status StatusFromCurrentException() {
  try {
    throw;
  } catch (const Error& e) {
    return e.ToStatus();
  } catch (const std::exception& e) {
    return Status::Failure(e.what());
  } catch (...) {
    return Status::Failure("unknown exception");
  }
}

}  // namespace mgpu
