#include "launcher/serve/job_manager.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "launcher/child_process.h"
#include "launcher/serve/job_outputs.h"
#include "launcher/serve/job_queue.h"
#include "launcher/serve/job_submission.h"

extern char** environ;

namespace mgpu {
namespace {

constexpr auto kTick = std::chrono::milliseconds(100);

service::JobState ToProto(JobStatus status) {
  switch (status) {
    case JobStatus::kQueued: return service::QUEUED;
    case JobStatus::kRunning: return service::RUNNING;
    case JobStatus::kSucceeded: return service::SUCCEEDED;
    case JobStatus::kFailed: return service::FAILED;
    case JobStatus::kCancelled: return service::CANCELLED;
    case JobStatus::kInterrupted: return service::INTERRUPTED;
  }
  return service::JOB_STATE_UNSPECIFIED;
}

bool Resumable(const JobRecord& job) {
  return (job.status == JobStatus::kInterrupted || job.status == JobStatus::kCancelled ||
          job.status == JobStatus::kFailed) &&
         IsRegularFile(LatestCheckpoint(job.run_folder));
}

std::string SlotNames(const DeviceSlots& slots, const std::vector<int>& indices) {
  std::vector<std::string> names;
  for (int i : indices) {
    names.push_back(slots.cuda ? "GPU " + slots.names[static_cast<size_t>(i)] : fmt::format("cpu slot {}", i));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

JobManager::JobManager(const ManagerOptions& options) : options_(options) {
  MakeDirectories(options_.state_dir + "/jobs");
  journal_ = std::make_unique<JobJournal>(options_.state_dir + "/jobs.journal");
  warnings_ = journal_->recovered().warnings;
  for (const JobRecord& job : journal_->recovered().jobs) {
    jobs_[job.id] = job;
    next_id_ = std::max(next_id_, job.id + 1);
  }
  // Never reuse the folder of a job the journal does not know (a journal moved away, or a crash
  // between preparing a job and recording it): its outputs stay where they are.
  for (const std::string& name : ListDirectory(options_.state_dir + "/jobs")) {
    if (!name.empty() && name.size() < 18 && name.find_first_not_of("0123456789") == std::string::npos) {
      next_id_ = std::max<int64_t>(next_id_, std::stoll(name) + 1);
    }
  }
  free_.assign(static_cast<size_t>(options_.slots.count()), true);
  // A queued job needing more devices than this service now owns (restarted with a shorter
  // --gpus) would block the queue for ever.
  for (auto& [id, job] : jobs_) {
    if (job.status != JobStatus::kQueued || job.gpus <= options_.slots.count()) continue;
    job.status = JobStatus::kFailed;
    job.ended_unix_ms = UnixMillis();
    job.message = fmt::format("the job needs {} devices but the service now owns {} (--gpus); submit it again with "
                              "fewer",
                              job.gpus, options_.slots.count());
    PersistLocked(job);
    warnings_.push_back(fmt::format("job {}: {}", id, job.message));
  }
  scheduler_ = std::thread([this] { Schedule(); });
}

JobManager::~JobManager() { Stop("the service shut down"); }

void JobManager::Stop(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      stop_reason_ = why;
      for (auto& [id, running] : running_) SignalLocked(id, running);
    }
  }
  wake_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
}

void JobManager::SignalLocked(int64_t id, Running& running) {
  if (running.exited || running.kill_at) return;
  ::kill(-running.pid, SIGTERM);
  running.kill_at = SteadyClock::now() + options_.stop_grace;
  std::fprintf(stderr, "mgpu serve: job %lld: SIGTERM sent to its processes\n", static_cast<long long>(id));
}

void JobManager::Schedule() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    std::vector<std::unique_ptr<WorkerGroup>> ended = ReapLocked();
    if (!ended.empty()) {
      // A group's destructor joins its watcher thread, which may be waiting for this lock.
      lock.unlock();
      ended.clear();
      lock.lock();
    }
    if (stopping_ && running_.empty()) return;
    const auto now = SteadyClock::now();
    for (auto& [id, running] : running_) {
      if (!running.exited && running.kill_at && now >= *running.kill_at) {
        ::kill(-running.pid, SIGKILL);
        running.kill_at = SteadyClock::time_point::max();
        std::fprintf(stderr, "mgpu serve: job %lld: still running after the grace period; SIGKILL sent\n",
                     static_cast<long long>(id));
      }
    }
    if (!stopping_) {
      std::vector<QueuedJob> queued;
      for (const auto& [id, job] : jobs_) {
        if (job.status == JobStatus::kQueued) queued.push_back({id, job.priority, job.gpus});
      }
      for (const Placement& placement : PlanStarts(queued, free_)) StartLocked(jobs_.at(placement.id), placement.slots);
    }
    wake_.wait_for(lock, kTick);
  }
}

