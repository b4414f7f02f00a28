# Helpers that give every mgpu target the same warnings, include layout and precompiled header.

# LibTorch's include dir ships fmt 12 and a protobuf of its own; Debian's spdlog 1.10 needs
# fmt 9 and our generated code needs Debian's protobuf 3.21. A folder holding only links to the
# Debian headers (`fmt`, `google`), put first on the include path, wins over both, where
# `-isystem /usr/include` cannot (GCC ignores reordering of system dirs).
get_target_property(_mgpu_fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
list(GET _mgpu_fmt_includes 0 _mgpu_fmt_include)
list(GET Protobuf_INCLUDE_DIRS 0 _mgpu_protobuf_include)
set(MGPU_INCLUDE_SHIM_DIR ${PROJECT_BINARY_DIR}/include-shim)
file(MAKE_DIRECTORY ${MGPU_INCLUDE_SHIM_DIR})
file(CREATE_LINK ${_mgpu_fmt_include}/fmt ${MGPU_INCLUDE_SHIM_DIR}/fmt SYMBOLIC)
file(CREATE_LINK ${_mgpu_protobuf_include}/google ${MGPU_INCLUDE_SHIM_DIR}/google SYMBOLIC)

# Whether the LibTorch we build against has CUDA (the pinned wheel does, even on CPU machines).
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CUDA_FOUND)
  set(MGPU_WITH_CUDA ON)
else()
  set(MGPU_WITH_CUDA OFF)
endif()
message(STATUS "mgpu: LibTorch ${Torch_VERSION}, CUDA support: ${MGPU_WITH_CUDA}")

set(MGPU_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter)

# One precompiled LibTorch header shared by every target that includes torch (REUSE_FROM).
# -pthread everywhere: gRPC's re2 dependency adds it (it defines _REENTRANT) to whatever links
# gRPC, and GCC refuses a header precompiled without it.
set(MGPU_TORCH_FLAGS -pthread)
add_library(mgpu_torch_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cpp)
target_link_libraries(mgpu_torch_pch PUBLIC torch)
target_compile_options(mgpu_torch_pch PRIVATE ${MGPU_WARNINGS} ${MGPU_TORCH_FLAGS})
target_include_directories(mgpu_torch_pch SYSTEM BEFORE PRIVATE ${MGPU_INCLUDE_SHIM_DIR})
target_precompile_headers(mgpu_torch_pch PRIVATE <torch/torch.h>)
if(MGPU_WITH_CUDA)
  target_compile_definitions(mgpu_torch_pch PUBLIC MGPU_WITH_CUDA=1)
endif()

# mgpu_configure_target(TARGET [TORCH])
#   Warnings, the repository root as include root, the include shim, and with TORCH the shared
#   precompiled header plus CUDA definitions.
function(mgpu_configure_target target)
  cmake_parse_arguments(ARG "TORCH" "" "" ${ARGN})
  target_compile_options(${target} PRIVATE ${MGPU_WARNINGS})
  target_include_directories(${target} SYSTEM BEFORE PRIVATE ${MGPU_INCLUDE_SHIM_DIR})
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    # libtorch.so bundles and exports parts of a newer libstdc++ (std::filesystem operations,
    # the chrono time-zone database) whose code jumps to null inside Debian's runtime. Making
    # libstdc++.so the first DT_NEEDED entry lets the dynamic linker bind those names to it.
    target_link_options(${target} BEFORE PRIVATE
                        LINKER:--push-state,--no-as-needed -lstdc++ LINKER:--pop-state)
  else()
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  endif()
  if(ARG_TORCH)
    target_link_libraries(${target} PUBLIC torch)
    target_compile_options(${target} PRIVATE ${MGPU_TORCH_FLAGS})
    target_precompile_headers(${target} REUSE_FROM mgpu_torch_pch)
    if(MGPU_WITH_CUDA)
      target_compile_definitions(${target} PUBLIC MGPU_WITH_CUDA=1)
    endif()
  endif()
endfunction()
