# CLI tests of issue 22, "nothing half-written"; included from tests/CMakeLists.txt.

# SIGINT/SIGTERM save and resume bit-equal, SIGKILL at 20 seeded random points with
# --save-every 1, --out == --model and nothing-left refusals, export and a save on a full disk (a
# small tmpfs, or RLIMIT_FSIZE when mount is not permitted). About a minute on two busy cores.
add_test(NAME cli.reliability
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/reliability_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.reliability PROPERTIES LABELS cli TIMEOUT 600)

# Deterministic kill points: a fine-tune SIGKILLed after its N-th write step (24 seeded N, via
# TLALOC_TEST_KILL_AFTER_WRITES) always leaves loadable saves that resume bit-equal.
add_test(NAME cli.crash_consistency
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/crash_consistency_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.crash_consistency PROPERTIES LABELS cli TIMEOUT 900)

# The binary's commands in seconds (init-model, inspect, quantize, export gguf, generate,
# finetune 2 steps, malformed inputs refused). Labelled cli_asan: scripts/test.sh step 2 runs
# the tests with that label on the ASan + UBSan binary, where the longer cli tests do not fit.
add_test(NAME cli.asan_smoke
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/asan_smoke_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.asan_smoke PROPERTIES LABELS "cli;cli_asan" TIMEOUT 600)