std::vector<std::unique_ptr<WorkerGroup>> JobManager::ReapLocked() {
  std::vector<std::unique_ptr<WorkerGroup>> ended;
  for (auto it = running_.begin(); it != running_.end();) {
    Running& running = it->second;
    if (!running.exited) {
      ++it;
      continue;
    }
    JobRecord& job = jobs_.at(it->first);
    const coordinator::WorkerExit& exit = running.exit;
    job.ended_unix_ms = exit.unix_millis();
    const int exit_code = exit.signal() != 0 ? 128 + exit.signal() : exit.exit_code();
    job.exit_code = exit_code;
    job.result = ReadResult(job.run_folder);
    if (exit_code == 0) {
      job.status = JobStatus::kSucceeded;
    } else if (stopping_) {
      job.status = JobStatus::kInterrupted;
      job.message = fmt::format("{} while the job ran; `mgpu submit --resume {}` continues it from its last "
                                "checkpoint, if it wrote one",
                                stop_reason_, job.id);
    } else if (job.cancel_requested) {
      job.status = JobStatus::kCancelled;
      job.message = "cancelled while running (mgpu cancel)";
    } else {
      job.status = JobStatus::kFailed;
      job.message = job.result && !job.result->error.empty()
                        ? job.result->error
                        : fmt::format("mgpu run exited with code {}; its last output:\n{}", exit_code,
                                      fmt::format("{}", fmt::join(LastNonEmptyLines(exit.log_tail(), 5), "\n")));
    }
    for (int slot : job.devices) free_[static_cast<size_t>(slot)] = true;
    PersistLocked(job);
    std::fprintf(stderr, "mgpu serve: job %lld %s (exit code %d); %s free\n", static_cast<long long>(job.id),
                 JobStatusName(job.status), exit_code, SlotNames(options_.slots, job.devices).c_str());
    ended.push_back(std::move(running.group));
    it = running_.erase(it);
  }
  return ended;
}

std::vector<std::string> JobManager::JobEnvironment(const JobRecord& job) const {
  std::vector<std::pair<std::string, std::string>> set;
  if (options_.slots.cuda) {
    std::vector<std::string> gpus;
    for (int slot : job.devices) gpus.push_back(options_.slots.names[static_cast<size_t>(slot)]);
    set.emplace_back("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(gpus, ",")));
  }
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp == nullptr || *omp == '\0') {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const unsigned share = cores * static_cast<unsigned>(job.gpus) /
                           static_cast<unsigned>(options_.slots.count() * std::max(1, job.world_size));
    set.emplace_back("OMP_NUM_THREADS", std::to_string(std::max(1u, share)));
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    // The service's secret is not the job's business.
    if (name == "MGPU_TOKEN" || name == "MGPU_SERVER") continue;
    if (std::none_of(set.begin(), set.end(), [&](const auto& kv) { return kv.first == name; })) env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

void JobManager::StartLocked(JobRecord& job, const std::vector<int>& slots) {
  job.status = JobStatus::kRunning;
  job.devices = slots;
  job.started_unix_ms = UnixMillis();
  // Recorded before the process starts: a crash in between leaves an interrupted job, never one
  // that runs twice.
  PersistLocked(job);
  WorkerSpec spec;
  spec.argv = {LauncherExecutable(), "run", "--nproc-per-node", std::to_string(job.world_size)};
  spec.argv.insert(spec.argv.end(), job.worker_args.begin(), job.worker_args.end());
  spec.environment = JobEnvironment(job);
  spec.console_log = job.job_folder + "/console.log";
  const int64_t id = job.id;
  auto group = std::make_unique<WorkerGroup>([this, id](const coordinator::WorkerExit& exit) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Running& running = running_.at(id);
      running.exit = exit;
      running.exited = true;
    }
    wake_.notify_all();
  });
  Running& running = running_[id];
  try {
    group->Start({spec});
  } catch (const std::exception& e) {
    running_.erase(id);
    job.status = JobStatus::kFailed;
    job.ended_unix_ms = UnixMillis();
    job.exit_code = static_cast<int>(ExitCode::kFailure);
    job.message = fmt::format("the service could not start the job: {}", e.what());
    PersistLocked(job);
    std::fprintf(stderr, "mgpu serve: job %lld: %s\n", static_cast<long long>(id), job.message.c_str());
    return;
  }
  running.pid = group->pids().front();
  running.group = std::move(group);
  for (int slot : slots) free_[static_cast<size_t>(slot)] = false;
  std::fprintf(stderr, "mgpu serve: job %lld (%s) started on %s, %d process(es); output in %s\n",
               static_cast<long long>(id), job.config_name.c_str(), SlotNames(options_.slots, slots).c_str(),
               job.world_size, job.job_folder.c_str());
}

