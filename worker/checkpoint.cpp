#include "worker/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

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

// The error for a value no run writes: its checksum held, so the file was rewritten.
BadInputError Altered(const std::string& path, const std::string& what) {
  return BadInputError(fmt::format("checkpoint {}: {}; no run writes that (the file was changed and its checksum "
                                   "recomputed, or written by another program): resume from another checkpoint "
                                   "(e.g. an earlier step-N.ckpt in the same folder) or start without --resume",
                                   path, what));
}

// `stored` against the tensor the run has in its place: shape and dtype as the run's, and finite.
void CheckTensor(const torch::Tensor& stored, const torch::Tensor& expected, const std::string& what,
                 const std::string& path) {
  if (!stored.defined()) throw BadInputError(fmt::format("checkpoint {} has no {}", path, what));
  if (stored.sizes() != expected.sizes() || stored.scalar_type() != expected.scalar_type()) {
    throw BadInputError(fmt::format("checkpoint {}: {} is {} of shape [{}], this run's is {} of shape [{}]", path,
                                    what, c10::toString(stored.scalar_type()), fmt::join(stored.sizes(), "x"),
                                    c10::toString(expected.scalar_type()), fmt::join(expected.sizes(), "x")));
  }
  if (stored.is_floating_point() && !torch::isfinite(stored).all().item<bool>()) {
    throw Altered(path, fmt::format("{} has non-finite values (NaN or infinity)", what));
  }
}

// The payload's tensors by name against the module's, as load_state_dict(strict=True) compares
// them (no name missing, none extra, same shapes), and also dtypes and finiteness.
void CheckNamed(const c10::IValue& stored_value, const torch::OrderedDict<std::string, torch::Tensor>& expected,
                const std::string& what, const std::string& path) {
  const c10::impl::GenericDict stored = stored_value.toGenericDict();
  for (const auto& entry : stored) {
    if (!entry.key().isString() || !expected.contains(entry.key().toStringRef())) {
      throw BadInputError(fmt::format("checkpoint {} has a {} '{}' that this model does not have (another model's "
                                      "checkpoint?)",
                                      path, what, entry.key().isString() ? entry.key().toStringRef() : "?"));
    }
  }
  for (const auto& item : expected) {
    const auto found = stored.find(item.key());
    if (found == stored.end()) {
      throw BadInputError(fmt::format("checkpoint {} has no {} '{}'", path, what, item.key()));
    }
    CheckTensor(found->value().toTensor(), item.value(), fmt::format("{} '{}'", what, item.key()), path);
  }
}

