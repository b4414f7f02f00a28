#include "report/run_summary.h"

#include <limits>
#include <type_traits>

#include "config/train_config.h"
#include "ddp/world.h"

namespace mgpu {
namespace {

// Whether an unset optional field is written as null (present in every run) or left out.
enum class Presence { kAlways, kSometimes };

// Each record's fields, key by key: the one list both directions walk. `visit(key, member,
// presence)` is called once per field, in the contract's order.
template <typename Record, typename Visit>
void VisitFields(Record& r, Visit&& visit, std::enable_if_t<std::is_same_v<std::decay_t<Record>, EpochRecord>>* = nullptr) {
  visit("epoch", r.epoch, Presence::kAlways);
  visit("train_loss", r.train_loss, Presence::kAlways);
  visit("seconds", r.seconds, Presence::kAlways);
  visit("images_per_second", r.images_per_second, Presence::kAlways);
  visit("data_wait_seconds", r.data_wait_seconds, Presence::kAlways);
  visit("compute_seconds", r.compute_seconds, Presence::kAlways);
  visit("comm_seconds", r.comm_seconds, Presence::kAlways);
  visit("phase_seconds", r.phase_seconds, Presence::kAlways);
  visit("host_phase_seconds", r.host_phase_seconds, Presence::kAlways);
  visit("steps", r.steps, Presence::kAlways);
  visit("eval_seconds", r.eval_seconds, Presence::kAlways);
  visit("test_loss", r.test_loss, Presence::kAlways);
  visit("test_accuracy", r.test_accuracy, Presence::kAlways);
}

template <typename Record, typename Visit>
void VisitFields(Record& r, Visit&& visit,
                 std::enable_if_t<std::is_same_v<std::decay_t<Record>, InterruptionRecord>>* = nullptr) {
  visit("signal", r.signal, Presence::kAlways);
  visit("signal_number", r.signal_number, Presence::kAlways);
  visit("rank", r.rank, Presence::kAlways);
  visit("step", r.step, Presence::kAlways);
  visit("checkpoint", r.checkpoint, Presence::kAlways);
}

template <typename Record, typename Visit>
void VisitFields(Record& r, Visit&& visit,
                 std::enable_if_t<std::is_same_v<std::decay_t<Record>, CudaGraphsRecord>>* = nullptr) {
  visit("captured", r.captured, Presence::kAlways);
  visit("replays", r.replays, Presence::kAlways);
  visit("eager_steps", r.eager_steps, Presence::kAlways);
}

template <typename Record, typename Visit>
void VisitFields(Record& r, Visit&& visit,
                 std::enable_if_t<std::is_same_v<std::decay_t<Record>, GpuDecodeRecord>>* = nullptr) {
  visit("images", r.images, Presence::kAlways);
  visit("cpu_assisted", r.cpu_assisted, Presence::kAlways);
  visit("cpu_fallbacks", r.cpu_fallbacks, Presence::kAlways);
  visit("fallback_reasons", r.fallback_reasons, Presence::kAlways);
}

template <typename Record, typename Visit>
void VisitFields(Record& r, Visit&& visit,
                 std::enable_if_t<std::is_same_v<std::decay_t<Record>, DataParallelTiming>>* = nullptr) {
  visit("clock", r.clock, Presence::kAlways);
  visit("devices", r.devices, Presence::kAlways);
  visit("forward_seconds", r.forward_seconds, Presence::kAlways);
  visit("backward_seconds", r.backward_seconds, Presence::kAlways);
  visit("reduce_seconds", r.reduce_seconds, Presence::kAlways);
  visit("step_seconds", r.step_seconds, Presence::kAlways);
  visit("broadcast_seconds", r.broadcast_seconds, Presence::kAlways);
  visit("forward_backward_calls", r.forward_backward_calls, Presence::kAlways);
  visit("broadcasts", r.broadcasts, Presence::kAlways);
}

template <typename Record, typename Visit>
void VisitFields(Record& r, Visit&& visit, std::enable_if_t<std::is_same_v<std::decay_t<Record>, RunSummary>>* = nullptr) {
  constexpr Presence kAlways = Presence::kAlways, kSometimes = Presence::kSometimes;
  visit("name", r.name, kAlways);
  visit("status", r.status, kAlways);
  visit("error", r.error, kAlways);
  visit("exit_code", r.exit_code, kSometimes);
  visit("interrupted", r.interrupted, kSometimes);
  visit("model", r.model, kAlways);
  visit("dataset", r.dataset, kAlways);
  visit("mode", r.mode, kAlways);
  visit("optimizer", r.optimizer, kAlways);
  visit("precision", r.precision, kAlways);
  visit("backend", r.backend, kAlways);
  visit("loss_scale_mode", r.loss_scale_mode, kAlways);
  visit("world_size", r.world_size, kAlways);
  visit("batch_size", r.batch_size, kAlways);
  visit("num_workers", r.num_workers, kAlways);
  visit("epochs", r.epochs, kAlways);
  visit("max_steps", r.max_steps, kAlways);
  visit("seed", r.seed, kAlways);
  visit("lr", r.lr, kAlways);
  visit("rendezvous_source", r.rendezvous_source, kAlways);
  visit("devices", r.devices, kAlways);
  visit("data_loading", r.data_loading, kAlways);
  visit("decode", r.decode, kAlways);
  visit("train_samples", r.train_samples, kAlways);
  visit("test_samples", r.test_samples, kAlways);
  visit("class_names", r.class_names, kSometimes);
  visit("input", r.input, kSometimes);
  visit("channels_last", r.channels_last, kSometimes);
  visit("parameters", r.parameters, kSometimes);
  visit("cpu_capability", r.cpu_capability, kSometimes);
  visit("effective_lr", r.effective_lr, kSometimes);
  visit("resumed_from", r.resumed_from, kSometimes);
  visit("skipped_images", r.skipped_images, kAlways);
  visit("total_seconds", r.total_seconds, kAlways);
  visit("steps", r.steps, kSometimes);
  visit("final_lr", r.final_lr, kSometimes);
  visit("test_accuracy", r.test_accuracy, kAlways);
  visit("test_loss", r.test_loss, kAlways);
  visit("eval_samples", r.eval_samples, kSometimes);
  visit("per_class_accuracy", r.per_class_accuracy, kAlways);
  visit("peak_memory_bytes", r.peak_memory_bytes, kAlways);
  visit("skipped_steps", r.skipped_steps, kAlways);
  visit("final_loss_scale", r.final_loss_scale, kAlways);
  visit("param_checksum", r.param_checksum, kAlways);
  visit("rank_param_checksums", r.rank_param_checksums, kSometimes);
  visit("epochs_detail", r.epochs_detail, kAlways);
  visit("gpu_decode", r.gpu_decode, kSometimes);
  visit("cuda_graphs", r.cuda_graphs, kSometimes);
  visit("ddp_bucket_bytes", r.ddp_bucket_bytes, kSometimes);
  visit("ddp_buckets_rebuilt", r.ddp_buckets_rebuilt, kSometimes);
  visit("dp_impl", r.dp_impl, kSometimes);
  visit("dp_comm", r.dp_comm, kSometimes);
  visit("dp_timing", r.dp_timing, kSometimes);
  visit("state_dict_file", r.state_dict_file, kSometimes);
  visit("checkpoint_file", r.checkpoint_file, kSometimes);
  visit("launcher", r.launcher, kSometimes);
}

template <typename T>
constexpr bool kIsRecord = std::is_same_v<T, EpochRecord> || std::is_same_v<T, InterruptionRecord> ||
                           std::is_same_v<T, CudaGraphsRecord> || std::is_same_v<T, GpuDecodeRecord> ||
                           std::is_same_v<T, DataParallelTiming> || std::is_same_v<T, RunSummary>;

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <typename T>
struct IsMap : std::false_type {};
template <typename T>
struct IsMap<std::map<std::string, T>> : std::true_type {};

// ---- writing ----

template <typename T>
nlohmann::json ToValue(const T& value);

template <typename Record>
nlohmann::json RecordToJson(const Record& record) {
  nlohmann::json json = nlohmann::json::object();
  VisitFields(record, [&json](const char* key, const auto& member, Presence presence) {
    using Member = std::decay_t<decltype(member)>;
    if constexpr (IsOptional<Member>::value) {
      if (member) {
        json[key] = ToValue(*member);
      } else if (presence == Presence::kAlways) {
        json[key] = nullptr;
      }
    } else {
      json[key] = ToValue(member);
    }
  });
  return json;
}

template <typename T>
nlohmann::json ToValue(const T& value) {
  if constexpr (kIsRecord<T>) {
    return RecordToJson(value);
  } else if constexpr (IsVector<T>::value) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& item : value) list.push_back(ToValue(item));
    return list;
  } else if constexpr (IsMap<T>::value) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, item] : value) object[key] = ToValue(item);
    return object;
  } else {
    return nlohmann::json(value);
  }
}

