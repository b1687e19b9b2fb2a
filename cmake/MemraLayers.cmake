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
