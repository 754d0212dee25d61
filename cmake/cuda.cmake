# The optional CUDA backend. CHANNEL_CUDA=AUTO enables it when nvcc is found (on PATH, in
# $CUDA_PATH or /usr/local/cuda) and the build is not a sanitizer or fuzz build; ON fails the
# configure without nvcc; OFF never looks. Without it the engine is the CPU engine alone and
# `--device cuda` answers with a one-line error.
set(CHANNEL_HAS_CUDA OFF)
if(NOT CHANNEL_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(CHANNEL_NVCC nvcc HINTS ENV CUDA_PATH PATHS /usr/local/cuda/bin)
    if(CHANNEL_NVCC)
      set(CMAKE_CUDA_COMPILER ${CHANNEL_NVCC})
    endif()
  endif()
  if(CHANNEL_CUDA STREQUAL "ON" AND NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "CHANNEL_CUDA=ON but no nvcc was found (set CUDA_PATH or CMAKE_CUDA_COMPILER)")
  endif()
  if(CMAKE_CUDA_COMPILER AND CHANNEL_CUDA STREQUAL "AUTO" AND (CHANNEL_SANITIZE OR CHANNEL_FUZZ))
    message(STATUS "CUDA backend: off in sanitizer/fuzz builds (CHANNEL_CUDA=AUTO)")
  elseif(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # H100 / H200
    endif()
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 does not know C++20 for nvcc 13; the kernels need 17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CHANNEL_HAS_CUDA ON)
    message(STATUS "CUDA backend: on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm ${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "CUDA backend: off (no nvcc found)")
  endif()
endif()

# The backend as its own library, channel_cuda (host .cpp files through the C++ compiler,
# kernels through nvcc), over channel_core; CHANNEL_HAS_CUDA=1 for what links it. channel_core
# itself stays as in a CPU build (only backend/device.cpp and runtime's ring_device.cpp,
# context_device.cpp and cuda_context_session.cpp learn that the backend exists), so the other CPU objects are the same with and without CUDA. Frontends that offer --device cuda link
# it (channel_link_cuda).
function(channel_add_cuda_backend core)
  if(NOT CHANNEL_HAS_CUDA)
    return()
  endif()
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/backend/device.cpp TARGET_DIRECTORY ${core}
                              PROPERTIES COMPILE_DEFINITIONS CHANNEL_HAS_CUDA=1)
  file(GLOB cuda_host CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cpp)
  file(GLOB cuda_kernels CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
  add_library(channel_cuda STATIC ${cuda_host} ${cuda_kernels})
  # cuBLAS is opened at run time (cuda_cublas.cpp): its headers only, and libdl.
  target_link_libraries(channel_cuda PUBLIC ${core} CUDA::cudart_static ${CMAKE_DL_LIBS})
  target_compile_definitions(channel_cuda PUBLIC CHANNEL_HAS_CUDA=1)
  if(CHANNEL_CUDA_TIMELINE)  # only for measuring: every kernel's first block stamps the clock
    target_compile_definitions(channel_cuda PRIVATE CHANNEL_CUDA_TIMELINE=1)
  endif()
  # runtime/ring_device.cpp makes the device ring for `--device cuda` and the C API's device:
  # it alone in runtime/ learns that the backend exists, and channel_runtime links it.
  # runtime/context_device.cpp and runtime/cuda_context_session.cpp do the same for the
  # contiguous context.
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/runtime/ring_device.cpp
                              ${CMAKE_SOURCE_DIR}/src/runtime/context_device.cpp
                              ${CMAKE_SOURCE_DIR}/src/runtime/cuda_context_session.cpp
                              TARGET_DIRECTORY channel_runtime
                              PROPERTIES COMPILE_DEFINITIONS CHANNEL_HAS_CUDA=1)
  target_link_libraries(channel_runtime PRIVATE channel_cuda CUDA::cudart_static)
  target_compile_options(channel_cuda PRIVATE ${CHANNEL_WARNINGS}
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra -Werror=all-warnings --expt-relaxed-constexpr>)
endfunction()

# Links channel_cuda into `target` without its usage requirements, and defines
# CHANNEL_HAS_CUDA=1 for the listed sources of it only (they include backend/cuda/cuda_session.h,
# which needs no CUDA headers).
function(channel_link_cuda target)
  if(NOT TARGET channel_cuda)
    return()
  endif()
  target_link_libraries(${target} PRIVATE $<LINK_ONLY:channel_cuda> CUDA::cudart_static)
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target}
                              PROPERTIES COMPILE_DEFINITIONS CHANNEL_HAS_CUDA=1)
endfunction()
