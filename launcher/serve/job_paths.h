// Where a job of `mgpu serve` may read and write: its own job folder, and the folders the
// service's operator allows. Every path-valued option of the job's configuration (those whose
// OptionSpec::path_use says so, config/train_config.h) is checked, after `{out}` is replaced by
// the job's output folder, a relative path is taken from the job folder (never the service's
// working folder), `..` is followed, and symlinks are resolved (the realpath of the deepest
// existing ancestor; a dangling or looping symlink is refused).
//
//   reads (data-dir, resume):       the job folder, --allow-path and --allow-read folders
//   writes (out, checkpoint, tensorboard-log, memory-snapshot): the job folder, --allow-path folders
//   models (torchscript:PATH):      --allow-path and --allow-read folders (not the job folder,
//                                   which the job itself writes)
//   plugins (plugin:LIB.so:NAME):   as models, and only with --allow-plugins
//
// An empty value is the service's own default (the data set's folder from the service's
// environment) and is not the job's choice, so it is not checked. The check runs in the service
// before any process of the job starts, so a refused plugin's constructors never run.
#pragma once

#include <string>
#include <vector>

#include "config/train_config.h"

namespace mgpu {

struct PathPolicy {
  std::vector<std::string> read_write;  // --allow-path: absolute, symlink-free (AllowedFolder)
  std::vector<std::string> read_only;   // --allow-read
  bool plugins = false;                 // --allow-plugins
};

// `path` as the kernel would find it: absolute (a relative one from `base`), `.` and `..`
// followed, every existing component's symlinks resolved. Throws BadInputError naming `path`
// for a dangling symlink, a symlink loop or a component that cannot be searched.
std::string ResolvePath(const std::string& path, const std::string& base);

// `folder` made absolute and symlink-free, for a PathPolicy. Throws BadInputError naming `flag`
// when it is not an existing folder.
std::string AllowedFolder(const std::string& folder, const std::string& flag);

// Whether `path` (resolved) is `root` or inside it.
bool IsWithin(const std::string& path, const std::string& root);

// Throws BadInputError naming the option, its value, where it resolves to and the folders it may
// use, for the first path of `config` outside what `policy` allows a job in `job_folder` whose
// output folder is `run_folder`; and for a plugin model without `policy.plugins`.
void CheckJobPaths(const TrainConfig& config, const std::string& job_folder, const std::string& run_folder,
                   const PathPolicy& policy);

// Worker flags that pin each relative path of `config` to the job folder ("--data-dir
// <job folder>/data"), so that the job uses what CheckJobPaths checked whatever its working folder.
std::vector<std::string> AbsolutePathFlags(const TrainConfig& config, const std::string& job_folder);

}  // namespace mgpu
