# canary_labels.cmake — the canary label contract, checked on the configured build's test list.
#
# A canary must FAIL its gate, so it is selected apart from the gates: a case whose GTest suite
# name ends in `Canary` carries the label `canary` and not `gate` (cmake/MemraTesting.cmake,
# memra_add_gate). A canary left under `gate` would be run by `ctest -L gate` as a gate that is
# expected to fail; a gate case under `canary` would be inverted. Both are errors here, naming
# the test; so is a build with gates but no canary at all.
#   cmake -DCTEST=<ctest> -DBUILD=<build dir> -P canary_labels.cmake
foreach(v CTEST BUILD)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "canary_labels.cmake: -D${v}= is required")
  endif()
endforeach()

# The GoogleTest cases (names with a '.') that `ctest -N -L <label>` lists; the fixture setup
# tests ctest pulls in alongside have no '.'.
function(listed label out)
  execute_process(COMMAND ${CTEST} --test-dir ${BUILD} -N -L "^${label}$"
                  OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ctest -N -L '^${label}$' failed (${rc}): ${err}")
  endif()
  string(REGEX MATCHALL "Test +#[0-9]+: [^\n]+" lines "${text}")
  set(names)
  foreach(l IN LISTS lines)
    string(REGEX REPLACE "Test +#[0-9]+: " "" n "${l}")
    if(n MATCHES "[.]")
      list(APPEND names "${n}")
    endif()
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

listed(gate gates)
listed(canary canaries)
list(LENGTH gates n_gates)
list(LENGTH canaries n_canaries)
if(n_gates EQUAL 0)
  message("SKIPPED: this build has no gate tests (no CUDA part): no canary label to check")
  return()
endif()
set(bad)
foreach(t IN LISTS gates)
  if(t MATCHES "Canary[.]")
    list(APPEND bad "gate-labelled canary: ${t}")
  endif()
endforeach()
foreach(t IN LISTS canaries)
  if(NOT t MATCHES "Canary[.]")
    list(APPEND bad "canary-labelled case outside a Canary suite: ${t}")
  endif()
endforeach()
if(n_canaries EQUAL 0)
  list(APPEND bad "${n_gates} gate cases and no canary")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "canary labels:\n  ${text}")
endif()
message("canary labels: ${n_gates} gate cases, ${n_canaries} canaries, each labelled by its suite")
