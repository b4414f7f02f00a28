// One training process's whole run: data → model → optimizer → epochs of training and
// evaluation, with the timings, metrics and summary the contract describes.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "ddp/communicator.h"
#include "ddp/world.h"
#include "report/run_summary.h"
#include "worker/run_outputs.h"
#include "worker/stop_agreement.h"
#include "worker/train_config.h"

namespace mgpu {

// The device this rank trains on: --device, where `auto` and `cuda` mean cuda:<local rank>
// when CUDA is available. Throws BadInputError for a device that is not there.
torch::Device ResolveDevice(const std::string& requested, const WorldInfo& world);

// Trains as `config` says and fills `summary` (status "ok"). Throws mgpu::Error (bad input,
// divergence, collective failure) or other exceptions; the caller turns them into a failed
// summary. `summary` receives the fields known so far even when it throws, so a failure report
// keeps the configuration and the epochs already done. `communicator` is null for --mode single
// and joins the ranks of a --mode ddp job.
// A stop signal (common/stop_signal.h) ends the training at the next step boundary, the same
// one on every rank: the checkpoint of that step is written (--resume continues it exactly), the
// weights as at a normal end, and `summary` gets status "interrupted" and an "interrupted"
// record (signal, rank, step, checkpoint); the request is returned. nullopt: the run completed.
std::optional<StopRequest> Train(const TrainConfig& config, const WorldInfo& world, const torch::Device& device,
           Communicator* communicator, RunOutputs& outputs, RunSummary& summary);

}  // namespace mgpu
