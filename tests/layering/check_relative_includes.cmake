# Fails if a source or header under ROOT/src or ROOT/include includes a path
# starting with "../" (docs/architecture.md: private headers are included by
# plain name from beside them, public ones as "bloomery/<layer>/...").
#
#   cmake -DROOT=<source dir> -P check_relative_includes.cmake
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_relative_includes.cmake: -DROOT= is missing")
endif()

file(GLOB_RECURSE files LIST_DIRECTORIES false
     "${ROOT}/src/*.cpp" "${ROOT}/src/*.hpp" "${ROOT}/src/*.h" "${ROOT}/src/*.in"
     "${ROOT}/include/*.hpp" "${ROOT}/include/*.h")
set(offenders)
foreach(file IN LISTS files)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]\\.\\./")
  foreach(line IN LISTS lines)
    file(RELATIVE_PATH shown "${ROOT}" "${file}")
    list(APPEND offenders "${shown}: ${line}")
  endforeach()
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "no sources found under ${ROOT}/src and ${ROOT}/include")
endif()
if(offenders)
  list(JOIN offenders "\n  " listed)
  message(FATAL_ERROR "relative \"../\" includes (include a public header as "
                      "\"bloomery/<layer>/...\", a private one by its plain name):\n  ${listed}")
endif()
