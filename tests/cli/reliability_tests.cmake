# CLI tests of issue 22, "nothing half-written"; included from tests/CMakeLists.txt.

# SIGINT/SIGTERM save and resume bit-equal, SIGKILL at 20 seeded random points with
# --save-every 1, --out == --model and nothing-left refusals, export into a full tmpfs (skipped
# by name, exit 77, when mount is not permitted). About a minute on two busy cores.
add_test(NAME cli.reliability
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/reliability_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.reliability PROPERTIES LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 600)
