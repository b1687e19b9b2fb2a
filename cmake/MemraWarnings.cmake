# Compiler warnings for everything the project builds (library layers, tools, tests, benchmarks,
# device code), and MEMRA_WERROR to make them errors (the `ci` preset and .ci/run set it; a
# developer's build keeps them warnings so a newer compiler's new warning never blocks work).
#
#   C++ (g++/clang++):  -Wall -Wextra -Wno-unused-parameter
#   CUDA (nvcc):        the host compiler's -Wall,-Wextra,-Wno-unused-parameter through
#                       -Xcompiler, and nvcc's own member-initializer order check (-Wreorder);
#                       the CUDA front end's default warnings are on anyway.
#   MEMRA_WERROR=ON:    -Werror; for nvcc -Xcompiler=-Werror and --Werror all-warnings (every
#                       nvcc warning kind).
#
# -Wno-unused-parameter: interfaces (virtual overrides, kernel-family signatures, callbacks) name
# parameters that one implementation does not read; naming them documents the contract.
#
# MEMRA_WERROR_EXCEPTIONS: warning kinds kept as warnings under MEMRA_WERROR (-Wno-error=<kind>),
# for a warning in code that cannot be fixed right away. Empty: every warning is an error.
option(MEMRA_WERROR "Treat compiler warnings as errors (CI)" OFF)
set(MEMRA_WERROR_EXCEPTIONS "" CACHE STRING
    "Warning kinds (e.g. missing-field-initializers) that MEMRA_WERROR leaves as warnings")

set(_cxx -Wall -Wextra -Wno-unused-parameter)
set(_cuda -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter -Wreorder)
if(MEMRA_WERROR)
  list(APPEND _cxx -Werror)
  list(APPEND _cuda -Xcompiler=-Werror --Werror=all-warnings)
  foreach(kind IN LISTS MEMRA_WERROR_EXCEPTIONS)
    list(APPEND _cxx -Wno-error=${kind})
    list(APPEND _cuda -Xcompiler=-Wno-error=${kind})
  endforeach()
endif()
foreach(f IN LISTS _cxx)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${f}>)
endforeach()
foreach(f IN LISTS _cuda)
  add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:${f}>)
endforeach()
if(MEMRA_WERROR AND MEMRA_WERROR_EXCEPTIONS)
  message(STATUS "memra: warnings are errors, except ${MEMRA_WERROR_EXCEPTIONS}")
elseif(MEMRA_WERROR)
  message(STATUS "memra: warnings are errors (MEMRA_WERROR)")
endif()
unset(_cxx)
unset(_cuda)
