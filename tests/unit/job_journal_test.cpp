// mgpu serve's durable state: the latest record of each job wins; a torn last line (a crash in the
// middle of a write) is dropped with a warning while a damaged line elsewhere is refused naming
// it; jobs recorded as running come back interrupted, with no exit code and their last sign of
// life as their end (never the restart's time); reopening compacts the file.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "common/files.h"
#include "launcher/serve/job_journal.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

JobRecord Job(int64_t id, JobStatus status) {
  JobRecord job;
  job.id = id;
  job.status = status;
  job.config_yaml = "model: lenet\nepochs: 2\n";
  job.config_name = "job.yaml";
  job.model = "lenet";
  job.dataset = "fashion-mnist";
  job.mode = "single";
  job.worker_args = {"--config", "/state/jobs/" + std::to_string(id) + "/submitted.yaml"};
  job.job_folder = "/state/jobs/" + std::to_string(id);
  job.run_folder = job.job_folder + "/run";
  return job;
}

std::string Line(const JobRecord& job) { return JobRecordToJson(job).dump() + "\n"; }

TEST(JobRecord, SurvivesJsonUnchanged) {
  JobRecord job = Job(7, JobStatus::kSucceeded);
  job.devices = {0, 2};
  job.priority = -3;
  job.result = JobResult{"ok", "", 91.5, 0.25, 40, 3.5, 1800, "/x/latest.ckpt"};
  const JobRecord back = JobRecordFromJson(JobRecordToJson(job));
  EXPECT_EQ(JobRecordToJson(back), JobRecordToJson(job));
  EXPECT_EQ(back.result->test_accuracy, 91.5);
  EXPECT_THROW(JobRecordFromJson(nlohmann::json{{"id", 1}}), Error);
}

TEST(JobJournal, TheLatestLineOfEachJobWins) {
  JobRecord started = Job(1, JobStatus::kRunning);
  started.devices = {1};
  const RecoveredJobs recovered =
      ReplayJournal(Line(Job(1, JobStatus::kQueued)) + Line(Job(2, JobStatus::kQueued)) + Line(started), "j");
  ASSERT_EQ(recovered.jobs.size(), 2u);
  EXPECT_EQ(recovered.jobs[0].status, JobStatus::kRunning);
  EXPECT_EQ(recovered.jobs[0].devices, std::vector<int>{1});
  EXPECT_EQ(recovered.jobs[1].status, JobStatus::kQueued);
  EXPECT_TRUE(recovered.warnings.empty());
}

TEST(JobJournal, ATornLastLineIsIgnoredWithAWarning) {
  const std::string whole = Line(Job(2, JobStatus::kSucceeded));
  const RecoveredJobs recovered =
      ReplayJournal(Line(Job(1, JobStatus::kQueued)) + Line(Job(2, JobStatus::kQueued)) + whole.substr(0, 40), "jobs.journal");
  ASSERT_EQ(recovered.jobs.size(), 2u);
  EXPECT_EQ(recovered.jobs[1].status, JobStatus::kQueued) << "the torn update is not applied";
  ASSERT_EQ(recovered.warnings.size(), 1u);
  EXPECT_NE(recovered.warnings[0].find("jobs.journal:3: ignoring a torn last line"), std::string::npos)
      << recovered.warnings[0];
}

TEST(JobJournal, ADamagedLineBeforeTheLastIsRefusedNamingIt) {
  const std::string message = BadInputMessage([] {
    ReplayJournal(Line(Job(1, JobStatus::kQueued)) + "{\"id\": 2, \"stat\n" + Line(Job(3, JobStatus::kQueued)),
                  "/s/jobs.journal");
  });
  EXPECT_NE(message.find("/s/jobs.journal:2: damaged job record"), std::string::npos) << message;
  EXPECT_NE(message.find("move the file away"), std::string::npos) << message;
}

