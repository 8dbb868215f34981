# CLI tests of sharded training (issue 16); included from tests/CMakeLists.txt.
# A 2-device dp / tp fine-tune logs the 1-device losses; bad meshes and plans exit 2; the same
# runs through Tlaloc's PJRT plugin log the interpreter's losses (~10 s).
add_test(NAME cli.sharding_finetune
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/sharding_finetune_test.sh $<TARGET_FILE:tlaloc_cli>
          $<TARGET_FILE:tlaloc_pjrt_cpu>)
set_tests_properties(cli.sharding_finetune PROPERTIES LABELS "cli;shard" TIMEOUT 120)
