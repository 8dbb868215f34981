# The CLI's shared behaviour (parse errors, exit codes, defaults, -m/-t, GGUF and Hugging Face
# cache references), end to end in seconds.
add_test(NAME cli.framework
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/framework_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.framework PROPERTIES LABELS "cli;cli_asan" TIMEOUT 300)

# The README's CLI section mentions every command and long option `--help` lists.
add_test(NAME cli.readme_help
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/readme_help_test.sh $<TARGET_FILE:tlaloc_cli>
          ${PROJECT_SOURCE_DIR}/README.md)
set_tests_properties(cli.readme_help PROPERTIES LABELS cli TIMEOUT 60)