// ---- reading ----

template <typename T>
bool FromValue(const nlohmann::json& json, T& out);

template <typename Record>
bool RecordFromJson(const nlohmann::json& json, Record& record) {
  if (!json.is_object()) return false;
  VisitFields(record, [&json](const char* key, auto& member, Presence) {
    const auto found = json.find(key);
    if (found == json.end() || found->is_null()) return;
    using Member = std::decay_t<decltype(member)>;
    if constexpr (IsOptional<Member>::value) {
      typename Member::value_type value{};
      if (FromValue(*found, value)) member = std::move(value);
    } else {
      Member value{};
      if (FromValue(*found, value)) member = std::move(value);
    }
  });
  return true;
}

template <typename T>
bool FromValue(const nlohmann::json& json, T& out) {
  if constexpr (kIsRecord<T>) {
    return RecordFromJson(json, out);
  } else if constexpr (IsVector<T>::value) {
    if (!json.is_array()) return false;
    T values;
    for (const auto& item : json) {
      typename T::value_type value{};
      if (!FromValue(item, value)) return false;
      values.push_back(std::move(value));
    }
    out = std::move(values);
    return true;
  } else if constexpr (IsMap<T>::value) {
    if (!json.is_object()) return false;
    T values;
    for (const auto& [key, item] : json.items()) {
      if (!FromValue(item, values[key])) return false;
    }
    out = std::move(values);
    return true;
  } else if constexpr (std::is_same_v<T, nlohmann::json>) {
    out = json;
    return true;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!json.is_string()) return false;
    out = json.get<std::string>();
    return true;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!json.is_boolean()) return false;
    out = json.get<bool>();
    return true;
  } else {
    static_assert(std::is_arithmetic_v<T>, "a summary field is a record, list, map, string, bool or number");
    if constexpr (std::is_floating_point_v<T>) {
      if (json.is_null()) {  // a list's non-finite number, as nlohmann::json writes NaN
        out = std::numeric_limits<T>::quiet_NaN();
        return true;
      }
    }
    if (!json.is_number()) return false;
    out = json.get<T>();
    return true;
  }
}

}  // namespace

