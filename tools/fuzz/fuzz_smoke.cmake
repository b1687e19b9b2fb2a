# cmake -DFUZZ=gguf_fuzz -DSEEDS=gguf_fuzz_seeds -DDICT=gguf.dict -DWORK=<scratch> -DRUNS=n
#       -P fuzz_smoke.cmake
#
# The CTest smoke run of the GGUF fuzzer (tools/fuzz/CMakeLists.txt): fresh seeds, then RUNS
# mutated inputs. libFuzzer's random seed differs per run (a fixed -seed does not make its
# search repeatable anyway), so repeated CI runs cover different inputs. Any nonzero exit (crash,
# sanitizer report, escaping exception, timeout, RSS over the limit) fails the test and names
# the input that caused it, kept in WORK/findings/ (never cleaned here) for replay.
file(REMOVE_RECURSE ${WORK}/seeds ${WORK}/corpus)
file(MAKE_DIRECTORY ${WORK}/seeds ${WORK}/corpus ${WORK}/findings)

execute_process(COMMAND ${SEEDS} ${WORK}/seeds RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gguf_fuzz_seeds failed (${rc}): ${err}")
endif()
file(GLOB seeds ${WORK}/seeds/*.gguf)
list(LENGTH seeds n_seeds)
if(n_seeds EQUAL 0)
  message(FATAL_ERROR "gguf_fuzz_seeds wrote no seed files into ${WORK}/seeds")
endif()

# New inputs go to the first directory (corpus/), so the seeds stay as written.
execute_process(
  COMMAND ${FUZZ} -runs=${RUNS} -max_len=4096 -rss_limit_mb=2048 -timeout=10
          -dict=${DICT} -artifact_prefix=${WORK}/findings/ ${WORK}/corpus ${WORK}/seeds
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  # libFuzzer's own line names this run's input; the directory may hold earlier ones too.
  string(REGEX MATCH "Test unit written to [^\n]*" written "${log}")
  file(GLOB artifacts ${WORK}/findings/*)
  string(LENGTH "${log}" len)
  if(len GREATER 6000)
    math(EXPR from "${len} - 6000")
    string(SUBSTRING "${log}" ${from} -1 log)
  endif()
  message(FATAL_ERROR "gguf_fuzz exited ${rc}: a finding in the GGUF reader.\n"
                      "${written}\nfindings kept: ${artifacts}\n"
                      "replay: ${FUZZ} <artifact>; then add the case to "
                      "test/unit/gguf_malformed_test.cpp\n--- libFuzzer log (tail) ---\n${log}")
endif()
if(NOT log MATCHES "Done ([0-9]+) runs in ([0-9]+) second")
  message(FATAL_ERROR "gguf_fuzz exited 0 without its 'Done N runs' line:\n${log}")
endif()
message(STATUS "gguf_fuzz: ${CMAKE_MATCH_1} runs in ${CMAKE_MATCH_2} s, ${n_seeds} seeds, no finding")