// Copies the payload's tensors into the module's tensors of the same names (checked by CheckNamed).
void LoadNamed(const c10::IValue& stored, const torch::OrderedDict<std::string, torch::Tensor>& into) {
  torch::NoGradGuard no_grad;
  const c10::impl::GenericDict dict = stored.toGenericDict();
  for (const auto& item : into) item.value().copy_(dict.at(item.key()).toTensor());
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

// Optimizer state: per parameter, FusedOptimizer::StateTensors' five slots (step count, two
// moments, momentum buffer, master weight), each absent (not yet stepped) or as this run keeps it.
void CheckOptimizerState(const std::vector<torch::Tensor>& stored, FusedOptimizer& optimizer,
                         const std::string& path) {
  const std::vector<torch::Tensor> expected = optimizer.StateTensors();
  const std::vector<torch::Tensor>& stepped = optimizer.stepped_parameters();
  constexpr size_t kSlots = 5;
  if (stored.size() != expected.size()) {
    throw BadInputError(fmt::format("checkpoint {}: its optimizer state holds {} tensors, this run's {} ({} per "
                                    "parameter); the checkpoint is from another model or optimizer",
                                    path, stored.size(), expected.size(), kSlots));
  }
  static const char* const kSlotNames[kSlots] = {"step count", "first moment", "second moment", "momentum buffer",
                                                 "master weight"};
  const torch::Tensor step_count = torch::zeros({}, torch::kFloat32);
  for (size_t i = 0; i < stored.size(); ++i) {
    const size_t parameter = i / kSlots;
    const size_t slot = i % kSlots;
    if (!stored[i].defined()) continue;
    const std::string what = fmt::format("the optimizer's {} of parameter {}", kSlotNames[slot], parameter);
    if (slot == 4 && !expected[i].defined()) {
      throw BadInputError(fmt::format("checkpoint {}: {} is stored, but this run keeps none", path, what));
    }
    CheckTensor(stored[i], slot == 0 ? step_count : stepped[parameter], what, path);
    if (slot == 0 && stored[i].item<double>() < 0) {
      throw Altered(path, fmt::format("{} is {}, below 0", what, stored[i].item<double>()));
    }
  }
}

// Loss scaler: scale (float, finite; backing off may round it to 0), growth tracker (int) and
// skipped steps (long), each >= 0.
void CheckScalerState(const std::vector<torch::Tensor>& stored, GradScaler& scaler, const std::string& path) {
  const std::vector<torch::Tensor> expected = scaler.StateTensors();
  static const char* const kNames[] = {"loss scale", "loss scaler's growth tracker", "loss scaler's skipped steps"};
  if (stored.size() != expected.size()) {
    throw BadInputError(fmt::format("checkpoint {}: its loss scaler state holds {} tensors, expected {} (scale, "
                                    "growth tracker, skipped steps)",
                                    path, stored.size(), expected.size()));
  }
  for (size_t i = 0; i < stored.size(); ++i) {
    CheckTensor(stored[i], expected[i], kNames[i], path);
    const double value = stored[i].item<double>();
    if (value < 0) throw Altered(path, fmt::format("the {} is {}, below 0", kNames[i], value));
  }
}

// `object[field]` as an integer in [low, high]; else BadInputError naming the section and field.
int64_t IntegerField(const nlohmann::json& object, const char* section, const char* field, int64_t low,
                     int64_t high, const std::string& path) {
  const nlohmann::json& value = object.at(field);
  // JSON numbers >= 0 parse as unsigned, and one past int64's range must not wrap.
  const bool fits =
      value.is_number_integer() &&
      (value.is_number_unsigned() ? value.get<uint64_t>() <= static_cast<uint64_t>(high) &&
                                        (low <= 0 || value.get<uint64_t>() >= static_cast<uint64_t>(low))
                                  : value.get<int64_t>() >= low && value.get<int64_t>() <= high);
  if (!fits) {
    throw Altered(path, fmt::format("its {} field '{}' is {}, outside the allowed {}", section,
                                    field, value.dump(),
                                    high == std::numeric_limits<int64_t>::max()
                                        ? fmt::format("integers >= {}", low)
                                        : fmt::format("integers {}..{}", low, high)));
  }
  return value.get<int64_t>();
}

// The header's position, each field in range, and the epoch's steps within the run's.
TrainingPosition ReadPosition(const nlohmann::json& header, const std::string& path) {
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
  const nlohmann::json& at = header.at("position");
  TrainingPosition position;
  position.epoch = IntegerField(at, "position", "epoch", 0, kAny, path);
  position.step = IntegerField(at, "position", "step", 0, kAny, path);
  position.epoch_steps = IntegerField(at, "position", "epoch_steps", 0, position.step, path);
  position.micro_batches = IntegerField(at, "position", "micro_batches", position.epoch_steps, kAny, path);
  position.images_seen = IntegerField(at, "position", "images_seen", 0, kAny, path);
  std::optional<std::vector<EpochRecord>> epochs = EpochRecordsFromJson(header.at("epochs_detail"));
  if (!epochs) throw Altered(path, "its 'epochs_detail' is not a list of epoch records");
  position.epochs_detail = std::move(*epochs);
  return position;
}

LrScheduler::State ReadSchedule(const nlohmann::json& header, const std::string& path) {
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
  const nlohmann::json& schedule = header.at("scheduler");
  LrScheduler::State state;
  state.steps = IntegerField(schedule, "scheduler", "steps", 0, kAny, path);
  state.epochs = IntegerField(schedule, "scheduler", "epochs", 0, kAny, path);
  state.bad_epochs = IntegerField(schedule, "scheduler", "bad_epochs", 0, kAny, path);
  state.lr = schedule.at("lr").get<double>();
  state.best = schedule.at("best").is_null() ? std::numeric_limits<double>::infinity()
                                             : schedule.at("best").get<double>();
  if (!std::isfinite(state.lr) || state.lr < 0 || std::isnan(state.best)) {
    throw Altered(path, fmt::format("its scheduler's lr {} (a finite number >= 0) or best loss {} is out of range",
                                    schedule.at("lr").dump(), schedule.at("best").dump()));
  }
  return state;
}

// The epoch's running loss: () double sums of loss x images and of images, finite, images >= 0.
torch::Tensor ReadEpochLoss(const c10::impl::GenericDict& payload, const std::string& path) {
  const torch::Tensor epoch_loss = payload.at("epoch_loss").toTensor();
  CheckTensor(epoch_loss, torch::zeros({2}, torch::kDouble), "the epoch's running loss", path);
  if (epoch_loss[1].item<double>() < 0) {
    throw Altered(path, fmt::format("the epoch's image count {} is below 0", epoch_loss[1].item<double>()));
  }
  return epoch_loss;
}

}  // namespace

