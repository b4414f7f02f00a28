// An environment for the rank and layout readers (ddp/environment.h) that holds only the given
// variables, so tests of torchrun's, Open MPI's, Slurm's and Kubeflow's environments do not touch
// the process's own.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "ddp/environment.h"

namespace mgpu::testing {

inline EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace mgpu::testing
