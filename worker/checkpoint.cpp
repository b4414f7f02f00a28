#include "worker/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>

#ifdef MGPU_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include "common/files.h"
#include "common/status.h"
#include "worker/checkpoint_file.h"

namespace mgpu {
namespace {

// The identity fields in the order they are checked, with the flag users change to match.
const std::vector<std::pair<std::string, std::string>>& IdentityFields() {
  static const std::vector<std::pair<std::string, std::string>> fields = {
      {"model", "--model"},           {"dataset", "--dataset"},       {"batch_size", "--batch-size"},
      {"world_size", "world size"},   {"seed", "--seed"},             {"optimizer", "--optimizer"},
      {"precision", "--precision"},   {"grad_accum", "--grad-accum"}, {"scheduler", "--scheduler"}};
  return fields;
}

nlohmann::json IdentityJson(const CheckpointIdentity& identity) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& [name, shape] : identity.parameter_shapes) shapes.push_back({name, shape});
  return {{"model", identity.model},
          {"dataset", identity.dataset},
          {"batch_size", identity.batch_size},
          {"world_size", identity.world_size},
          {"seed", identity.seed},
          {"optimizer", identity.optimizer},
          {"precision", identity.precision},
          {"grad_accum", identity.grad_accum},
          {"scheduler", identity.scheduler},
          {"parameter_shapes", shapes}};
}

void CheckIdentity(const nlohmann::json& stored, const CheckpointIdentity& expected, const std::string& path) {
  const nlohmann::json wanted = IdentityJson(expected);
  for (const auto& [field, flag] : IdentityFields()) {
    if (stored.at(field) != wanted.at(field)) {
      throw BadInputError(fmt::format(
          "checkpoint {} was written by a run with {} {}, but this run has {} {}; resume with the original run's "
          "options, or start a new run without --resume",
          path, flag, stored.at(field).dump(), flag, wanted.at(field).dump()));
    }
  }
  const nlohmann::json& stored_shapes = stored.at("parameter_shapes");
  const nlohmann::json& wanted_shapes = wanted.at("parameter_shapes");
  for (size_t i = 0; i < std::max(stored_shapes.size(), wanted_shapes.size()); ++i) {
    if (i < stored_shapes.size() && i < wanted_shapes.size() && stored_shapes[i] == wanted_shapes[i]) continue;
    const auto describe = [](const nlohmann::json& shapes, size_t k) {
      return k < shapes.size() ? fmt::format("'{}' of shape {}", shapes[k][0].get<std::string>(), shapes[k][1].dump())
                               : std::string("nothing");
    };
    throw BadInputError(fmt::format("checkpoint {}: its parameter {} is {}, this model's is {} (the model's layers "
                                    "differ: other data set shape or augmentation size?)",
                                    path, i, describe(stored_shapes, i), describe(wanted_shapes, i)));
  }
}

torch::Tensor CpuGeneratorState() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void SetCpuGeneratorState(const torch::Tensor& state) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

#ifdef MGPU_WITH_CUDA
at::Generator CudaGenerator(const torch::Device& device) {
  return at::cuda::detail::getDefaultCUDAGenerator(device.index());
}
#endif

c10::IValue TensorDict(const torch::OrderedDict<std::string, torch::Tensor>& named) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& item : named) dict.insert(item.key(), item.value().detach().cpu());
  return dict;
}

// Copies the payload's tensors into the module's tensors of the same names.
void LoadNamed(const c10::impl::GenericDict& stored, const torch::OrderedDict<std::string, torch::Tensor>& into,
               const std::string& what, const std::string& path) {
  torch::NoGradGuard no_grad;
  for (const auto& item : into) {
    const auto found = stored.find(item.key());
    if (found == stored.end()) {
      throw BadInputError(fmt::format("checkpoint {} has no {} '{}'", path, what, item.key()));
    }
    const torch::Tensor value = found->value().toTensor();
    if (value.sizes() != item.value().sizes()) {
      throw BadInputError(fmt::format("checkpoint {}: {} '{}' has shape {}, the model's {}", path, what, item.key(),
                                      fmt::join(value.sizes(), "x"), fmt::join(item.value().sizes(), "x")));
    }
    item.value().copy_(value);
  }
}

