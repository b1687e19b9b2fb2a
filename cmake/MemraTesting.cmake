# Test registration. Every test executable is a GoogleTest program whose cases CTest discovers
# at test time (DISCOVERY_MODE PRE_TEST: the build never runs a test binary, so a build on a
# machine without a GPU works for GPU tests too).
#
# Labels (docs/testing.md): `cpu` (host only) or `gpu`; one per GPU architecture family a test
# is meaningful on; `multi_gpu`; and kinds. `ctest -L` takes a regular expression, so select
# with anchored forms: ctest -L '^h100$' --no-tests=error.
#
# The arch labels, their compute capabilities and CUDA archs are the table cmake/archs.txt
# (read by cmake/MemraArchs.cmake: MEMRA_ARCH_LABELS, memra_arch_labels()).
include(GoogleTest)
#
# CTest names equal GTest names (`Suite.Case` / `Inst/Suite.Case/param_name`): every
# gtest_discover_tests call passes NO_PRETTY_VALUES. Without it CMake keeps the listing's
# "  # GetParam() = ..." suffix on value-parameterised cases whose name comes from a name
# generator (it only rewrites numeric indices), so the JUnit names no longer match the GTest XML
# and gate reports that ctest/summary.py joins them with, and --gtest_filter cannot take them.

set(MEMRA_KIND_LABELS unit op gate canary bench slow)

# Labels for the tests that gtest_discover_tests finds at ctest time. They cannot go through its
# PROPERTIES: the list "cpu;unit" is split on the way (cmake_parse_arguments unescapes), leaving
# LABELS=cpu and a stray property "unit" — the label silently lost. Instead a small script,
# included by CTest after the discovery script, labels every test in the discovered TEST_LIST.
# With a regex and other labels (ARGV2, ARGV3): the tests whose name matches get those instead.
# Each test's LABELS is set once: in a CTest script a second set_tests_properties(LABELS) on the
# same test adds to the first instead of replacing it.
function(_memra_label_discovered target labels)
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  if(ARGC GREATER 3)
    file(WRITE ${script}
         "set(memra_plain)\n"
         "set(memra_matched)\n"
         "foreach(t IN LISTS memra_${target}_TESTS)\n"
         "  if(t MATCHES \"${ARGV2}\")\n"
         "    list(APPEND memra_matched \"\${t}\")\n"
         "  else()\n"
         "    list(APPEND memra_plain \"\${t}\")\n"
         "  endif()\n"
         "endforeach()\n"
         "if(memra_matched)\n"
         "  set_tests_properties(\${memra_matched} PROPERTIES LABELS \"${ARGV3}\")\n"
         "endif()\n")
  else()
    file(WRITE ${script} "set(memra_plain \"\${memra_${target}_TESTS}\")\n")
  endif()
  file(APPEND ${script}
       "if(NOT \"\${memra_plain}\" STREQUAL \"\")\n"
       "  set_tests_properties(\${memra_plain} PROPERTIES LABELS \"${labels}\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

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
    TEST_PREFIX "${G_PREFIX}"
    DISCOVERY_MODE PRE_TEST
    NO_PRETTY_VALUES
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    TEST_LIST memra_${target}_TESTS
    PROPERTIES TIMEOUT ${T_TIMEOUT} ${T_PROPERTIES})
  _memra_label_discovered(${target} "${T_LABELS}")
endfunction()

