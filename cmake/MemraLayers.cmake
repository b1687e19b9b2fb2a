# memra_add_layer(<name> [DEPS targets...])
#
# One static library per layer of DESIGN.md, built from src/<name>/*.cpp (and *.cu for the
# cuda layer). A layer with no sources yet is an INTERFACE library so that the layers above
# can already name it. Sources are globbed with CONFIGURE_DEPENDS: adding a file to a layer
# needs no CMake edit, and a new file is picked up by the next build.
function(memra_add_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp
       ${PROJECT_SOURCE_DIR}/src/${name}/*.cu)
  set(target memra_${name})
  if(srcs)
    add_library(${target} STATIC ${srcs})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                         PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${L_DEPS})
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${target} INTERFACE ${L_DEPS})
  endif()
endfunction()

# memra_find_c_library(<name> HEADER h NAMES libnames... [DEFINES defs...])
# -> imported target memra::<name>; a clear error naming the Debian package when absent.
function(memra_find_c_library name)
  cmake_parse_arguments(F "" "HEADER" "NAMES;DEFINES" ${ARGN})
  find_path(${name}_INCLUDE_DIR ${F_HEADER})
  find_library(${name}_LIBRARY NAMES ${F_NAMES})
  if(NOT ${name}_INCLUDE_DIR OR NOT ${name}_LIBRARY)
    message(FATAL_ERROR "memra: ${name} not found (${F_HEADER}, lib${F_NAMES}); "
                        "on Debian: apt-get install lib${name}-dev (./dev setup does it)")
  endif()
  add_library(memra::${name} UNKNOWN IMPORTED)
  set_target_properties(memra::${name} PROPERTIES
    IMPORTED_LOCATION ${${name}_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${${name}_INCLUDE_DIR}
    INTERFACE_COMPILE_DEFINITIONS "${F_DEFINES}")
  message(STATUS "memra: ${name} ${${name}_LIBRARY}")
endfunction()
