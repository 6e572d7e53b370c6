# Compiles through ccache (Debian's) when it is found, so that a second clean clone, or CI after a
# session, builds in a fraction of the time. The cache lives outside the clone (ccache's own default,
# ~/.cache/ccache, or CCACHE_DIR). CCACHE_BASEDIR makes the paths relative to the source tree, so
# that clones in different folders share their entries. PFX_CCACHE=OFF, or a launcher of the user's
# own, turns it off.
option(PFX_CCACHE "Compile through ccache when it is found" ON)
if(PFX_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(PFX_CCACHE_PROGRAM ccache)
  if(PFX_CCACHE_PROGRAM)
    set(pfx_launcher "${CMAKE_COMMAND}" -E env "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
        CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros "${PFX_CCACHE_PROGRAM}")
    set(CMAKE_CXX_COMPILER_LAUNCHER ${pfx_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${pfx_launcher})
    message(STATUS "pfx: compiling through ${PFX_CCACHE_PROGRAM}")
  endif()
endif()
