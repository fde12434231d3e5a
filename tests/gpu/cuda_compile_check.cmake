# Compiles each GPU source with nvcc for sm_90 (device + host code, no link):
# the CI check that the CUDA side of the one kernel source builds. DEFS: the
# target defines (default the NVIDIA table; the gfx906 emulation build passes its own).
#
# Also fails on a kernel (or device function) with a stack frame but no spills: local
# memory that is not register pressure but a copy, as of a parameter array indexed at
# run time. Every thread then stores the whole parameter at the kernel's start (the
# tensor-parallel o / down epilogue's 88-byte frame cost ~6% of a decode step on
# 2 H200s, docs/PERFORMANCE.md, forty-first session). Register spills (a frame with
# spill stores) are reported by ptxas as such and are not this check's business. Only with
# STACK_CHECK (the sm_90 build): the gfx906 emulation build's cross-lane emulation keeps a
# 16-byte frame in most kernels by design (gfx906 itself: the audit fails on any scratch).
file(MAKE_DIRECTORY ${OUT})
if(NOT DEFS)
  set(DEFS -DVEGA_GPU_TARGET_NVIDIA=1)
endif()
set(copies "")
foreach(f ${FILES})
  get_filename_component(n ${f} NAME_WE)
  message(STATUS "nvcc -arch=sm_90 ${f}")
  execute_process(COMMAND ${NVCC} -arch=sm_90 -std=c++17 -O3 --expt-relaxed-constexpr ${DEFS} -I${SRC}/src
                          -Xptxas -v -c ${f} -o ${OUT}/${n}.o
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nvcc failed on ${f}:\n${err}")
  endif()
  if(NOT STACK_CHECK)
    continue()
  endif()
  string(REPLACE "\n" ";" lines "${err}")
  set(fn "")
  foreach(l IN LISTS lines)
    if(l MATCHES "Function properties for ([^ ]+)")
      set(fn ${CMAKE_MATCH_1})
    elseif(l MATCHES "([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores")
      if(NOT CMAKE_MATCH_1 EQUAL 0 AND CMAKE_MATCH_2 EQUAL 0)
        list(APPEND copies "${n}.cu: ${fn} (${CMAKE_MATCH_1}-byte stack frame, no spills)")
      endif()
    endif()
  endforeach()
endforeach()
if(copies)
  string(REPLACE ";" "\n  " list "${copies}")
  message(FATAL_ERROR "local-memory copies in kernels (a runtime index into a parameter or local array?); "
                      "demangle with c++filt:\n  ${list}")
endif()
