# CLI tests of the training commands (finetune, finetune-demo, init-model, export gguf); included
# from tests/CMakeLists.txt. Each takes about a minute or less on two cores.

# Bad flag values are usage errors (exit 2) naming the flag, and write nothing.
add_test(NAME cli.training_flags
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/training_flags_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.training_flags PROPERTIES LABELS cli TIMEOUT 120)

# `finetune --resume DIR` alone continues the recorded run; overrides are named (issue 38).
add_test(NAME cli.finetune_resume
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/finetune_resume_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.finetune_resume PROPERTIES LABELS cli TIMEOUT 300)

# loss.svg: one point per step, valid after SIGINT, drawn by headless Chromium (the screenshot is
# kept in the build folder's test_artefacts/). Skips (77) without chromium unless CI=true.
add_test(NAME cli.training_loss_svg
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/training_loss_svg_test.sh $<TARGET_FILE:tlaloc_cli>
          ${PROJECT_BINARY_DIR}/test_artefacts)
set_tests_properties(cli.training_loss_svg PROPERTIES LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 180)

# GGUF export of finetune-demo's, finetune's and init-model's checkpoints with their chat
# template; llama.cpp's tokenization of the demo's GGUF, and the template rendered by transformers
# and jinja2 (the venv's Python). Skips (77) without the venv's llama_cpp, jinja2 or transformers.
add_test(NAME cli.training_export
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/training_export_test.sh $<TARGET_FILE:tlaloc_cli>
          ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.training_export PROPERTIES LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 180)

# `tlaloc finetune` of a tiny Qwen3-MoE (the demo's byte-level model with 4 experts, top 2)
# learns finetune-demo's task: 600 steps, then at least 7 of 10 held-out answers exactly right.
add_test(NAME cli.finetune_moe
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/finetune_moe_test.sh $<TARGET_FILE:tlaloc_cli>)
set_tests_properties(cli.finetune_moe PROPERTIES LABELS cli TIMEOUT 300)

# The Llama family through the CLI: a transformers-written tiny Llama exported as llama.cpp's
# `llama` GGUF and served one chat request.
add_test(NAME cli.llama_family
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/llama_family_test.sh $<TARGET_FILE:tlaloc_cli>
          ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.llama_family PROPERTIES LABELS cli SKIP_RETURN_CODE 77 TIMEOUT 300)
