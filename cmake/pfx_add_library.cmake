# pfx_add_library(<name> SOURCES <file>... [CUDA <file>...] [WITHOUT_CUDA <file>...]): the compiled
# library pfx_<name>, also called pfx::<name> (its exported name too), position-independent, C++20,
# with the headers of the calling folder's include/ (installed into CMAKE_INSTALL_INCLUDEDIR) and
# pfx's warnings for its own sources. With PFX_CUDA it compiles the CUDA sources too, with the
# driver's CUDA checks (pfx_cuda_check) and the CUDA runtime linked statically; without, the
# WITHOUT_CUDA sources, which say why CUDA is not there.
# pfx_use_privately(<target> <interface target>): the include directories and compile options of an
# interface target of pfx's own build (pfx_warnings, pfx_cuda_check), for <target>'s sources only.
function(pfx_use_privately target used)
  target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:${used},INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_options(${target} PRIVATE $<TARGET_PROPERTY:${used},INTERFACE_COMPILE_OPTIONS>)
endfunction()

function(pfx_add_library name)
  cmake_parse_arguments(arg "" "" "SOURCES;CUDA;WITHOUT_CUDA" ${ARGN})
  add_library(pfx_${name} ${arg_SOURCES})
  add_library(pfx::${name} ALIAS pfx_${name})
  set_target_properties(pfx_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(pfx_${name} PUBLIC
    "$<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  # pfx's warnings (and below its CUDA checks) as options of its own sources, not as a link: a static
  # library's links, PRIVATE ones too, go into its export, and the build tree's export keeps what
  # BUILD_INTERFACE hides from the install's.
  pfx_use_privately(pfx_${name} pfx_warnings)
  target_compile_features(pfx_${name} PUBLIC cxx_std_20)
  if(PFX_CUDA)
    target_sources(pfx_${name} PRIVATE ${arg_CUDA})
    # The runtime outside BUILD_INTERFACE, so that the export carries it to consumers.
    target_link_libraries(pfx_${name} PRIVATE CUDA::cudart_static)
    pfx_use_privately(pfx_${name} pfx_cuda_check)
  else()
    target_sources(pfx_${name} PRIVATE ${arg_WITHOUT_CUDA})
  endif()
endfunction()
