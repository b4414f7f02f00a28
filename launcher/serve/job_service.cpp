#include "launcher/serve/job_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/status.h"
#include "launcher/serve/peer_socket.h"
#include "launcher/serve/utf8_text.h"
#include "rpc/grpc_server.h"
#include "service/job_service.grpc.pb.h"

namespace mgpu {
namespace {

constexpr int kMaxMessageBytes = 1 << 20;
constexpr size_t kMaxConfigBytes = 256 * 1024;
constexpr size_t kMaxConfigNameBytes = 255;
constexpr int kMaxPriority = 1000;
constexpr int kMaxGpus = 1024;
constexpr int kMaxRank = 65535;
constexpr size_t kMaxStreams = 256;
constexpr size_t kLogChunkBytes = 64 * 1024;
constexpr auto kPollInterval = std::chrono::milliseconds(250);

grpc::Status Invalid(const std::string& message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); }

grpc::Status CheckId(int64_t id) {
  return id > 0 ? grpc::Status::OK : Invalid(fmt::format("job id {}: job ids are positive integers", id));
}

grpc::Status CheckSubmit(const service::SubmitRequest& r) {
  if (r.config_yaml().size() > kMaxConfigBytes) {
    return Invalid(fmt::format("the configuration is {} bytes; at most {} are accepted", r.config_yaml().size(),
                               kMaxConfigBytes));
  }
  if (r.config_name().size() > kMaxConfigNameBytes) {
    return Invalid(fmt::format("config_name is {} bytes; at most {}", r.config_name().size(), kMaxConfigNameBytes));
  }
  for (char c : r.config_name()) {
    if (static_cast<unsigned char>(c) < 0x20) return Invalid("config_name holds control characters");
  }
  try {
    RequireUtf8(r.config_name(), "config_name");
    RequireUtf8(r.config_yaml(), r.config_name().empty() ? "the configuration" : r.config_name());
  } catch (const BadInputError& e) {
    return Invalid(e.what());
  }
  if (r.priority() < -kMaxPriority || r.priority() > kMaxPriority) {
    return Invalid(fmt::format("--priority {}: expected -{} to {}", r.priority(), kMaxPriority, kMaxPriority));
  }
  if (r.gpus() < 0 || r.gpus() > kMaxGpus) return Invalid(fmt::format("--gpus {}: expected 1 to {}", r.gpus(), kMaxGpus));
  if (r.resume_job_id() < 0) return Invalid(fmt::format("--resume {}: job ids are positive integers", r.resume_job_id()));
  if (r.resume_job_id() > 0 && !r.config_yaml().empty()) {
    return Invalid("a resumed job runs with the earlier job's configuration; send no configuration with --resume");
  }
  return grpc::Status::OK;
}

bool Ended(service::JobState state) { return state != service::QUEUED && state != service::RUNNING; }

// Something the JobStreams thread polls.
class Pollable {
 public:
  virtual ~Pollable() = default;
  virtual void Poll() = 0;
};

// A streaming call refused at once with `status`.
template <typename Message>
class RefusedStream : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

// The open streams, and the thread that polls them.
class JobStreams {
 public:
  JobStreams() : thread_([this] { Loop(); }) {}
  ~JobStreams() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  // False when kMaxStreams are open.
  bool TryAdd(Pollable* stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_.size() >= kMaxStreams) return false;
    open_.insert(stream);
    return true;
  }
  void Remove(Pollable* stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.erase(stream);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      // Holding the lock keeps every stream alive while it is polled: a stream removes itself
      // (under this lock) before it is deleted.
      for (Pollable* stream : open_) stream->Poll();
      wake_.wait_for(lock, kPollInterval, [this] { return stopping_; });
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::set<Pollable*> open_;
  bool stopping_ = false;
  std::thread thread_;
};

namespace {

// What a stream sends next: a message, and/or the end of the call.
template <typename Message>
struct Next {
  std::optional<Message> message;
  bool done = false;
  grpc::Status status = grpc::Status::OK;  // with done
};

// A server stream fed by a producer, asked for its next message when the previous one is out and
// on every poll. At most one write is in flight; the producer runs under the stream's lock.
template <typename Message>
class PolledStream : public grpc::ServerWriteReactor<Message>, public Pollable {
 public:
  using Producer = std::function<Next<Message>()>;

