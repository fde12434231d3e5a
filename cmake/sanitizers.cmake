# The code that faces untrusted input built a second time under AddressSanitizer and
# UBSan (VEGA_ASAN_TESTS): every CPU module (a chat template or request reaches the
# engine through the server) as one static library, the `vega_asan` binary that the
# server and template tests start as their server / CLI, and their test binaries.
# -O1 keeps the build and the runs quick enough for CI on two cores.
set(VEGA_SAN_COMPILE -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g1)
set(VEGA_SAN_LINK -fsanitize=address,undefined)

set(_san_dirs gguf quant tokenizer template grammar backend backend/cpu model engine server server/http)
set(_san_src)
foreach(d ${_san_dirs})
  file(GLOB _s CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${d}/*.cpp)
  list(APPEND _san_src ${_s})
endforeach()
add_library(vega_san STATIC ${_san_src})
target_include_directories(vega_san PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(vega_san PUBLIC ${VEGA_SAN_COMPILE})
target_link_options(vega_san PUBLIC ${VEGA_SAN_LINK})
target_link_libraries(vega_san PUBLIC fmt::fmt Threads::Threads nlohmann_json::nlohmann_json PkgConfig::PCRE2)

# The vega command without the network commands (pull, -hf): what the tests run.
file(GLOB _san_cli CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cli/*.cpp)
list(FILTER _san_cli EXCLUDE REGEX "/cmd_pull\\.cpp$")
add_executable(vega_asan ${_san_cli})
target_link_libraries(vega_asan PRIVATE vega_san CLI11::CLI11)
