# no_cuda_part.cmake — stands in for the GPU suite in a build without the CUDA part.
#
# Without nvcc at configure time no GPU test is built, and `ctest -L '^h100$' --no-tests=error`
# would fail with "No tests were found" on exactly the machines where the suite should report
# itself skipped. This test carries the GPU labels, skips with the reason, and under
# MEMRA_REQUIRE_GPU=1 fails: a GPU CI run must never pass on a build that has no GPU tests.
set(why "this build has no CUDA part (no nvcc at configure time, or MEMRA_CUDA=OFF): no GPU test was built")
if("$ENV{MEMRA_REQUIRE_GPU}" STREQUAL "1")
  message(FATAL_ERROR "${why} (strict mode: MEMRA_REQUIRE_GPU=1)")
endif()
message("SKIPPED: ${why}")
