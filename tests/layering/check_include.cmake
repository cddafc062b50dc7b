# Compiles one header as a layer's sources would see it and checks the result.
#
#   cmake -DCOMPILER=c++ -DINCLUDES="dir|dir|..." -DHEADER=bloomery/net/server.hpp
#         -DEXPECT=fails -P check_include.cmake
#
# INCLUDES: the layer's include directories ('|'-separated). EXPECT: "builds"
# (the header is one the layer may use) or "fails" (it belongs to a layer
# above: it must not be found at all, whatever else is wrong).
foreach(var COMPILER HEADER EXPECT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_include.cmake: -D${var}= is missing")
  endif()
endforeach()

string(REPLACE "|" ";" directories "${INCLUDES}")
set(flags)
foreach(directory IN LISTS directories)
  list(APPEND flags "-I${directory}")
endforeach()

execute_process(
  COMMAND ${COMPILER} -std=c++20 -fsyntax-only ${flags} -include ${HEADER} -x c++ /dev/null
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)

if(EXPECT STREQUAL "builds")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${HEADER} should build here and did not:\n${output}")
  endif()
elseif(EXPECT STREQUAL "fails")
  if(result EQUAL 0)
    message(FATAL_ERROR "${HEADER} is reachable from a layer below it")
  endif()
  string(FIND "${output}" "${HEADER}" named)
  if(named EQUAL -1 OR NOT output MATCHES "No such file|file not found")
    message(FATAL_ERROR "${HEADER} failed for another reason than not being found:\n${output}")
  endif()
else()
  message(FATAL_ERROR "check_include.cmake: EXPECT must be builds or fails, got '${EXPECT}'")
endif()
