# pfx_add_library(<name> <PUBLIC|OPTIONAL|INTERNAL> [HEADER_ONLY] [SOURCES <file>...] [CUDA <file>...]
#                 [WITHOUT_CUDA <file>...]): the library pfx_<name>, also called pfx::<name> (its exported
# name too), C++20, with the headers of the calling folder's include/. One library per folder, and
# its visibility stated where it is declared, which decides its install and export:
#   PUBLIC    part of the package: its headers and library install with the component `pfx`, and it
#             is in the export set pfxTargets;
#   OPTIONAL  an install component of its own, `<name>`, with its own export set pfx<Name>Targets,
#             which pfxConfig.cmake includes where it was installed (find_package(pfx COMPONENTS <name>));
#   INTERNAL  pfx's own program, tests and benchmarks link it; never installed or exported. A PUBLIC or
#             OPTIONAL library that linked one fails at generation ("... requires target pfx_<name>
#             that is not in any export set"), so the boundary holds by construction.
# HEADER_ONLY makes an INTERFACE library. Otherwise it is compiled, position-independent, with pfx's
# warnings for its own sources. With PFX_CUDA a library with CUDA sources compiles them too, with
# the driver's CUDA checks (pfx_cuda_check) and the CUDA runtime linked statically; without, the
# WITHOUT_CUDA sources, which say why CUDA is not there.
# pfx_use_privately(<target> <interface target>): the include directories and compile options of an
# interface target of pfx's own build (pfx_warnings, pfx_cuda_check), for <target>'s sources only.
function(pfx_use_privately target used)
  target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:${used},INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_options(${target} PRIVATE $<TARGET_PROPERTY:${used},INTERFACE_COMPILE_OPTIONS>)
endfunction()

function(pfx_add_library name)
  cmake_parse_arguments(arg "PUBLIC;OPTIONAL;INTERNAL;HEADER_ONLY" "" "SOURCES;CUDA;WITHOUT_CUDA" ${ARGN})
  if(NOT arg_PUBLIC AND NOT arg_OPTIONAL AND NOT arg_INTERNAL)
    message(FATAL_ERROR "pfx_add_library(${name}): state its visibility: PUBLIC, OPTIONAL or INTERNAL")
  endif()
  if(arg_HEADER_ONLY)
    add_library(pfx_${name} INTERFACE)
    set(usage INTERFACE)
  else()
    add_library(pfx_${name} ${arg_SOURCES})
    set(usage PUBLIC)
    set_target_properties(pfx_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    # pfx's warnings (and below its CUDA checks) as options of its own sources, not as a link: a static
    # library's links, PRIVATE ones too, go into its export, and the build tree's export keeps what
    # BUILD_INTERFACE hides from the install's.
    pfx_use_privately(pfx_${name} pfx_warnings)
    if(NOT PFX_CUDA)
      target_sources(pfx_${name} PRIVATE ${arg_WITHOUT_CUDA})
    elseif(arg_CUDA)  # only a library with CUDA sources links the runtime; its users get it through it
      target_sources(pfx_${name} PRIVATE ${arg_CUDA})
      # The runtime outside BUILD_INTERFACE, so that the export carries it to consumers.
      target_link_libraries(pfx_${name} PRIVATE CUDA::cudart_static)
      pfx_use_privately(pfx_${name} pfx_cuda_check)
    endif()
  endif()
  add_library(pfx::${name} ALIAS pfx_${name})
  set_target_properties(pfx_${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(pfx_${name} ${usage}
    "$<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  target_compile_features(pfx_${name} ${usage} cxx_std_20)

  if(arg_INTERNAL OR NOT PFX_INSTALL)
    return()
  endif()
  set(component pfx)
  set(export_set pfxTargets)  # installed and exported once for all, by the top-level CMakeLists.txt
  if(arg_OPTIONAL)
    set(component ${name})
    string(SUBSTRING ${name} 0 1 first)
    string(SUBSTRING ${name} 1 -1 rest)
    string(TOUPPER ${first} first)
    set(export_set pfx${first}${rest}Targets)
  endif()
  install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/include/" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
          COMPONENT ${component})
  install(TARGETS pfx_${name} EXPORT ${export_set} COMPONENT ${component})
  if(arg_OPTIONAL)
    install(EXPORT ${export_set} NAMESPACE pfx:: DESTINATION "${PFX_CMAKE_DIR}" COMPONENT ${component})
    # The build tree is a package too (fmt's habit): written next to its pfxConfig.cmake.
    export(EXPORT ${export_set} NAMESPACE pfx:: FILE "${PROJECT_BINARY_DIR}/${export_set}.cmake")
  endif()
endfunction()
