#include "launcher/serve/job_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"

namespace mgpu {
namespace {

std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// The job's last sign of life: when its console output last changed, else when it started.
int64_t LastKnownRunning(const JobRecord& job) {
  struct stat info {};
  if (::stat((job.job_folder + "/console.log").c_str(), &info) != 0) return job.started_unix_ms;
  const int64_t changed = int64_t{info.st_mtim.tv_sec} * 1000 + info.st_mtim.tv_nsec / 1000000;
  return std::max(job.started_unix_ms, changed);
}

}  // namespace

RecoveredJobs ReplayJournal(const std::string& text, const std::string& path) {
  std::map<int64_t, JobRecord> latest;
  RecoveredJobs recovered;
  size_t start = 0;
  for (int line_number = 1; start < text.size(); ++line_number) {
    size_t end = text.find('\n', start);
    const bool last = end == std::string::npos || end + 1 >= text.size();
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    try {
      JobRecord record = JobRecordFromJson(nlohmann::json::parse(line));
      latest[record.id] = std::move(record);
    } catch (const std::exception& e) {
      if (!last) {
        throw BadInputError(fmt::format(
            "{}:{}: damaged job record ({}); the jobs' state cannot be trusted. Repair or delete that line, or move "
            "the file away to start with no jobs",
            path, line_number, e.what()));
      }
      recovered.warnings.push_back(fmt::format(
          "{}:{}: ignoring a torn last line ({} bytes; the service stopped while writing it): {}", path, line_number,
          line.size(), e.what()));
    }
  }
  for (auto& [id, record] : latest) recovered.jobs.push_back(std::move(record));
  return recovered;
}

void MarkInterrupted(std::vector<JobRecord>& jobs) {
  for (JobRecord& job : jobs) {
    if (job.status != JobStatus::kRunning) continue;
    job.status = JobStatus::kInterrupted;
    job.ended_unix_ms = LastKnownRunning(job);
    job.exit_code.reset();
    job.message = fmt::format("the service stopped while the job ran (found running at the service's restart); "
                              "`mgpu submit --resume {}` continues it from its last checkpoint, if it wrote one",
                              job.id);
  }
}

JobJournal::JobJournal(const std::string& path) : path_(path) {
  const std::string text = IsRegularFile(path) ? ReadFile(path) : std::string();
  recovered_ = ReplayJournal(text, path);
  MarkInterrupted(recovered_.jobs);
  std::string compacted;
  for (const JobRecord& job : recovered_.jobs) compacted += JobRecordToJson(job).dump() + "\n";
  WriteFileAtomically(path, compacted);
  SyncDirectory(FolderOf(path));
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw Error(ExitCode::kFailure, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
}

JobJournal::~JobJournal() {
  if (fd_ >= 0) ::close(fd_);
}

void JobJournal::Append(const JobRecord& record) {
  const std::string line = JobRecordToJson(record).dump() + "\n";
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      // A torn line followed by later ones would make the journal unreadable at the next start.
      if (before >= 0 && ::ftruncate(fd_, before) != 0) {
        throw Error(ExitCode::kFailure, fmt::format("cannot append to {} ({}) nor remove the partial line", path_, why));
      }
      throw Error(ExitCode::kFailure, fmt::format("cannot append to {}: {}", path_, why));
    }
    written += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0) {
    throw Error(ExitCode::kFailure, fmt::format("cannot sync {} to disk: {}", path_, std::strerror(errno)));
  }
}

}  // namespace mgpu
