# bench_smoke.cmake — the GPU benchmarks run at all and report what the dashboards read.
#
#   cmake -DBENCH=<bench_decode> -DOUT=<dir> -DFILTER=<regex> -DARCH_MAJORS=9[,12] -P bench_smoke.cmake
#
# Runs a few of bench_decode's arms once (the read-bandwidth probe first: hbm_fraction is
# relative to it) and checks the Google Benchmark JSON a dashboard is built from: every selected
# arm reported, with tok_per_s > 0, and the decode arm's hbm_fraction in (0, 1]. A benchmark
# that crashes, reports no rows or a zero rate fails here instead of on the dashboard.
# Without a GPU of the labelled architecture it prints "SKIPPED" (CTest's SKIP_REGULAR_EXPRESSION),
# and fails instead under MEMRA_REQUIRE_GPU=1, as the GPU tests do (memra/testing/gpu.h).
cmake_minimum_required(VERSION 3.25)  # policies of a -P script: IN_LIST, string(JSON)

function(skip_or_fail why)
  if("$ENV{MEMRA_REQUIRE_GPU}" STREQUAL "1")
    message(FATAL_ERROR "bench smoke: ${why} (strict mode: MEMRA_REQUIRE_GPU=1)")
  endif()
  message("bench smoke: SKIPPED: ${why}")
endfunction()

execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
                RESULT_VARIABLE smi_rc OUTPUT_VARIABLE caps ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT smi_rc EQUAL 0 OR caps STREQUAL "")
  skip_or_fail("needs a GPU (compute capability ${ARCH_MAJORS}.x), none found")
  return()
endif()
string(REGEX MATCH "^[0-9]+" major "${caps}")
string(REPLACE "," ";" majors "${ARCH_MAJORS}")
if(NOT major IN_LIST majors)
  skip_or_fail("needs compute capability ${ARCH_MAJORS}.x, found ${caps}")
  return()
endif()

file(MAKE_DIRECTORY "${OUT}")
set(json "${OUT}/bench_smoke.json")
file(REMOVE "${json}")
execute_process(COMMAND "${BENCH}" "--benchmark_filter=${FILTER}" "--benchmark_out=${json}"
                        --benchmark_out_format=json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench smoke: ${BENCH} exited with ${rc}")
endif()
if(NOT EXISTS "${json}")
  message(FATAL_ERROR "bench smoke: no JSON written to ${json}")
endif()
file(READ "${json}" doc)
# The context identifies the run: commit, build type, and every arm of the Arms table.
foreach(key commit memra_build_type gpu cuda_runtime arm.prefill_act arm.gdn_prefill arm.decode_graph)
  string(JSON v ERROR_VARIABLE missing GET "${doc}" context ${key})
  if(missing OR v STREQUAL "" OR v STREQUAL "unknown")
    message(FATAL_ERROR "bench smoke: the JSON context lacks '${key}' (${v})")
  endif()
endforeach()
string(JSON n LENGTH "${doc}" benchmarks)
set(seen_decode FALSE)
set(seen_batch FALSE)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last})
  string(JSON name GET "${doc}" benchmarks ${i} name)
  string(JSON kind ERROR_VARIABLE no_kind GET "${doc}" benchmarks ${i} aggregate_name)
  if(no_kind OR NOT kind STREQUAL "median" OR name MATCHES "^StreamRead")
    continue()
  endif()
  string(JSON rate GET "${doc}" benchmarks ${i} tok_per_s)
  string(JSON lbl ERROR_VARIABLE no_label GET "${doc}" benchmarks ${i} label)
  if(no_label OR NOT lbl MATCHES "prefill_act=.* gdn_prefill=")
    message(FATAL_ERROR "bench smoke: ${name}: its label does not name its arms ('${lbl}')")
  endif()
  if(NOT rate GREATER 0)
    message(FATAL_ERROR "bench smoke: ${name}: tok_per_s ${rate}")
  endif()
  if(name MATCHES "^Decode/")
    string(JSON frac GET "${doc}" benchmarks ${i} hbm_fraction)
    if(NOT frac GREATER 0 OR frac GREATER 1)
      message(FATAL_ERROR "bench smoke: ${name}: hbm_fraction ${frac} outside (0, 1]")
    endif()
    set(seen_decode TRUE)
  elseif(name MATCHES "^DecodeBatch/")
    set(seen_batch TRUE)
  endif()
  message("bench smoke: ${name}: tok_per_s ${rate}")
endforeach()
if(NOT seen_decode OR NOT seen_batch)
  message(FATAL_ERROR "bench smoke: the JSON lacks a Decode or DecodeBatch median (filter ${FILTER})")
endif()