std::vector<torch::Tensor> TensorsOf(const c10::IValue& list) {
  std::vector<torch::Tensor> tensors;
  for (const c10::IValue& value : list.toListRef()) tensors.push_back(value.isNone() ? torch::Tensor() : value.toTensor());
  return tensors;
}

c10::IValue ListOf(const std::vector<torch::Tensor>& tensors) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (const auto& t : tensors) list.push_back(t.defined() ? c10::IValue(t.detach().cpu()) : c10::IValue());
  return list;
}

}  // namespace

CheckpointIdentity CheckpointIdentity::Of(const TrainConfig& config, int world_size, torch::nn::Module& model) {
  CheckpointIdentity identity;
  identity.model = config.model;
  identity.dataset = config.dataset;
  identity.optimizer = config.optimizer;
  identity.precision = config.precision;
  identity.scheduler = config.scheduler;
  identity.batch_size = config.batch_size;
  identity.world_size = world_size;
  identity.grad_accum = config.grad_accum;
  identity.seed = config.seed;
  for (const auto& item : model.named_parameters()) {
    identity.parameter_shapes.emplace_back(item.key(), item.value().sizes().vec());
  }
  return identity;
}

std::string SerializeCheckpoint(const CheckpointIdentity& identity, TrainingParts& parts,
                                const TrainingPosition& position) {
  const LrScheduler::State& schedule = parts.scheduler.state();
  const nlohmann::json header = {
      {"format", "mgpu-checkpoint"},
      {"identity", IdentityJson(identity)},
      {"position",
       {{"epoch", position.epoch},
        {"step", position.step},
        {"epoch_steps", position.epoch_steps},
        {"micro_batches", position.micro_batches},
        {"images_seen", position.images_seen}}},
      {"epochs_detail", position.epochs_detail},
      // JSON has no infinity: a plateau schedule's best loss before its first epoch is null.
      {"scheduler",
       {{"steps", schedule.steps},
        {"epochs", schedule.epochs},
        {"lr", schedule.lr},
        {"best", std::isfinite(schedule.best) ? nlohmann::json(schedule.best) : nlohmann::json()},
        {"bad_epochs", schedule.bad_epochs}}},
  };
  c10::impl::GenericDict payload(c10::StringType::get(), c10::AnyType::get());
  payload.insert("parameters", TensorDict(parts.model.named_parameters()));
  payload.insert("buffers", TensorDict(parts.model.named_buffers()));
  payload.insert("optimizer", ListOf(parts.optimizer.StateTensors()));
  payload.insert("scaler", ListOf(parts.scaler.StateTensors()));
  payload.insert("epoch_loss", torch::stack({position.loss_sum, position.loss_images}).to(torch::kDouble).cpu());
  payload.insert("rng_cpu", CpuGeneratorState());
#ifdef MGPU_WITH_CUDA
  if (parts.device.is_cuda()) {
    at::Generator generator = CudaGenerator(parts.device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    payload.insert("rng_cuda", generator.get_state());
  }
#endif
  const std::vector<char> pickled = torch::pickle_save(payload);
  return EncodeCheckpointFile({header.dump(), std::string(pickled.begin(), pickled.end())});
}

std::string ResolveResumePath(const std::string& given) {
  if (IsDirectory(given)) {
    const std::string latest = given + "/checkpoints/latest.ckpt";
    if (!IsRegularFile(latest)) {
      throw BadInputError(fmt::format("--resume {}: the folder has no checkpoints/latest.ckpt (was the run started "
                                      "with --checkpoint-every N?); pass a checkpoint file instead",
                                      given));
    }
    return latest;
  }
  if (!PathExists(given)) {
    throw BadInputError(fmt::format("--resume {}: no such checkpoint file or run folder", given));
  }
  return given;
}

TrainingPosition RestoreCheckpoint(const std::string& path, const CheckpointIdentity& expected, TrainingParts& parts) {
  const CheckpointFileContents contents = DecodeCheckpointFile(ReadFile(path), path);
  // Past the checksum the file is as written; a failure here means another writer's format.
  try {
    const nlohmann::json header = nlohmann::json::parse(contents.header);
    CheckIdentity(header.at("identity"), expected, path);
    const c10::IValue loaded = torch::pickle_load(std::vector<char>(contents.payload.begin(), contents.payload.end()));
    const c10::impl::GenericDict payload = loaded.toGenericDict();
    LoadNamed(payload.at("parameters").toGenericDict(), parts.model.named_parameters(), "parameter", path);
    LoadNamed(payload.at("buffers").toGenericDict(), parts.model.named_buffers(), "buffer", path);
    parts.optimizer.LoadStateTensors(TensorsOf(payload.at("optimizer")));
    parts.scaler.LoadStateTensors(TensorsOf(payload.at("scaler")));

    const nlohmann::json& schedule = header.at("scheduler");
    LrScheduler::State state;
    state.steps = schedule.at("steps").get<int64_t>();
    state.epochs = schedule.at("epochs").get<int64_t>();
    state.lr = schedule.at("lr").get<double>();
    state.best = schedule.at("best").is_null() ? std::numeric_limits<double>::infinity()
                                               : schedule.at("best").get<double>();
    state.bad_epochs = schedule.at("bad_epochs").get<int64_t>();
    parts.scheduler.Restore(state);
    parts.optimizer.set_lr(state.lr);

    SetCpuGeneratorState(payload.at("rng_cpu").toTensor());
#ifdef MGPU_WITH_CUDA
    if (parts.device.is_cuda() && payload.contains("rng_cuda")) {
      at::Generator generator = CudaGenerator(parts.device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(payload.at("rng_cuda").toTensor());
    }
#endif

    const nlohmann::json& at = header.at("position");
    TrainingPosition position;
    position.epoch = at.at("epoch").get<int64_t>();
    position.step = at.at("step").get<int64_t>();
    position.epoch_steps = at.at("epoch_steps").get<int64_t>();
    position.micro_batches = at.at("micro_batches").get<int64_t>();
    position.images_seen = at.at("images_seen").get<int64_t>();
    const torch::Tensor epoch_loss = payload.at("epoch_loss").toTensor().to(parts.device);  // (2) double
    position.loss_sum = epoch_loss[0].clone();
    position.loss_images = epoch_loss[1].clone();
    position.epochs_detail = header.at("epochs_detail");
    return position;
  } catch (const nlohmann::json::exception& e) {
    throw BadInputError(fmt::format("checkpoint {}: its header is not an mgpu checkpoint's: {}", path, e.what()));
  } catch (const c10::Error& e) {
    throw BadInputError(fmt::format("checkpoint {}: its tensors cannot be loaded: {}", path, e.what_without_backtrace()));
  }
}

CheckpointWriter::CheckpointWriter(std::string folder, int64_t every, bool writes)
    : folder_(std::move(folder)), every_(every), writes_(writes) {}

std::string CheckpointWriter::Write(int64_t step, const std::function<std::string()>& serialize) {
  if (!writes_) return "";
  MakeDirectories(folder_);
  const std::string path = fmt::format("{}/step-{}.ckpt", folder_, step);
  const std::string bytes = serialize();
  WriteFileAtomically(path, bytes);
  // latest.ckpt: a second name for the same bytes, swapped in by rename so that it is always a
  // whole checkpoint; a copy where the file system has no hard links.
  const std::string latest = folder_ + "/latest.ckpt";
  const std::string temporary = fmt::format("{}.tmp.{}", latest, ::getpid());
  ::unlink(temporary.c_str());
  if (::link(path.c_str(), temporary.c_str()) != 0) {
    WriteFileAtomically(latest, bytes);
  } else if (::rename(temporary.c_str(), latest.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw Error(ExitCode::kFailure, fmt::format("cannot rename {} to {}: {}", temporary, latest, why));
  }
  SyncDirectory(folder_);
  return path;
}

}  // namespace mgpu