# memra_add_gate(<target> SOURCES files... ARCHS h100 [b200 rtx5090] [LABELS kinds...]
#                [GPUS n] [SLOTS s] [LIBS targets...] [TIMEOUT s] [PREFIX p])
#
# A GPU test executable (op tests, gates, canaries, GPU benchmarks' smoke runs):
# - labels: gpu, every arch of ARCHS, the kinds of LABELS (unit op gate canary bench slow),
#   and multi_gpu when GPUS > 1. An unknown arch or kind is a configure error, so a typo can
#   never drop a test out of `ctest -L '^h100$'`.
# - the arch list is compiled in as MEMRA_TEST_ARCHS ("h100;b200"): at run time the test skips
#   on any other GPU or without one (memra/testing/gpu.h), and fails instead under
#   MEMRA_REQUIRE_GPU=1.
# - RESOURCE_GROUPS "GPUS,gpus:SLOTS" (SLOTS of 100 per card, default 100 = the whole card), so
#   `ctest -j --resource-spec-file <build>/gpu-resources.json` never oversubscribes a card.
#   Tests labelled bench also get RUN_SERIAL: timing arms run alone.
# - TIMEOUT defaults: 300 s (op, unit), 1800 s (gate, canary), 3600 s (slow).
# - PREFIX: prepended to the discovered test names, for a gate file built twice (its split-model
#   targets: test/exactness/split.h), so the two targets' cases stay apart in CTest.
# Canaries live in their gate's own binary (one file and one target per gate; an op binary may
# hold one too, `DeviceCanary` in ops_device): a case whose GTest suite name ends in `Canary`
# (`Inst/DecodeGraphCanary.BrokenGraphArmFails/...`) gets the label `canary` instead of `gate`
# (or `op`), so `ctest -L canary` and `ctest -L gate` select them apart and
# --gtest_filter='*Canary.*' runs a gate's canaries alone.
function(memra_add_gate target)
  cmake_parse_arguments(G "" "GPUS;SLOTS;TIMEOUT;PREFIX" "SOURCES;ARCHS;LABELS;LIBS;PROPERTIES" ${ARGN})
  if(NOT G_SOURCES)
    message(FATAL_ERROR "memra_add_gate(${target}): SOURCES is required")
  endif()
  if(NOT G_ARCHS)
    message(FATAL_ERROR "memra_add_gate(${target}): ARCHS is required (any of ${MEMRA_ARCH_LABELS})")
  endif()
  foreach(a IN LISTS G_ARCHS)
    if(NOT a IN_LIST MEMRA_ARCH_LABELS)
      message(FATAL_ERROR "memra_add_gate(${target}): unknown arch '${a}' (known: ${MEMRA_ARCH_LABELS})")
    endif()
  endforeach()
  foreach(k IN LISTS G_LABELS)
    if(NOT k IN_LIST MEMRA_KIND_LABELS)
      message(FATAL_ERROR "memra_add_gate(${target}): unknown label '${k}' (kinds: ${MEMRA_KIND_LABELS})")
    endif()
  endforeach()
  if(NOT G_GPUS)
    set(G_GPUS 1)
  endif()
  if(NOT G_SLOTS)
    set(G_SLOTS 100)
  endif()
  if(NOT G_TIMEOUT)
    if("slow" IN_LIST G_LABELS)
      set(G_TIMEOUT 3600)
    elseif("gate" IN_LIST G_LABELS OR "canary" IN_LIST G_LABELS)
      set(G_TIMEOUT 1800)
    else()
      set(G_TIMEOUT 300)
    endif()
  endif()

  set(labels gpu ${G_ARCHS} ${G_LABELS})
  if(G_GPUS GREATER 1)
    list(APPEND labels multi_gpu)
  endif()
  set(extra_props)
  if("bench" IN_LIST G_LABELS)
    list(APPEND extra_props RUN_SERIAL TRUE)
  endif()

  add_executable(${target} ${G_SOURCES})
  target_link_libraries(${target} PRIVATE ${G_LIBS} memra_testing GTest::gmock GTest::gtest_main)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/test)
  string(REPLACE ";" "," archs_csv "${G_ARCHS}")
  target_compile_definitions(${target} PRIVATE
    MEMRA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" MEMRA_BINARY_DIR="${PROJECT_BINARY_DIR}"
    MEMRA_TEST_ARCHS="${archs_csv}" MEMRA_TEST_GPUS=${G_GPUS})
  gtest_discover_tests(${target}
    TEST_PREFIX "${G_PREFIX}"
    DISCOVERY_MODE PRE_TEST
    NO_PRETTY_VALUES
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    TEST_LIST memra_${target}_TESTS
    # One GTest XML per case (RecordProperty's key figures live there); gpu-ci.sh collects them.
    XML_OUTPUT_DIR ${PROJECT_BINARY_DIR}/test-results/gtest
    PROPERTIES TIMEOUT ${G_TIMEOUT} RESOURCE_GROUPS "${G_GPUS},gpus:${G_SLOTS}"
               ${extra_props} ${G_PROPERTIES})
  if("gate" IN_LIST labels OR "op" IN_LIST labels)
    set(canary_labels ${labels})
    list(TRANSFORM canary_labels REPLACE "^(gate|op)$" "canary")
    _memra_label_discovered(${target} "${labels}" "Canary[.]" "${canary_labels}")
  else()
    _memra_label_discovered(${target} "${labels}")
  endif()
endfunction()

# The CTest resource spec: one `gpus` resource per card with 100 slots. Written at configure
# time for MEMRA_GPU_COUNT cards (default: what nvidia-smi sees here, else 1); ctest/gpu-ci.sh
# rewrites it for the machine it runs on (ctest/resource-spec.sh).
function(memra_write_resource_spec)
  if(NOT DEFINED MEMRA_GPU_COUNT)
    set(n 1)
    find_program(MEMRA_NVIDIA_SMI nvidia-smi)
    if(MEMRA_NVIDIA_SMI)
      execute_process(COMMAND ${MEMRA_NVIDIA_SMI} -L OUTPUT_VARIABLE out RESULT_VARIABLE rc
                      ERROR_QUIET)
      if(rc EQUAL 0)
        string(REGEX MATCHALL "GPU [0-9]+:" gpus "${out}")
        list(LENGTH gpus found)
        if(found GREATER 0)
          set(n ${found})
        endif()
      endif()
    endif()
    set(MEMRA_GPU_COUNT ${n} CACHE STRING "GPUs in the generated CTest resource spec")
  endif()
  set(entries)
  math(EXPR last "${MEMRA_GPU_COUNT} - 1")
  foreach(i RANGE ${last})
    list(APPEND entries "{\"id\": \"${i}\", \"slots\": 100}")
  endforeach()
  list(JOIN entries ", " joined)
  file(WRITE ${PROJECT_BINARY_DIR}/gpu-resources.json
       "{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"gpus\": [${joined}]}]}\n")
endfunction()
memra_write_resource_spec()
