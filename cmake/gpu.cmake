# GPU backend: one kernel source (src/backend/gpu/**/*.cu) built with nvcc
# (-DVEGA_CUDA=ON, archs VEGA_CUDA_ARCHS, default 90) or hipcc (-DVEGA_HIP=ON,
# archs VEGA_HIP_ARCHS, default gfx906). CMake's HIP language needs
# hip-lang-config.cmake, which Debian's HIP 5.2 lacks, so HIP sources are
# compiled by custom commands into objects. Produces vega_gpu and wires it
# into vega_engine (VEGA_HAVE_GPU=1).
if(VEGA_HIP AND VEGA_CUDA)
  message(FATAL_ERROR "VEGA_HIP and VEGA_CUDA are exclusive: configure two build directories")
endif()


file(GLOB VEGA_GPU_CU CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/gpu/*.cu
     ${CMAKE_SOURCE_DIR}/src/backend/gpu/kernels/*.cu)
file(GLOB VEGA_GPU_HEADERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/gpu/*.h
     ${CMAKE_SOURCE_DIR}/src/backend/gpu/arch/*.h ${CMAKE_SOURCE_DIR}/src/backend/gpu/kernels/*.h
     ${CMAKE_SOURCE_DIR}/src/quant/types.h)

if(VEGA_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  set(VEGA_CUDA_ARCHS "90" CACHE STRING "CUDA architectures to build (e.g. 80;86;89;90)")
  # Every NVIDIA architecture uses the nvidia table (src/backend/gpu/arch/nvidia.h), or
  # gfx906's in the emulation build (VEGA_GPU_EMULATE_GFX906).
  foreach(a ${VEGA_CUDA_ARCHS})
    if(a MATCHES "^([0-9]+)" AND CMAKE_MATCH_1 LESS 61)
      message(FATAL_ERROR "VEGA_CUDA_ARCHS: ${a} is too old (61 or newer: dp4a)")
    endif()
  endforeach()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_library(vega_gpu_kernels STATIC ${VEGA_GPU_CU})
  # The top-level -Wall/-Wextra are host-compiler flags nvcc does not take.
  set_property(TARGET vega_gpu_kernels PROPERTY COMPILE_OPTIONS "")
  set_target_properties(vega_gpu_kernels PROPERTIES CUDA_ARCHITECTURES "${VEGA_CUDA_ARCHS}" CUDA_STANDARD 17
                        CUDA_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON)
  target_compile_options(vega_gpu_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr>)
  if(VEGA_GPU_TUNING)
    target_compile_definitions(vega_gpu_kernels PRIVATE VEGA_GPU_TUNING=1)
  endif()
  target_include_directories(vega_gpu_kernels PUBLIC ${CMAKE_SOURCE_DIR}/src)
  if(VEGA_GPU_EMULATE_GFX906)
    # gfx906's table and code paths on NVIDIA (src/backend/gpu/gfx906_emulation.h).
    target_compile_definitions(vega_gpu_kernels PUBLIC VEGA_GPU_TARGET_GFX906=1 VEGA_GPU_EMULATE_GFX906=1)
    set(VEGA_GPU_VENDOR "CUDA ${VEGA_CUDA_ARCHS}, gfx906 emulation")
  else()
    target_compile_definitions(vega_gpu_kernels PUBLIC VEGA_GPU_TARGET_NVIDIA=1)
    set(VEGA_GPU_VENDOR "CUDA ${VEGA_CUDA_ARCHS}")
  endif()
  target_link_libraries(vega_gpu_kernels PUBLIC CUDA::cudart)
else()
  find_program(VEGA_HIPCC NAMES hipcc REQUIRED)
  set(VEGA_HIP_ARCHS "gfx906" CACHE STRING "AMD GPU targets to build (e.g. gfx906;gfx908)")
  find_library(VEGA_AMDHIP64 amdhip64 PATHS /opt/rocm/lib REQUIRED)
  # One target table per build (src/backend/gpu/arch/<table>.h, selected in arch.h):
  # each architecture maps to its table, and they must all map to the same one.
  set(_offload)
  foreach(a ${VEGA_HIP_ARCHS})
    if(a MATCHES "^gfx1[0-9]")
      # RDNA (gfx10xx, gfx11xx, gfx12xx) runs 32-lane waves: every wave primitive and
      # kernel shape of the HIP path assumes 64 (wave.h also asserts it at compile time).
      message(FATAL_ERROR "VEGA_HIP_ARCHS: ${a} is a wave32 (RDNA) target; vega's HIP kernels are written "
                          "for 64-lane waves (gfx906). Build for gfx906, or add a wave32 target table.")
    endif()
    if(a MATCHES "^gfx906")
      set(_table GFX906)
    else()
      message(FATAL_ERROR "VEGA_HIP_ARCHS: no target table for ${a} (add src/backend/gpu/arch/<target>.h, "
                          "select it in arch.h and map ${a} to it here)")
    endif()
    if(DEFINED _hip_table AND NOT _hip_table STREQUAL _table)
      message(FATAL_ERROR "VEGA_HIP_ARCHS: ${VEGA_HIP_ARCHS} need two target tables; configure one build per table")
    endif()
    set(_hip_table ${_table})
    list(APPEND _offload --offload-arch=${a})
  endforeach()
  set(_objs)
  foreach(src ${VEGA_GPU_CU})
    get_filename_component(_n ${src} NAME_WE)
    set(_obj ${CMAKE_CURRENT_BINARY_DIR}/vega_gpu_hip/${_n}.o)
    add_custom_command(
      OUTPUT ${_obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/vega_gpu_hip
      COMMAND ${VEGA_HIPCC} -x hip ${_offload} -O3 -std=c++17 -fPIC -Wno-unused-command-line-argument
              $<$<BOOL:${VEGA_GPU_TUNING}>:-DVEGA_GPU_TUNING=1> -DVEGA_GPU_TARGET_${_hip_table}=1
              -I${CMAKE_SOURCE_DIR}/src -c ${src} -o ${_obj}
      DEPENDS ${src} ${VEGA_GPU_HEADERS}
      COMMENT "hipcc ${_n}.cu (${VEGA_HIP_ARCHS})"
      VERBATIM)
    list(APPEND _objs ${_obj})
  endforeach()
  set_source_files_properties(${_objs} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(vega_gpu_kernels STATIC ${_objs})
  set_target_properties(vega_gpu_kernels PROPERTIES LINKER_LANGUAGE CXX)
  target_include_directories(vega_gpu_kernels PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(vega_gpu_kernels INTERFACE VEGA_GPU_TARGET_${_hip_table}=1)
  target_link_libraries(vega_gpu_kernels PUBLIC ${VEGA_AMDHIP64})
  set(VEGA_GPU_VENDOR "HIP ${VEGA_HIP_ARCHS}")
endif()

# Host side: the Backend class and the weight repacking (ordinary C++).
add_library(vega_gpu STATIC ${CMAKE_SOURCE_DIR}/src/backend/gpu/gpu_backend.cpp
            ${CMAKE_SOURCE_DIR}/src/backend/gpu/repack.cpp
            ${CMAKE_SOURCE_DIR}/src/backend/gpu/collective_nccl.cpp
            ${CMAKE_SOURCE_DIR}/src/backend/gpu/collective_peer.cpp)
target_include_directories(vega_gpu PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(vega_gpu PUBLIC vega_gpu_kernels vega_cpu vega_quant vega_gguf fmt::fmt Threads::Threads
                      ${CMAKE_DL_LIBS})

target_link_libraries(vega_engine PUBLIC vega_gpu)
target_compile_definitions(vega_engine PUBLIC VEGA_HAVE_GPU=1)
message(STATUS "vega: GPU backend enabled (${VEGA_GPU_VENDOR})")

