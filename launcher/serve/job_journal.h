// The durable state of `mgpu serve`: <state-dir>/jobs.journal, an append-only file of job
// records (launcher/serve/job_record.h), one JSON object per line. Each line goes out in one write()
// and is made durable (fdatasync) before the change is acknowledged; the latest line of a job
// wins.
//
// Recovery, when the service starts: the file is replayed; a torn last line (the service died in
// the middle of a write) is dropped with a warning, while a damaged line anywhere else stops the
// start, naming the line, since the jobs' state is then unknown; jobs recorded as running become
// interrupted (their processes ended with the service); then the file is rewritten with one line
// per job (temporary file, fsync, rename, fsync of the folder), so it does not grow across
// restarts and a torn tail never precedes a new line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/serve/job_record.h"

namespace mgpu {

struct RecoveredJobs {
  std::vector<JobRecord> jobs;  // by id
  std::vector<std::string> warnings;
};

// The jobs of a journal's text (`path` for messages). Throws BadInputError for a damaged line
// that is not the last.
RecoveredJobs ReplayJournal(const std::string& text, const std::string& path);

// Jobs recorded as running become interrupted, with a message saying how to resume them, no exit
// code (their process's end was not seen) and, as their end, the last time they were known to
// run: the last change of <job folder>/console.log (which `mgpu run` writes to while it runs),
// else their start.
void MarkInterrupted(std::vector<JobRecord>& jobs);

class JobJournal {
 public:
  // Opens `path` (creating it), recovers it as above and keeps it open for appends. Throws
  // BadInputError for a damaged journal, mgpu::Error when it cannot be written.
  explicit JobJournal(const std::string& path);
  ~JobJournal();
  JobJournal(const JobJournal&) = delete;
  JobJournal& operator=(const JobJournal&) = delete;

  // What the journal held when it was opened, running jobs already marked interrupted.
  const RecoveredJobs& recovered() const { return recovered_; }
  // Appends the record and waits until it is on disk. Throws mgpu::Error.
  void Append(const JobRecord& record);

 private:
  std::string path_;
  int fd_ = -1;
  RecoveredJobs recovered_;
};

}  // namespace mgpu
