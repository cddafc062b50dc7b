# Fails when docs/options.md is not what the server prints from its option
# table (`bloomery --print-options-markdown`).
#
#   cmake -DBLOOMERY_BIN=path/to/bloomery -DDOC=docs/options.md -P check_options_md.cmake
execute_process(
  COMMAND ${BLOOMERY_BIN} --print-options-markdown
  RESULT_VARIABLE result
  OUTPUT_VARIABLE printed
  ERROR_VARIABLE errors)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "bloomery --print-options-markdown failed (${result}): ${errors}")
endif()
file(READ ${DOC} written)
if(NOT printed STREQUAL written)
  message(FATAL_ERROR
    "${DOC} is stale: the option table changed. Regenerate it with\n"
    "  bloomery --print-options-markdown > docs/options.md")
endif()