  // Call only after JobStreams::TryAdd(stream) succeeded; Start() then sends the first message.
  PolledStream(JobStreams& streams, Producer producer) : streams_(streams), producer_(std::move(producer)) {}
  void Start() { Poll(); }

  void Poll() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!writing_ && !finished_) Advance();
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    if (finished_) return;
    if (!ok || cancelled_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed"));
    } else if (finish_after_write_) {
      FinishLocked(final_status_);
    } else {
      Advance();
    }
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    if (!writing_ && !finished_) FinishLocked(grpc::Status::CANCELLED);
  }
  void OnDone() override {
    streams_.Remove(this);
    delete this;
  }

 private:
  void Advance() {
    Next<Message> next;
    try {
      next = producer_();
    } catch (const std::exception& e) {
      next = Next<Message>{std::nullopt, true, grpc::Status(grpc::StatusCode::INTERNAL, e.what())};
    }
    if (next.message) {
      message_ = std::move(*next.message);
      writing_ = true;
      finish_after_write_ = next.done;
      final_status_ = next.status;
      this->StartWrite(&message_);
    } else if (next.done) {
      FinishLocked(next.status);
    }
  }
  void FinishLocked(const grpc::Status& status) {
    finished_ = true;
    this->Finish(status);
  }

  JobStreams& streams_;
  Producer producer_;
  std::mutex mutex_;
  Message message_;
  bool writing_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  bool finish_after_write_ = false;
  grpc::Status final_status_;
};

}  // namespace

