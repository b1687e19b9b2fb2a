# memra_add_layer(<name> [DEPS targets...] [EXPORT <set>])
#
# One static library per layer of DESIGN.md, built from src/<name>/*.cpp (and *.cu for the
# cuda layer). A layer with no sources yet is an INTERFACE library so that the layers above
# can already name it. Sources are globbed with CONFIGURE_DEPENDS: adding a file to a layer
# needs no CMake edit, and a new file is picked up by the next build.
#
# Every layer is installed and exported (cmake --install; docs/package.md): target memra_<name>,
# alias and exported name memra::<name>, in the export set <set> (default memra-targets; the
# GoogleTest-based testing layer has its own, loaded by the package config only with GTest).
# Headers come from include/ in the build tree and <prefix>/include once installed.
include(MemraFindCLibrary)

function(memra_add_layer name)
  cmake_parse_arguments(L "" "EXPORT" "DEPS" ${ARGN})
  if(NOT L_EXPORT)
    set(L_EXPORT memra-targets)
  endif()
  file(GLOB srcs CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp
       ${PROJECT_SOURCE_DIR}/src/${name}/*.cu)
  set(target memra_${name})
  if(srcs)
    add_library(${target} STATIC ${srcs})
    target_include_directories(${target}
      PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
      PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${L_DEPS})
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${target} INTERFACE ${L_DEPS})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  add_library(memra::${name} ALIAS ${target})
  install(TARGETS ${target} EXPORT ${L_EXPORT} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
