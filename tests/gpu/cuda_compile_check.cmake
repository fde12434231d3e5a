# Compiles each GPU source with nvcc for sm_90 (device + host code, no link):
# the CI check that the CUDA side of the one kernel source builds. DEFS: the
# target defines (default the NVIDIA table; the gfx906 emulation build passes its own).
file(MAKE_DIRECTORY ${OUT})
if(NOT DEFS)
  set(DEFS -DVEGA_GPU_TARGET_NVIDIA=1)
endif()
foreach(f ${FILES})
  get_filename_component(n ${f} NAME_WE)
  message(STATUS "nvcc -arch=sm_90 ${f}")
  execute_process(COMMAND ${NVCC} -arch=sm_90 -std=c++17 -O3 --expt-relaxed-constexpr ${DEFS} -I${SRC}/src -c ${f} -o ${OUT}/${n}.o
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nvcc failed on ${f}")
  endif()
endforeach()