class JobServer::Service : public service::JobService::CallbackService {
 public:
  Service(JobManager& manager, JobStreams& streams, std::string token)
      : manager_(manager), streams_(streams), token_(std::move(token)) {}

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* context, const service::SubmitRequest* request,
                                   service::SubmitReply* reply) override {
    return Answer(context, [&] {
      const grpc::Status valid = CheckSubmit(*request);
      return valid.ok() ? manager_.Submit(*request, reply) : valid;
    });
  }
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context, const service::ListJobsRequest*,
                                     service::ListJobsReply* reply) override {
    return Answer(context, [&] {
      manager_.List(reply);
      return grpc::Status::OK;
    });
  }
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context, const service::GetJobRequest* request,
                                   service::Job* reply) override {
    return Answer(context, [&] {
      const grpc::Status valid = CheckId(request->id());
      return valid.ok() ? manager_.Get(request->id(), reply) : valid;
    });
  }
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* context, const service::CancelRequest* request,
                                   service::CancelReply* reply) override {
    return Answer(context, [&] {
      const grpc::Status valid = CheckId(request->id());
      return valid.ok() ? manager_.Cancel(request->id(), reply) : valid;
    });
  }

  grpc::ServerWriteReactor<service::Job>* Watch(grpc::CallbackServerContext* context,
                                                const service::WatchRequest* request) override {
    grpc::Status allowed = Authenticate(*context);
    if (allowed.ok()) allowed = CheckId(request->id());
    if (!allowed.ok()) return new RefusedStream<service::Job>(allowed);
    const int64_t id = request->id();
    JobManager& manager = manager_;
    auto producer = [&manager, id, last = std::string()]() mutable -> Next<service::Job> {
      service::Job job;
      const grpc::Status status = manager.Get(id, &job);
      if (!status.ok()) return {std::nullopt, true, status};
      std::string bytes = job.SerializeAsString();
      const bool ended = Ended(job.state());
      if (bytes == last) return {std::nullopt, ended, grpc::Status::OK};
      last = std::move(bytes);
      return {std::move(job), ended, grpc::Status::OK};
    };
    return Open<service::Job>(producer);
  }

  grpc::ServerWriteReactor<service::LogChunk>* Logs(grpc::CallbackServerContext* context,
                                                    const service::LogsRequest* request) override {
    grpc::Status allowed = Authenticate(*context);
    if (allowed.ok()) allowed = CheckId(request->id());
    if (allowed.ok() && request->has_rank() && (request->rank() < 0 || request->rank() > kMaxRank)) {
      allowed = Invalid(fmt::format("--rank {}: ranks are 0 to the job's world size - 1", request->rank()));
    }
    std::string path;
    if (allowed.ok()) {
      try {
        allowed = manager_.LogFile(request->id(), request->has_rank() ? std::optional<int>(request->rank()) : std::nullopt,
                                   &path);
      } catch (const std::exception& e) {
        allowed = grpc::Status(grpc::StatusCode::INTERNAL, e.what());
      }
    }
    if (!allowed.ok()) return new RefusedStream<service::LogChunk>(allowed);
    const int64_t id = request->id();
    const bool follow = request->follow();
    JobManager& manager = manager_;
    auto producer = [&manager, id, path, follow, offset = off_t{0}]() mutable -> Next<service::LogChunk> {
      bool ended = true;
      if (follow) {
        // Asked before reading, so that output written just before the end is still sent.
        service::Job job;
        ended = !manager.Get(id, &job).ok() || Ended(job.state());
      }
      std::string data(kLogChunkBytes, '\0');
      ssize_t n = -1;
      if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
        n = ::pread(fd, data.data(), data.size(), offset);
        ::close(fd);
      }
      if (n > 0) {
        offset += n;
        data.resize(static_cast<size_t>(n));
        service::LogChunk chunk;
        chunk.set_data(std::move(data));
        return {std::move(chunk), false, grpc::Status::OK};
      }
      return {std::nullopt, ended, grpc::Status::OK};
    };
    return Open<service::LogChunk>(producer);
  }

 private:
  grpc::Status Authenticate(const grpc::CallbackServerContext& context) const {
    if (IsSocketPeer(context.peer())) return grpc::Status::OK;  // its uid was checked when it connected
    if (token_.empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this mgpu serve takes calls over TCP only with a token, and it has none");
    }
    return CheckToken(context, token_,
                      "this mgpu serve requires a token: pass the one it was started with in --token-file FILE "
                      "(or MGPU_TOKEN)",
                      "wrong token: pass the token this mgpu serve was started with in --token-file FILE (or "
                      "MGPU_TOKEN)");
  }

  template <typename Body>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, Body body) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status status = Authenticate(*context);
    if (status.ok()) {
      try {
        status = body();
      } catch (const std::exception& e) {
        status = grpc::Status(grpc::StatusCode::INTERNAL, fmt::format("mgpu serve: {}", e.what()));
      }
    }
    reactor->Finish(status);
    return reactor;
  }

  template <typename Message>
  grpc::ServerWriteReactor<Message>* Open(typename PolledStream<Message>::Producer producer) {
    auto* stream = new PolledStream<Message>(streams_, std::move(producer));
    if (!streams_.TryAdd(stream)) {
      delete stream;
      return new RefusedStream<Message>(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          fmt::format("{} streams (watch, logs) are open already; close some and try again", kMaxStreams)));
    }
    stream->Start();
    return stream;
  }

  JobManager& manager_;
  JobStreams& streams_;
  std::string token_;
};

JobServer::JobServer(JobManager& manager, const JobEndpoints& endpoints)
    : streams_(std::make_unique<JobStreams>()),
      service_(std::make_unique<Service>(manager, *streams_, endpoints.security.token)) {
  StartedServer started = StartGrpcServer(*service_, endpoints.tcp_host, endpoints.tcp_port, endpoints.security,
                                          kMaxMessageBytes, "pick another --listen, or stop what holds it");
  server_ = std::move(started.server);
  if (!endpoints.tcp_host.empty()) tcp_address_ = JoinHostPort(endpoints.tcp_host, started.port);
  if (!endpoints.socket_path.empty()) {
    socket_ = std::make_unique<PeerSocket>(endpoints.socket_path, endpoints.socket_uids, *server_);
  }
}

std::string JobServer::socket_address() const { return socket_ ? socket_->address() : ""; }

JobServer::~JobServer() {
  socket_.reset();  // admits no more connections
  // Open streams are cancelled at the deadline; each finishes on its cancellation.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
  streams_.reset();
}

}  // namespace mgpu
