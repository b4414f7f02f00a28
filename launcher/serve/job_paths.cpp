#include "launcher/serve/job_paths.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "config/model_names.h"

namespace mgpu {
namespace {

bool StartsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string Join(const std::string& folder, const std::string& name) {
  return folder == "/" ? "/" + name : folder + "/" + name;
}

// A user's model value split into its file and the text around it, as models/model_factory.cpp
// reads it: torchscript:PATH, plugin:LIB:NAME (the library's path may contain ':', NAME may not).
struct ModelFile {
  std::string prefix, path, suffix;
};

ModelFile SplitModel(const std::string& model) {
  if (StartsWith(model, kTorchScriptPrefix)) return {kTorchScriptPrefix, model.substr(sizeof(kTorchScriptPrefix) - 1), ""};
  const std::string rest = model.substr(sizeof(kPluginPrefix) - 1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return {kPluginPrefix, rest, ""};
  return {kPluginPrefix, rest.substr(0, colon), rest.substr(colon)};
}

// The file or folder an option's value names ("" when none): {out} replaced for outputs, the
// library or module file for a user's model.
std::string PathOf(const OptionSpec& spec, const std::string& value, const std::string& run_folder) {
  if (spec.path_use == PathUse::kLoadsModel) return IsUserModel(value) ? SplitModel(value).path : "";
  return spec.path_use == PathUse::kWrites ? WithOutputFolder(value, run_folder) : value;
}

std::string Roots(const std::vector<std::string>& roots) {
  return roots.empty() ? std::string("none") : fmt::format("{}", fmt::join(roots, ", "));
}

}  // namespace

std::string ResolvePath(const std::string& path, const std::string& base) {
  const std::string absolute = !path.empty() && path.front() == '/' ? path : base + "/" + path;
  std::string resolved = "/";
  size_t start = 0;
  while (start <= absolute.size()) {
    size_t end = absolute.find('/', start);
    if (end == std::string::npos) end = absolute.size();
    const std::string part = absolute.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      resolved = ParentOf(resolved);  // `resolved` has no symlinks left, so its parent is the real one
      continue;
    }
    const std::string next = Join(resolved, part);
    char real[PATH_MAX];
    if (::realpath(next.c_str(), real) != nullptr) {
      resolved = real;
      continue;
    }
    const int error = errno;
    struct stat info {};
    if ((error != ENOENT && error != ENOTDIR) || ::lstat(next.c_str(), &info) == 0) {
      // A dangling symlink (writing it would create its target), a loop, or no permission.
      throw BadInputError(fmt::format("{}: {} cannot be resolved ({}); name a real file or folder", path, next,
                                      error == ENOENT ? "a symlink to nothing" : std::strerror(error)));
    }
    resolved = next;  // does not exist (yet): nothing below it can be a symlink
  }
  return resolved;
}

std::string AllowedFolder(const std::string& folder, const std::string& flag) {
  char real[PATH_MAX];
  if (folder.empty() || ::realpath(folder.c_str(), real) == nullptr || !IsDirectory(real)) {
    throw BadInputError(fmt::format("{} {}: not an existing folder; give the folder jobs may use", flag, folder));
  }
  return real;
}

bool IsWithin(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

void CheckJobPaths(const TrainConfig& config, const std::string& job_folder, const std::string& run_folder,
                   const PathPolicy& policy) {
  const std::string job_root = ResolvePath(job_folder, "/");
  for (const OptionSpec& spec : TrainOptions()) {
    if (spec.path_use == PathUse::kNone) continue;
    const std::string value = spec.get(config);
    const std::string path = PathOf(spec, value, run_folder);
    if (path.empty()) continue;
    const bool plugin = spec.path_use == PathUse::kLoadsModel && StartsWith(value, kPluginPrefix);
    if (plugin && !policy.plugins) {
      throw BadInputError(fmt::format("'{}: {}': this service loads no plugins (code that would run as the "
                                      "service's user); its operator can allow them with mgpu serve "
                                      "--allow-plugins",
                                      spec.name, value));
    }
    std::vector<std::string> roots;
    if (spec.path_use != PathUse::kLoadsModel) roots.push_back(job_root);
    roots.insert(roots.end(), policy.read_write.begin(), policy.read_write.end());
    if (spec.path_use != PathUse::kWrites) roots.insert(roots.end(), policy.read_only.begin(), policy.read_only.end());
    const std::string resolved = ResolvePath(path, job_folder);
    bool allowed = false;
    for (const std::string& root : roots) allowed = allowed || IsWithin(resolved, root);
    if (!allowed) {
      throw BadInputError(fmt::format(
          "'{}: {}' {} {}, outside the folders this job may {}: {}. Use a path inside them, or ask the service's "
          "operator to allow the folder (mgpu serve {})",
          spec.name, value, resolved == path ? "is" : "resolves to", resolved,
          spec.path_use == PathUse::kWrites ? "write" : spec.path_use == PathUse::kReads ? "read" : "load models from",
          Roots(roots), spec.path_use == PathUse::kWrites ? "--allow-path" : "--allow-read or --allow-path"));
    }
  }
}

std::vector<std::string> AbsolutePathFlags(const TrainConfig& config, const std::string& job_folder) {
  std::vector<std::string> flags;
  for (const OptionSpec& spec : TrainOptions()) {
    if (spec.path_use == PathUse::kNone) continue;
    const std::string value = spec.get(config);
    if (value.empty() || (spec.path_use == PathUse::kLoadsModel && !IsUserModel(value))) continue;
    if (spec.path_use == PathUse::kLoadsModel) {
      const ModelFile model = SplitModel(value);
      if (!model.path.empty() && model.path.front() != '/') {
        flags.insert(flags.end(), {"--" + spec.name, model.prefix + job_folder + "/" + model.path + model.suffix});
      }
    } else if (value.front() != '/' && !StartsWith(value, kOutputFolderPlaceholder)) {
      flags.insert(flags.end(), {"--" + spec.name, job_folder + "/" + value});
    }
  }
  return flags;
}

}  // namespace mgpu