TEST(JobJournal, RunningJobsBecomeInterruptedAndOthersKeepTheirState) {
  std::vector<JobRecord> jobs = {Job(1, JobStatus::kSucceeded), Job(2, JobStatus::kRunning), Job(3, JobStatus::kQueued)};
  jobs[0].exit_code = 0;
  jobs[1].started_unix_ms = 1234;
  jobs[1].exit_code = 0;  // as older services recorded it
  MarkInterrupted(jobs);
  EXPECT_EQ(jobs[0].status, JobStatus::kSucceeded);
  EXPECT_EQ(jobs[0].exit_code, 0);
  EXPECT_EQ(jobs[1].status, JobStatus::kInterrupted);
  EXPECT_FALSE(jobs[1].exit_code.has_value()) << "its process's end was not seen";
  EXPECT_EQ(jobs[1].ended_unix_ms, 1234) << "no console output: its start is the last time it was known to run";
  EXPECT_NE(jobs[1].message.find("mgpu submit --resume 2"), std::string::npos) << jobs[1].message;
  EXPECT_EQ(jobs[2].status, JobStatus::kQueued);
}

TEST(JobJournal, AnInterruptedJobEndsWhenItsConsoleOutputLastChanged) {
  TempDir dir;
  JobRecord job = Job(4, JobStatus::kRunning);
  job.job_folder = dir / "jobs/4";
  job.started_unix_ms = 1000;
  MakeDirectories(job.job_folder);
  WriteBytes(job.job_folder + "/console.log", "step 5\n");
  const timespec times[2] = {{1700000000, 0}, {1700000000, 250000000}};  // 2023-11-14, long before any restart
  ASSERT_EQ(::utimensat(AT_FDCWD, (job.job_folder + "/console.log").c_str(), times, 0), 0);
  std::vector<JobRecord> jobs = {job};
  MarkInterrupted(jobs);
  EXPECT_EQ(jobs[0].ended_unix_ms, int64_t{1700000000250});
  EXPECT_FALSE(jobs[0].exit_code.has_value());
  const JobRecord read_back = JobRecordFromJson(JobRecordToJson(jobs[0]));
  EXPECT_FALSE(read_back.exit_code.has_value()) << "kept as null in the journal, not 0";
}

TEST(JobJournal, ReopeningRecoversAppendsMarksInterruptedAndCompacts) {
  TempDir dir;
  const std::string path = dir / "jobs.journal";
  {
    JobJournal journal(path);
    EXPECT_TRUE(journal.recovered().jobs.empty());
    journal.Append(Job(1, JobStatus::kQueued));
    JobRecord running = Job(1, JobStatus::kRunning);
    running.started_unix_ms = 99;
    journal.Append(running);
    journal.Append(Job(2, JobStatus::kQueued));
  }
  EXPECT_EQ(LineCount(path), 3);
  WriteBytes(path, ReadText(path) + "{\"id\": 3, \"sta");  // killed in the middle of a write
  JobJournal journal(path);
  ASSERT_EQ(journal.recovered().jobs.size(), 2u);
  EXPECT_EQ(journal.recovered().jobs[0].status, JobStatus::kInterrupted);
  EXPECT_EQ(journal.recovered().jobs[0].ended_unix_ms, 99);
  EXPECT_EQ(journal.recovered().warnings.size(), 1u);
  EXPECT_EQ(LineCount(path), 2) << "one line per job, the torn tail gone";
  journal.Append(Job(2, JobStatus::kCancelled));
  const RecoveredJobs again = ReplayJournal(ReadText(path), path);
  ASSERT_EQ(again.jobs.size(), 2u);
  EXPECT_EQ(again.jobs[0].status, JobStatus::kInterrupted) << "recorded as such";
  EXPECT_EQ(again.jobs[1].status, JobStatus::kCancelled);
  EXPECT_TRUE(again.warnings.empty());
}

}  // namespace
}  // namespace mgpu
