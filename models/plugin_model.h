// Loads a model factory from a plugin library (`--model plugin:LIB.so:NAME`, models/model_plugin.h
// describes what a plugin exports) and builds a model with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model_factory.h"

namespace mgpu {

// dlopens `library` (RTLD_NOW | RTLD_LOCAL; never closed, as the models it builds run its code),
// checks its mgpu_model_plugin_info() against this build's interface, LibTorch version and C++
// ABI, and calls mgpu_model_`name` for `shape`. `spec` is the --model value, for messages.
// Throws BadInputError when the library cannot be loaded, was built against another interface,
// lacks the factory (naming the ones it has) or the factory fails.
std::shared_ptr<Classifier> MakePluginModel(const std::string& library, const std::string& name,
                                            const ModelShape& shape, const std::string& spec);

// The NAMEs of the mgpu_model_NAME functions an ELF shared library exports, from its dynamic
// symbol table, sorted; empty when the file is not a 64-bit ELF file or exports none.
std::vector<std::string> PluginFactoryNames(const std::string& library);

}  // namespace mgpu
