# cmake -DBUILD_DIR=<memra build> -DWORK=<scratch dir> -DCONSUMER=<consumer source> -DGENERATOR=..
#       -DMAKE_PROGRAM=.. -DCXX_COMPILER=.. -DBUILD_TYPE=.. -DWERROR=ON|OFF -DHAVE_CUDA=ON|OFF
#       [-DCUDA_ROOT=<CUDA toolkit>] -P package_test.cmake
#
# 1. cmake --install <build> --prefix <work>/prefix (a fresh prefix every run);
# 2. configure <consumer> against that prefix alone (CMAKE_PREFIX_PATH, no package registries) with
#    this build's generator, compiler and build type, and check memra was found there;
# 3. build it and run its two programs: consumer_oracle (memra::memra: fixture GGUF -> oracle ->
#    bank) and consumer_matchers (memra::testing: a GoogleTest program using memra's matchers).
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test: ${what} failed (exit ${rc}):\n  ${ARGN}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK}/prefix)
set(cbuild ${WORK}/consumer-build)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f lib/cmake/memra/memra-config.cmake lib/cmake/memra/memra-config-version.cmake
          lib/cmake/memra/memra-targets.cmake lib/cmake/memra/memra-testing-targets.cmake
          include/memra/oracle.h include/memra/bank.h include/memra/testing/matchers.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "package test: the install lacks ${f}")
  endif()
endforeach()
# The exported targets must not point back into the source or build tree.
file(GLOB exported ${prefix}/lib/cmake/memra/*.cmake)
foreach(f IN LISTS exported)
  file(READ ${f} text)
  get_filename_component(src_root ${CONSUMER}/../../.. ABSOLUTE)
  foreach(tree ${src_root}/include ${src_root}/src ${BUILD_DIR})
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "package test: ${f} refers to ${tree}")
    endif()
  endforeach()
endforeach()

set(flags "-Wall -Wextra")
if(WERROR)
  string(APPEND flags " -Werror")
endif()
set(cfg ${CMAKE_COMMAND} -S ${CONSUMER} -B ${cbuild} -G ${GENERATOR}
    -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} "-DCMAKE_CXX_FLAGS=${flags}"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(HAVE_CUDA)
  list(APPEND cfg -DCUDAToolkit_ROOT=${CUDA_ROOT})
endif()
run("configuring the consumer" ${cfg})
if(NOT last_output MATCHES "consumer: memra 0[.][0-9.]+ from ${prefix}/lib/cmake/memra")
  message(FATAL_ERROR "package test: memra was not found in ${prefix}:\n${last_output}")
endif()
run("building the consumer" ${CMAKE_COMMAND} --build ${cbuild})
run("consumer_oracle" ${cbuild}/consumer_oracle ${WORK})
message(STATUS "${last_output}")
run("consumer_matchers" ${cbuild}/consumer_matchers)
# The prefix holds every library and tool (~200 MB with debug info): not kept after a pass.
file(REMOVE_RECURSE ${prefix})
message(STATUS "package test: installed into ${prefix}; the consumer built and ran (prefix removed)")
