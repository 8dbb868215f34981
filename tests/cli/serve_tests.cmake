# `tlaloc serve` end to end on loopback (tests/cli/serve_*.sh): curl, the openai Python client
# and a bounded load test (the venv's Python, third_party_py/), disconnect, overload and SIGTERM;
# the chat page in Debian's headless Chromium through Selenium and chromedriver.
add_test(NAME cli.serve_http
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/serve_http_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.serve_http PROPERTIES LABELS "cli;serve" SKIP_RETURN_CODE 77 TIMEOUT 600)
add_test(NAME cli.serve_chat_page
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/serve_chat_page_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
set_tests_properties(cli.serve_chat_page PROPERTIES LABELS "cli;serve" SKIP_RETURN_CODE 77 TIMEOUT 300)
add_test(NAME cli.serve_api
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/serve_api_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.serve_api PROPERTIES LABELS "cli;serve" SKIP_RETURN_CODE 77 TIMEOUT 300)
add_test(NAME cli.serve_tools
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/serve_tools_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.serve_tools PROPERTIES LABELS "cli;serve" SKIP_RETURN_CODE 77 TIMEOUT 300)
add_test(NAME cli.serve_json
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/serve_json_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.serve_json PROPERTIES LABELS "cli;serve" SKIP_RETURN_CODE 77 TIMEOUT 600)
