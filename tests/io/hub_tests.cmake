# `-m ORG/NAME` downloads from the Hub (issue 39), against tests/io/hub_server.py on loopback.
add_test(NAME io.hub_download
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/io/hub_download_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(io.hub_download PROPERTIES LABELS "io;cli" SKIP_RETURN_CODE 77 TIMEOUT 300)
