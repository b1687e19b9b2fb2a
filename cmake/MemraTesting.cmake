# Test registration. Every test executable is a GoogleTest program whose cases CTest discovers
# at test time (DISCOVERY_MODE PRE_TEST: the build never runs a test binary, so a build on a
# machine without a GPU works for GPU tests too).
include(GoogleTest)

# memra_add_test(<target> SOURCES files... [LIBS targets...] [LABELS labels...] [TIMEOUT s])
# Host tests: label `cpu` plus the kind given in LABELS (unit, op, ...).
function(memra_add_test target)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;PROPERTIES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${target} ${T_SOURCES})
  target_link_libraries(${target} PRIVATE ${T_LIBS} GTest::gmock GTest::gtest_main)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/test)
  target_compile_definitions(${target} PRIVATE
    MEMRA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" MEMRA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${target}
    DISCOVERY_MODE PRE_TEST
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ${T_PROPERTIES})
endfunction()
