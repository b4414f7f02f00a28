// A worker's side of the coordinator service (proto/coordinator/coordinator.proto), used when
// `mgpu run` started it: MGPU_COORDINATOR holds the coordinator's address, MGPU_TOKEN its token
// (if any) and MGPU_TLS_CA the CA certificate to trust (if it serves TLS).
//
// Register once before joining the other ranks, StartHeartbeats right after, Finish at the end.
// The heartbeat thread reads WorkerStatus::Current() and sends it every
// Assignment.heartbeat_interval_ms until Finish. Every call has a deadline: a launcher that
// stopped answering (SIGSTOP, a dead host) holds no worker for ever.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "coordinator/coordinator.grpc.pb.h"
#include "ddp/world.h"
#include "rpc/channel.h"

namespace mgpu {


class CoordinatorClient {
 public:
  // nullptr when MGPU_COORDINATOR is unset (the worker runs alone, under torchrun or mpirun).
  static std::unique_ptr<CoordinatorClient> FromEnvironment(const EnvLookup& env);
  CoordinatorClient(const std::string& address, std::string token, const std::string& tls_ca_file);
  ~CoordinatorClient();  // stops the heartbeat thread

  // How long a heartbeat thread that gave up on its launcher waits for the worker to end on its
  // own (LauncherLost) before it ends the process with exit code 1.
  static constexpr std::chrono::seconds kExitGrace{10};
  // Each call of Finish's (its last heartbeat, the report) has this long.
  static constexpr std::chrono::seconds kFinishDeadline{5};

  // Called once, on the heartbeat thread, with the error the worker should stop with when its
  // launcher has answered no heartbeat for the launcher timeout.
  using LauncherLost = std::function<void(const std::string& reason)>;

  // Throws mgpu::Error when the coordinator refuses the worker (the message is the
  // coordinator's) or cannot be reached within 30 s.
  coordinator::Assignment Register(const WorldInfo& world, const std::string& device);
  // Sends a heartbeat every `interval` from a thread of its own, each call with a deadline. When
  // none is answered for `launcher_timeout` (Assignment.heartbeat_timeout_ms), the launcher is
  // taken for stopped or dead: `on_lost` runs once, and if Finish is not called within
  // kExitGrace after it (the training thread is stuck where it cannot notice), the process ends
  // with exit code 1.
  void StartHeartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds launcher_timeout,
                       LauncherLost on_lost);
  // Stops the heartbeats, then, unless the launcher is known lost, sends a last heartbeat (the
  // latest metrics row) and reports the outcome; it skips the report when that heartbeat goes
  // unanswered, and retries it once when the connection fails. Returns within
  // 2 x kFinishDeadline. Best effort: a coordinator that is gone does not change the worker's
  // exit code.
  void Finish(const coordinator::FinishRequest& outcome);

  const std::string& address() const { return address_; }

 private:
  // One heartbeat with `deadline`; `cancellable`: StopHeartbeats cancels it (the heartbeat
  // thread's), and it is not sent once they are stopped.
  grpc::Status SendHeartbeat(std::chrono::milliseconds deadline, bool cancellable);
  void HeartbeatLoop(std::chrono::milliseconds interval, std::chrono::milliseconds launcher_timeout,
                     const LauncherLost& on_lost);
  // The launcher stopped answering: tells the worker, then gives it kExitGrace to end.
  void GiveUpOnLauncher(const std::string& reason, const LauncherLost& on_lost);
  void StopHeartbeats();

  std::string address_;
  std::string token_;
  bool tls_ = false;
  std::unique_ptr<coordinator::Coordinator::Stub> stub_;
  int rank_ = -1;
  std::thread heartbeat_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;                        // guarded by mutex_
  bool launcher_lost_ = false;                   // guarded by mutex_
  grpc::ClientContext* in_flight_ = nullptr;     // the heartbeat thread's call; guarded by mutex_
};

}  // namespace mgpu