nlohmann::json RunSummary::ToJson() const { return RecordToJson(*this); }

RunSummary SummaryFromConfig(const TrainConfig& config, const WorldInfo& world) {
  RunSummary summary;
  summary.model = config.model;
  summary.dataset = config.dataset;
  summary.mode = ModeName(config.mode);
  summary.world_size = world.world_size;
  summary.precision = PrecisionName(config.precision);
  summary.batch_size = config.batch_size;
  summary.num_workers = config.num_workers;
  summary.epochs = config.epochs;
  summary.max_steps = config.max_steps;
  summary.lr = config.lr;
  summary.optimizer = config.optimizer;
  summary.seed = config.seed;
  summary.name = config.name;
  summary.rendezvous_source = world.source;
  summary.total_seconds = 0.0;
  return summary;
}

RunSummary RunSummaryFromJson(const nlohmann::json& json) {
  RunSummary summary;
  RecordFromJson(json, summary);
  return summary;
}

nlohmann::json EpochRecordsToJson(const std::vector<EpochRecord>& epochs) { return ToValue(epochs); }

std::optional<std::vector<EpochRecord>> EpochRecordsFromJson(const nlohmann::json& json) {
  if (!json.is_array()) return std::nullopt;
  std::vector<EpochRecord> epochs;
  for (const auto& item : json) {
    epochs.emplace_back();
    if (!RecordFromJson(item, epochs.back())) return std::nullopt;
  }
  return epochs;
}

}  // namespace mgpu