void JobManager::PersistLocked(const JobRecord& job) {
  try {
    journal_->Append(job);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mgpu serve: job %lld: cannot record its state: %s\n", static_cast<long long>(job.id), e.what());
  }
}

grpc::Status JobManager::Submit(const service::SubmitRequest& request, service::SubmitReply* reply) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the service is shutting down; submit later");
  Submission submission;
  submission.config_yaml = request.config_yaml();
  submission.config_name = request.config_name();
  submission.gpus = request.gpus() == 0 ? 1 : request.gpus();
  submission.priority = request.priority();
  if (request.resume_job_id() != 0) {
    const auto found = jobs_.find(request.resume_job_id());
    if (found == jobs_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          fmt::format("--resume {}: no such job (see mgpu status)", request.resume_job_id()));
    }
    const JobRecord& earlier = found->second;
    if (!HasEnded(earlier.status) || earlier.status == JobStatus::kSucceeded) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          fmt::format("--resume {}: job {} {}; only an interrupted, cancelled or failed job can be "
                                      "resumed",
                                      earlier.id, earlier.id,
                                      HasEnded(earlier.status) ? JobStatusName(earlier.status)
                                                               : fmt::format("is {}", JobStatusName(earlier.status))));
    }
    const std::string checkpoint = LatestCheckpoint(earlier.run_folder);
    if (!IsRegularFile(checkpoint)) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          fmt::format("--resume {}: the job wrote no checkpoint ({} does not exist), so there is "
                                      "nothing to continue from; submit its configuration again to start afresh",
                                      earlier.id, checkpoint));
    }
    if (request.gpus() != 0 && request.gpus() != earlier.gpus) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("--gpus {}: job {} ran on {} device(s), and its checkpoint continues only "
                                      "with as many; leave --gpus out",
                                      request.gpus(), earlier.id, earlier.gpus));
    }
    submission.config_yaml = earlier.config_yaml;
    submission.config_name = earlier.config_name;
    submission.gpus = earlier.gpus;
    submission.resumes_job_id = earlier.id;
    submission.resume_checkpoint = checkpoint;
  }
  const int64_t id = next_id_;
  const std::string folder = fmt::format("{}/jobs/{}", options_.state_dir, id);
  JobRecord job;
  try {
    job = PrepareJob(id, submission, folder, options_.slots, options_.checkpoint_every, options_.paths);
  } catch (const BadInputError& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, fmt::format("the service cannot prepare the job: {}", e.what()));
  }
  job.submitted_unix_ms = UnixMillis();
  try {
    journal_->Append(job);
  } catch (const std::exception& e) {
    RemoveTree(folder);
    return grpc::Status(grpc::StatusCode::INTERNAL, fmt::format("the service cannot record the job: {}", e.what()));
  }
  jobs_[id] = job;
  next_id_ = id + 1;
  reply->set_job_id(id);
  reply->set_queue_position(QueuePositionLocked(id));
  std::fprintf(stderr, "mgpu serve: job %lld (%s) queued: %d device(s), priority %d%s\n", static_cast<long long>(id),
               job.config_name.c_str(), job.gpus, job.priority,
               job.resumes_job_id != 0 ? fmt::format(", resuming job {}", job.resumes_job_id).c_str() : "");
  wake_.notify_all();
  return grpc::Status::OK;
}

int JobManager::QueuePositionLocked(int64_t id) const {
  std::vector<QueuedJob> queued;
  for (const auto& [job_id, job] : jobs_) {
    if (job.status == JobStatus::kQueued) queued.push_back({job_id, job.priority, job.gpus});
  }
  const std::vector<QueuedJob> order = QueueOrder(queued);
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].id == id) return static_cast<int>(i);
  }
  return 0;
}

