# Sourced by the GPU-machine scripts (gpu_check.sh, serve_peer_bench.sh): libraries the
# image may lack (PCRE2, fmt, CLI11, GoogleTest, nlohmann-json), carried as extracted
# Debian packages in .devdata/deps (apt-get download, dpkg -x). The network commands
# (libcurl, OpenSSL, cpp-httplib; VEGA_NET=ON) take theirs from .devdata/netdeps, carried
# only for those runs. Both become one sysroot for pkg-config and CMake.
if [ -d .devdata/netdeps/usr ]; then mkdir -p .devdata/deps && cp -a --update=none .devdata/netdeps/. .devdata/deps/ 2>/dev/null || cp -an .devdata/netdeps/. .devdata/deps/; fi
if [ -d .devdata/deps/usr ]; then
  D=$PWD/.devdata/deps
  # One nlohmann-json only: where the image has its own, the carried headers (on the
  # include path of every pkg-config library here) would give modules two ABIs.
  [ -d /usr/include/nlohmann ] && rm -rf "$D/usr/include/nlohmann" "$D/usr/share/cmake/nlohmann_json" "$D/usr/share/pkgconfig/nlohmann_json.pc"
  export CMAKE_PREFIX_PATH=$D/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export PKG_CONFIG_PATH=$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$D
  export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
