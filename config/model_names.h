// --model's values, without LibTorch: the built-in architectures' names, and the user's own
// model, named by a prefixed value kept verbatim (paths are case-sensitive):
//   torchscript:PATH        a module saved from Python by torch.jit.script/trace
//   plugin:LIB.so:NAME      the factory mgpu_model_NAME of a C++ plugin library
// models/model_factory.h builds them.
#pragma once

#include <string>
#include <vector>

namespace mgpu {

inline constexpr char kTorchScriptPrefix[] = "torchscript:";
inline constexpr char kPluginPrefix[] = "plugin:";

// Names accepted by MakeModel, in the order help texts list them.
const std::vector<std::string>& ModelNames();

// Whether `name` names a user's model (a torchscript: or plugin: value) rather than a built-in.
bool IsUserModel(const std::string& name);

// A short form of `name` for folder and run names: the built-in's name, torchscript-STEM (the
// file name without its folder and extension) or plugin-NAME.
std::string ModelLabel(const std::string& name);

}  // namespace mgpu
