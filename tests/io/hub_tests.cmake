# `-m ORG/NAME` downloads from the Hub (issue 39), against tests/io/hub_server.py on loopback.
# Labelled cli, not io: scripts/test.sh runs the io label in its ASan tree, where a dozen -O0
# generations would take minutes.
add_test(NAME cli.hub_download
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/io/hub_download_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.hub_download PROPERTIES LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 300)