void JobManager::FillJob(const JobRecord& r, service::Job* job) const {
  job->set_id(r.id);
  job->set_state(ToProto(r.status));
  job->set_config_name(r.config_name);
  job->set_model(r.model);
  job->set_dataset(r.dataset);
  job->set_mode(r.mode);
  job->set_gpus(r.gpus);
  job->set_priority(r.priority);
  for (int slot : r.devices) job->add_devices(slot);
  job->set_submitted_unix_ms(r.submitted_unix_ms);
  job->set_started_unix_ms(r.started_unix_ms);
  job->set_ended_unix_ms(r.ended_unix_ms);
  if (r.exit_code) job->set_exit_code(*r.exit_code);
  job->set_message(r.message);
  job->set_run_folder(r.run_folder);
  job->set_resumes_job_id(r.resumes_job_id);
  job->set_resumable(Resumable(r));
  job->set_cancel_requested(r.cancel_requested && r.status == JobStatus::kRunning);
  job->set_world_size(r.world_size);
  if (r.started_unix_ms != 0 && r.status != JobStatus::kSucceeded) {
    if (const std::optional<JobProgress> progress = ReadProgress(r.run_folder)) {
      service::Progress* p = job->mutable_progress();
      p->set_step(progress->step);
      p->set_epoch(progress->epoch);
      p->set_epochs(r.epochs);
      p->set_max_steps(r.max_steps);
      p->set_loss(progress->loss);
      p->set_images_per_second(progress->images_per_second);
    }
  }
  if (r.result) {
    service::Summary* s = job->mutable_summary();
    s->set_status(r.result->status);
    s->set_test_accuracy(r.result->test_accuracy);
    s->set_test_loss(r.result->test_loss);
    s->set_steps(r.result->steps);
    s->set_total_seconds(r.result->total_seconds);
    s->set_images_per_second(r.result->images_per_second);
    s->set_resumed_from(r.result->resumed_from);
  }
}

void JobManager::List(service::ListJobsReply* reply) const {
  std::vector<JobRecord> queued, running, ended;
  std::vector<int> positions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<QueuedJob> waiting;
    for (const auto& [id, job] : jobs_) {
      if (job.status == JobStatus::kQueued) waiting.push_back({id, job.priority, job.gpus});
      if (job.status == JobStatus::kRunning) running.push_back(job);
      if (HasEnded(job.status)) ended.push_back(job);
    }
    for (const QueuedJob& q : QueueOrder(waiting)) queued.push_back(jobs_.at(q.id));
    for (size_t slot = 0; slot < free_.size(); ++slot) {
      if (free_[slot]) reply->add_free_devices(static_cast<int>(slot));
    }
  }
  for (const std::string& name : options_.slots.names) reply->add_devices(name);
  // Files are read (progress, checkpoints) without holding the lock.
  for (size_t i = 0; i < queued.size(); ++i) {
    service::Job* job = reply->add_jobs();
    FillJob(queued[i], job);
    job->set_queue_position(static_cast<int>(i));
  }
  for (const JobRecord& job : running) FillJob(job, reply->add_jobs());
  for (const JobRecord& job : ended) FillJob(job, reply->add_jobs());
}

grpc::Status JobManager::Get(int64_t id, service::Job* job) const {
  JobRecord record;
  int position = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = jobs_.find(id);
    if (found == jobs_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no job {} (see mgpu status)", id));
    }
    record = found->second;
    if (record.status == JobStatus::kQueued) position = QueuePositionLocked(id);
  }
  FillJob(record, job);
  job->set_queue_position(position);
  return grpc::Status::OK;
}

grpc::Status JobManager::Cancel(int64_t id, service::CancelReply* reply) {
  JobRecord record;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = jobs_.find(id);
    if (found == jobs_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no job {} (see mgpu status)", id));
    }
    JobRecord& job = found->second;
    if (HasEnded(job.status)) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          fmt::format("job {} has already ended ({})", id, JobStatusName(job.status)));
    }
    if (job.status == JobStatus::kQueued) {
      job.status = JobStatus::kCancelled;
      job.ended_unix_ms = UnixMillis();
      job.message = "cancelled before it started (mgpu cancel)";
      PersistLocked(job);
      std::fprintf(stderr, "mgpu serve: job %lld cancelled before it started\n", static_cast<long long>(id));
    } else if (!job.cancel_requested) {
      job.cancel_requested = true;
      PersistLocked(job);
      SignalLocked(id, running_.at(id));
    }
    record = job;
  }
  wake_.notify_all();
  FillJob(record, reply->mutable_job());
  return grpc::Status::OK;
}

grpc::Status JobManager::LogFile(int64_t id, std::optional<int> rank, std::string* path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = jobs_.find(id);
  if (found == jobs_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no job {} (see mgpu status)", id));
  const JobRecord& job = found->second;
  if (!rank) {
    *path = job.job_folder + "/console.log";
    return grpc::Status::OK;
  }
  if (*rank < 0 || *rank >= job.world_size) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        job.world_size == 1 ? fmt::format("--rank {}: job {} has one process, rank 0", *rank, id)
                                            : fmt::format("--rank {}: job {} has ranks 0 to {}", *rank, id,
                                                          job.world_size - 1));
  }
  *path = fmt::format("{}/logs/rank-{}.console.log", job.run_folder, *rank);
  return grpc::Status::OK;
}

}  // namespace mgpu
