// Progress display for rank 0: a bar redrawn in place on a terminal, plain lines otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <spdlog/logger.h>

namespace mgpu {

class Progress {
 public:
  // mode: "auto" (bar when stderr is a terminal), "bar" or "lines". Ranks other than 0 show
  // nothing.
  Progress(const std::string& mode, int rank, spdlog::logger& log);

  // `steps_in_epoch`: the steps the epoch trains to (fewer than a whole epoch's where --max-steps
  // ends it); `first_step`: those done before (a resumed epoch's), which the ETA leaves out.
  void StartEpoch(int64_t epoch, int64_t epochs, int64_t steps_in_epoch, int64_t first_step = 0);
  // Called after every optimizer step; cheap when nothing is drawn. `loss`: the latest known (on
  // a GPU, that of the last completed metrics row, as rows complete a row late); none is "-".
  void Update(int64_t step_in_epoch, std::optional<double> loss, double images_per_second);
  // Ends the bar's line, so that log lines start on a fresh one.
  void EndEpoch();

 private:
  bool enabled_;
  bool bar_;
  spdlog::logger& log_;
  int64_t epoch_ = 0, epochs_ = 0, steps_ = 0, first_step_ = 0;
  int64_t next_line_at_ = 0;
  double started_ = 0;
  double last_draw_ = 0;
};

}  // namespace mgpu
