# The GPU architecture table (cmake/archs.txt): label <-> compute capability major <-> SM <->
# CUDA arch. Everything in CMake that maps between them goes through here; ctest/gpu-ci.sh reads
# the same file, and src/testing/gpu.cpp compiles in the table generated below.
#
# Sets MEMRA_ARCH_LABELS (h100;b200;rtx5090, the table's order) and, per label L,
# MEMRA_ARCH_<L>_MAJOR / _SM / _CUDA / _PARTS. Writes <build>/generated/memra_arch_table.inc.
set(MEMRA_ARCH_TABLE_FILE ${CMAKE_CURRENT_LIST_DIR}/archs.txt)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${MEMRA_ARCH_TABLE_FILE})

set(MEMRA_ARCH_LABELS)
set(_memra_arch_rows)
file(STRINGS ${MEMRA_ARCH_TABLE_FILE} _memra_arch_lines)
foreach(line IN LISTS _memra_arch_lines)
  if(line MATCHES "^[ \t]*(#|$)")
    continue()
  endif()
  if(NOT line MATCHES "^([a-z0-9]+)[ \t]+([0-9]+)[ \t]+(sm_[0-9]+)[ \t]+([0-9]+[a-z]?)[ \t]*(.*)$")
    message(FATAL_ERROR "${MEMRA_ARCH_TABLE_FILE}: malformed line '${line}' "
                        "(expected: label cc_major sm_NN cuda_arch [parts])")
  endif()
  set(_l ${CMAKE_MATCH_1})
  list(APPEND MEMRA_ARCH_LABELS ${_l})
  set(MEMRA_ARCH_${_l}_MAJOR ${CMAKE_MATCH_2})
  set(MEMRA_ARCH_${_l}_SM ${CMAKE_MATCH_3})
  set(MEMRA_ARCH_${_l}_CUDA ${CMAKE_MATCH_4})
  string(STRIP "${CMAKE_MATCH_5}" MEMRA_ARCH_${_l}_PARTS)
  string(REPLACE "\"" "\\\"" _parts "${MEMRA_ARCH_${_l}_PARTS}")
  string(APPEND _memra_arch_rows
         "  {${CMAKE_MATCH_2}, \"${_l}\", \"${CMAKE_MATCH_3}\", \"${CMAKE_MATCH_4}\", \"${_parts}\"},\n")
endforeach()
if(NOT MEMRA_ARCH_LABELS)
  message(FATAL_ERROR "${MEMRA_ARCH_TABLE_FILE}: no architectures")
endif()

# The table as C++ rows {cc_major, label, sm, cuda_arch, parts}, for src/testing/gpu.cpp
# (#include "memra_arch_table.inc" inside an array initialiser). Rewritten only when it changes.
set(MEMRA_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
file(CONFIGURE OUTPUT ${MEMRA_GENERATED_DIR}/memra_arch_table.inc
     CONTENT "// generated from cmake/archs.txt by cmake/MemraArchs.cmake: edit that file\n${_memra_arch_rows}"
     @ONLY)

# memra_arch_label_of_major(<out-var> <cc major>): the label of a compute capability major, or "".
function(memra_arch_label_of_major out major)
  set(r "")
  foreach(l IN LISTS MEMRA_ARCH_LABELS)
    if(MEMRA_ARCH_${l}_MAJOR EQUAL major)
      set(r ${l})
    endif()
  endforeach()
  set(${out} "${r}" PARENT_SCOPE)
endfunction()

# memra_arch_majors(<out-var> "<cuda archs>"): the compute capability majors a
# CMAKE_CUDA_ARCHITECTURES list runs on, "90a;120a-real" -> "9;12". The special values all,
# all-major and native give every major of the table (native: whatever this machine has, which a
# build cannot know in advance; the tests check the device at run time anyway).
function(memra_arch_majors out archs)
  set(majors)
  foreach(a IN LISTS archs)
    if(a STREQUAL "all" OR a STREQUAL "all-major" OR a STREQUAL "native")
      foreach(l IN LISTS MEMRA_ARCH_LABELS)
        list(APPEND majors ${MEMRA_ARCH_${l}_MAJOR})
      endforeach()
    elseif(a MATCHES "^([0-9]+)")
      math(EXPR m "${CMAKE_MATCH_1} / 10")
      list(APPEND majors ${m})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES majors)
  set(${out} "${majors}" PARENT_SCOPE)
endfunction()

# memra_arch_labels(<out-var> "<cuda archs>"): the arch labels of a CMAKE_CUDA_ARCHITECTURES list,
# "90a;120a" -> "h100;rtx5090". Archs outside the table's families give no label.
function(memra_arch_labels out archs)
  memra_arch_majors(majors "${archs}")
  set(labels)
  foreach(m IN LISTS majors)
    memra_arch_label_of_major(l ${m})
    if(l)
      list(APPEND labels ${l})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES labels)
  set(${out} "${labels}" PARENT_SCOPE)
endfunction()
