#include "launcher/run/job_summary.h"

#include <cmath>

#include "common/files.h"
#include "ddp/world.h"
#include "report/run_summary.h"

namespace mgpu {
namespace {

constexpr char kWorldImagesPerSecond[] = "world_images_per_second";

}  // namespace

double WorldImagesPerSecond(const nlohmann::json& launcher) {
  const auto speed = launcher.find(kWorldImagesPerSecond);
  return speed != launcher.end() && speed->is_number() ? speed->get<double>() : 0.0;
}

void WriteJobSummary(const std::string& out, const TrainConfig& config, int world_size, const JobReport& report,
                     const std::vector<RankView>& ranks) {
  const std::string path = out + "/summary.json";
  nlohmann::json written;
  if (IsRegularFile(path)) {
    try {
      written = nlohmann::json::parse(ReadFile(path));
    } catch (const std::exception&) {
      written = nlohmann::json();  // torn by a killed rank 0: start again from the configuration
    }
  }
  RunSummary summary;
  if (written.is_object()) {
    summary = RunSummaryFromJson(written);
  } else {
    WorldInfo world;
    world.world_size = world_size;
    summary = SummaryFromConfig(config, world);
    summary.status = "failed";
  }
  nlohmann::json launcher = {
      {"nnodes", report.nnodes},
      {"nproc_per_node", report.nproc_per_node},
      {"world_size", world_size},
      {"attempts", report.attempts},
      {"restarts", report.attempts - 1},
      {"seconds", report.seconds},
      {"coordinator", report.coordinator},
      {"exit_code", report.failure ? report.failure->exit_code : 0},
  };
  // World throughput: rank 0's images/s of its last epoch already count every rank's images.
  double world_images_per_second = 0;
  nlohmann::json per_rank = nlohmann::json::array();
  for (const RankView& view : ranks) {
    nlohmann::json entry = {{"rank", view.rank}, {"host", view.host}, {"pid", view.pid}, {"device", view.device},
                            {"steps", view.step}, {"phase", view.phase}};
    if (view.finished) {
      entry["exit_code"] = view.finish.exit_code();
      entry["seconds"] = view.finish.total_seconds();
      entry["steps"] = view.finish.steps();
      entry["images_per_second"] = view.finish.images_per_second();
      if (view.rank == 0) world_images_per_second = view.finish.images_per_second();
    }
    if (view.exited) {
      entry["exit_code"] = view.exit.exit_code();
      if (view.exit.signal() != 0) entry["signal"] = view.exit.signal();
    }
    if (view.metrics) {
      entry["last_step_seconds"] = view.metrics->step_seconds();
      entry["last_data_wait_seconds"] = view.metrics->data_wait_seconds();
      if (world_images_per_second == 0 && view.rank == 0) world_images_per_second = view.metrics->images_per_second();
    }
    per_rank.push_back(entry);
  }
  launcher[kWorldImagesPerSecond] = world_images_per_second;
  launcher["ranks"] = per_rank;
  if (report.failure) {
    const JobFailure& f = *report.failure;
    launcher["root_cause"] = {{"kind", f.kind},         {"rank", f.rank},       {"host", f.host},
                              {"pid", f.pid},           {"exit_code", f.exit_code}, {"signal", f.signal},
                              {"error", f.error},       {"step", f.step},       {"epoch", f.epoch},
                              {"phase", f.phase},       {"unix_millis", f.unix_millis}, {"message", f.message}};
    summary.status = f.kind == "interrupted" ? "interrupted" : "failed";
    summary.error = f.message;
    summary.exit_code = f.exit_code;
  }
  summary.launcher = launcher;
  MakeDirectories(out);
  WriteFileAtomically(path, summary.ToJson().dump(2) + "\n");
}

}  // namespace mgpu
