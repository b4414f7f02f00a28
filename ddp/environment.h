// Reading the environment that launchers (torchrun, mpirun, srun, Kubeflow) set, through a lookup
// that tests replace with a fake.
#pragma once

#include <functional>
#include <optional>

namespace mgpu {

// Looks up an environment variable; returns nullptr when unset. Tests pass a fake.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup ProcessEnvironment();

// Whether the variable is set to a non-empty value (launchers export empty ones to mean unset).
bool EnvIsSet(const EnvLookup& env, const char* name);

// The variable as a non-negative integer (at most 1,000,000), or nullopt when unset or empty.
// Throws BadInputError naming the variable and `set_by` (who normally sets it) otherwise.
std::optional<int> ReadEnvInt(const EnvLookup& env, const char* name, const char* set_by);

}  // namespace mgpu
