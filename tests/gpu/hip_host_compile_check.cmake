# Compiles the host pass of each GPU source with hipcc for gfx906 (--cuda-host-only: no
# device code, no link), with the flags of a -DVEGA_HIP=ON build (cmake/gpu.cmake). The
# gfx906 audit compiles the device pass alone, so without this check a HIP build's host
# pass could break unseen (it did once: a device-only HIP function called outside a
# __HIP_DEVICE_COMPILE__ guard).
file(MAKE_DIRECTORY ${OUT})
foreach(f ${FILES})
  get_filename_component(n ${f} NAME_WE)
  message(STATUS "hipcc --cuda-host-only ${f}")
  execute_process(COMMAND ${HIPCC} -x hip --offload-arch=gfx906 -O3 -std=c++17 -fPIC -Wno-unused-command-line-argument
                          --cuda-host-only -DVEGA_GPU_TARGET_GFX906=1 -I${SRC}/src -c ${f} -o ${OUT}/${n}.o
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "hipcc (host pass) failed on ${f}")
  endif()
endforeach()
