// `mgpu run`: one training job of --nnodes x --nproc-per-node mgpu-worker processes.
//
// Node 0's launcher validates the worker flags, checks the rendezvous port, serves the
// Coordinator (launcher/run/coordinator_server.h), starts its workers with torchrun's environment
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus
// MGPU_COORDINATOR (and MGPU_TOKEN / MGPU_TLS_CA), and supervises:
//   - a failed worker (an exit with a code or signal, or a reported error) stops the job: once
//     every rank's fate is known, or 3 s after the first failure, the root cause is chosen by
//     launcher/run/root_cause.h's rule (a rank's own failure before a peer's vanishing, then the
//     earliest); every other worker is stopped (SIGTERM to its process group, SIGKILL after
//     3 s), the rank, host, code or signal and last error are printed and stored in
//     summary.json, and the job exits with that code (128 + signal for a signal);
//   - workers end by themselves when this launcher stops answering their heartbeats for
//     --heartbeat-timeout (worker/coordinator_client.h);
//   - a rank silent, or training without a new step, for --heartbeat-timeout is hung: where
//     every rank is gets printed and the job stops with exit code 1;
//   - SIGINT, SIGTERM, SIGUSR1 and SIGHUP (unless ignored, as under nohup) are forwarded to every
//     worker, which stops at its next step boundary (all ranks at the same one) and writes a
//     checkpoint; SIGKILL after 30 s; the job exits 128 + signal, summary.json status
//     "interrupted". A second SIGINT/SIGTERM/SIGHUP ends it at once;
//   - --max-restarts N starts the whole group again after a failure, with
//     --resume <out>/checkpoints/latest.ckpt when that file exists.
// Other nodes' launchers join node 0's coordinator, start their workers (which register with
// node 0 directly), report their workers' exits, and stop when node 0 says the job is over.
#pragma once

#include <string>
#include <vector>

#include "launcher/run/run_options.h"
#include "config/train_config.h"

namespace mgpu {

// The workers' configuration as `mgpu run` checks it before any worker starts: the worker flags
// parsed (ParseWorkerCommandLine: --config file, option table, relations), without the options
// mgpu run sets for each worker (rank, world size, local rank, master address and port). `mgpu
// serve` checks a submitted job with it too. Throws BadInputError naming the flag, file or key.
TrainConfig ParseJobWorkerConfig(const std::vector<std::string>& worker_args);

// Returns the job's exit code. Throws BadInputError (exit 2) for bad flags or worker
// configuration, a taken port, and the like, before any worker starts.
int RunJob(const RunOptions& options);

}  // namespace mgpu