CheckpointIdentity CheckpointIdentity::Of(const TrainConfig& config, int world_size, torch::nn::Module& model) {
  CheckpointIdentity identity;
  identity.model = config.model;
  identity.dataset = config.dataset;
  identity.optimizer = config.optimizer;
  identity.precision = PrecisionName(config.precision);
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
      {"epochs_detail", EpochRecordsToJson(position.epochs_detail)},
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
  return EncodeCheckpointFile(header.dump(), payload);
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
  // Past the checksum the file is as written, or rewritten with its checksum recomputed: every
  // field and tensor is checked before anything is loaded into the run.
  try {
    const nlohmann::json header = nlohmann::json::parse(contents.header);
    CheckIdentity(header.at("identity"), expected, path);
    TrainingPosition position = ReadPosition(header, path);
    const LrScheduler::State schedule = ReadSchedule(header, path);
    const c10::impl::GenericDict& payload = contents.state;
    for (const char* key : {"parameters", "buffers", "optimizer", "scaler", "epoch_loss", "rng_cpu"}) {
      if (!payload.contains(key)) throw Altered(path, fmt::format("it has no '{}'", key));
    }
    CheckNamed(payload.at("parameters"), parts.model.named_parameters(), "parameter", path);
    CheckNamed(payload.at("buffers"), parts.model.named_buffers(), "buffer", path);
    const std::vector<torch::Tensor> optimizer_state = TensorsOf(payload.at("optimizer"));
    CheckOptimizerState(optimizer_state, parts.optimizer, path);
    const std::vector<torch::Tensor> scaler_state = TensorsOf(payload.at("scaler"));
    CheckScalerState(scaler_state, parts.scaler, path);
    const torch::Tensor epoch_loss = ReadEpochLoss(payload, path).to(parts.device);  // (2) double

    LoadNamed(payload.at("parameters"), parts.model.named_parameters());
    LoadNamed(payload.at("buffers"), parts.model.named_buffers());
    parts.optimizer.LoadStateTensors(optimizer_state);
    parts.scaler.LoadStateTensors(scaler_state);
    parts.scheduler.Restore(schedule);
    parts.optimizer.set_lr(schedule.lr);
    SetCpuGeneratorState(payload.at("rng_cpu").toTensor());
#ifdef MGPU_WITH_CUDA
    if (parts.device.is_cuda() && payload.contains("rng_cuda")) {
      at::Generator generator = CudaGenerator(parts.device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(payload.at("rng_cuda").toTensor());
    }
#endif
    position.loss_sum = epoch_loss[0].clone();
    position.loss_images = epoch_loss[1].clone();
    return position;
  } catch (const nlohmann::json::exception& e) {
    throw BadInputError(fmt::format("checkpoint {}: its header is not an mgpu checkpoint's: {}", path, e.what()));
  } catch (const c10::Error& e) {
    throw BadInputError(fmt::format("checkpoint {}: its tensors cannot be loaded: {}", path, e.what_without_backtrace()));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // e.g. std::out_of_range from LibTorch's containers
    throw BadInputError(fmt::format("checkpoint {}: its contents cannot be loaded: {}", path, e.what()));
  }
}

void CheckPositionFits(const TrainingPosition& position, const EpochShape& epoch, const std::string& path) {
  const auto refuse = [&](const char* field, int64_t value, int64_t limit, const char* what) {
    throw Altered(path, fmt::format("its position field '{}' is {}, above this run's {} {} (unless the data set "
                                    "changed since it was written)",
                                    field, value, limit, what));
  };
  if (position.epoch_steps > epoch.steps) {
    refuse("epoch_steps", position.epoch_steps, epoch.steps, "optimizer steps per epoch");
  }
  if (position.micro_batches > epoch.micro_batches) {
    refuse("micro_batches", position.micro_batches, epoch.micro_batches, "micro-batches per epoch of this rank");
  }
  if (position.images_seen > epoch.images) {
    refuse("images_seen", position.images_seen, epoch.images, "images per epoch of this rank");
  }
  // Every finished epoch took epoch.steps steps: the step count is at most all of them (a bound
  // past int64 holds for every step count).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (epoch.steps > 0 && position.epoch > (kMax - position.epoch_steps) / epoch.steps) return;
  const int64_t most_steps = position.epoch * epoch.steps + position.epoch_steps;
  if (position.step > most_steps) refuse("step", position.step, most_steps, "steps (of its epochs so far)");
}

CheckpointWriter::CheckpointWriter(std::string folder, int64_t every, bool writes)
    : folder_(std::move(folder)), every_(every), writes_(writes) {}

std::string CheckpointWriter::Write(int64_t step, const std::function<std::string()>& serialize) {
  if (!writes_) return "";
  MakeDirectories(folder_);
  const std::string path = fmt::format("{}/step-{}.ckpt", folder_, step);
  const std::string bytes = serialize();
  WriteFileAtomically(path, bytes);
  // latest.ckpt: a second name for the same bytes, always a whole checkpoint.
  LinkOrWriteAtomically(path, folder_ + "/latest.ckpt", bytes);
  SyncDirectory(folder_);
  return path;
}

}  // namespace mgpu
