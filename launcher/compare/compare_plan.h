// A comparison file: which runs `mgpu compare` makes, one after another.
//
//   name: demo                 # label of the comparison
//   description: ...           # optional, shown in the report
//   base: {model: lenet, ...}  # worker options shared by every run
//   quick: {max-steps: 50}     # applied on top with --quick
//   matrix:                    # optional: every combination of these values...
//     num-workers: [0, 4]
//   runs:                      # ...and/or explicit runs, each a name plus overrides
//     - {name: baseline, mode: single}
//
// Every option key must be a worker option (mgpu-worker --help); errors name the file and key.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mgpu {

struct PlannedRun {
  std::string name;                                         // folder name under --out
  std::vector<std::pair<std::string, std::string>> options;  // canonical option → value
};

struct ComparePlan {
  std::string name;
  std::string description;  // the file's, which describes the full runs
  // The file's 'quick' section when parsed for --quick (empty otherwise): the reports say that
  // these ran on top of what the description says.
  std::vector<std::pair<std::string, std::string>> quick_overrides;
  std::vector<PlannedRun> runs;
};

// "Quick run (--quick): max-steps=100 on every run; the description is of the full runs." for a
// plan parsed with --quick, else "".
std::string QuickRunNote(const ComparePlan& plan);

// Parses YAML text; `origin` names it in error messages. Throws BadInputError.
ComparePlan ParseComparePlan(const std::string& yaml_text, const std::string& origin, bool quick);

}  // namespace mgpu
