# `tlaloc generate` and `tlaloc chat` end to end (tests/cli/generate_*.sh, chat_tmux_test.sh).
add_test(NAME cli.generate_requests
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/generate_requests_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.generate_requests PROPERTIES LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 600)
add_test(NAME cli.chat_tmux
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/chat_tmux_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.chat_tmux PROPERTIES LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 300)
add_test(NAME cli.memory_refusal
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/memory_refusal_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.memory_refusal PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli.memory_budget
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/memory_budget_test.sh $<TARGET_FILE:tlaloc_cli>
          $<TARGET_FILE:tlaloc_pjrt_cpu>)
set_tests_properties(cli.memory_budget PROPERTIES LABELS cli TIMEOUT 300)
add_test(NAME cli.generate_stdin
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/generate_stdin_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.generate_stdin PROPERTIES LABELS cli TIMEOUT 300)
add_test(NAME cli.chat_context
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/chat_context_test.sh
          $<TARGET_FILE:tlaloc_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.chat_context PROPERTIES LABELS "cli;serve" SKIP_RETURN_CODE 77 TIMEOUT 600)

# GGUF files as models (-m FILE.gguf): generate, chat, bench, serve and inspect on F32 and
# llama.cpp's Q4_K_M files, the cached import, bad files refused by name.
add_test(NAME cli.gguf_models
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gguf_models_test.sh $<TARGET_FILE:tlaloc_cli>
          ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.gguf_models PROPERTIES LABELS cli TIMEOUT 600 SKIP_RETURN_CODE 77)

# `tlaloc bench`'s shares of the machine (prefill FLOPs against the probed peak, decode reads
# against the probed bandwidth): the counting rule and the arithmetic, not a speed.
add_test(NAME cli.bench_probes
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/bench_probes_test.sh $<TARGET_FILE:tlaloc_cli>
          ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.bench_probes PROPERTIES LABELS cli TIMEOUT 300)
