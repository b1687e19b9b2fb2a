# memra_find_c_library(<name> HEADER h NAMES libnames... [DEFINES defs...] [HINTS dirs...]
#                      [RESULT <var>])
# -> imported target memra::<name> (PCRE2, utf8proc: C libraries found by path rather than
# pkg-config, so that packages unpacked under a prefix, e.g. the GPU machine's /opt/memra-deps,
# are found through CMAKE_PREFIX_PATH).
#
# Used by the project (CMakeLists.txt) and, installed next to memra-config.cmake, by the package
# config to re-create the same imported targets in a consumer. Without RESULT a missing library is
# a fatal error naming the Debian package; with RESULT <var> is set TRUE/FALSE and nothing fails
# (a package config must report "not found" instead of stopping the consumer's configure).
# An existing memra::<name> is kept (the config may be loaded twice).
function(memra_find_c_library name)
  cmake_parse_arguments(F "" "HEADER;RESULT" "NAMES;DEFINES;HINTS" ${ARGN})
  if(TARGET memra::${name})
    if(F_RESULT)
      set(${F_RESULT} TRUE PARENT_SCOPE)
    endif()
    return()
  endif()
  set(include_hints)
  set(lib_hints)
  foreach(h IN LISTS F_HINTS)
    list(APPEND include_hints ${h} ${h}/include)
    list(APPEND lib_hints ${h} ${h}/lib)
  endforeach()
  find_path(MEMRA_${name}_INCLUDE_DIR ${F_HEADER} HINTS ${include_hints})
  find_library(MEMRA_${name}_LIBRARY NAMES ${F_NAMES} HINTS ${lib_hints})
  if(NOT MEMRA_${name}_INCLUDE_DIR OR NOT MEMRA_${name}_LIBRARY)
    set(msg "memra: ${name} not found (${F_HEADER}, lib${F_NAMES}); "
            "on Debian: apt-get install lib${name}-dev (./dev setup does it)")
    if(F_RESULT)
      set(${F_RESULT} FALSE PARENT_SCOPE)
      set(MEMRA_FIND_C_LIBRARY_MESSAGE "${msg}" PARENT_SCOPE)
      return()
    endif()
    message(FATAL_ERROR ${msg})
  endif()
  add_library(memra::${name} UNKNOWN IMPORTED)
  set_target_properties(memra::${name} PROPERTIES
    IMPORTED_LOCATION ${MEMRA_${name}_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${MEMRA_${name}_INCLUDE_DIR}
    INTERFACE_COMPILE_DEFINITIONS "${F_DEFINES}")
  if(F_RESULT)
    set(${F_RESULT} TRUE PARENT_SCOPE)
  else()
    message(STATUS "memra: ${name} ${MEMRA_${name}_LIBRARY}")
  endif()
endfunction()
