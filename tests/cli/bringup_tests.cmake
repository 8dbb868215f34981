# The bring-up session of issue 19 rehearsed with TARGET=cpu: prepare.sh's tarball from this build
# tree, unpacked in a temporary folder, session.sh's preflight, lanes, refusals and results, and
# `tlaloc aot` on the programs the lanes recorded (docs/BRINGUP.md). Runs the test binaries the
# build made (no second build); about two minutes on two cores.
add_test(NAME bringup.rehearsal
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/bringup_rehearsal_test.sh ${PROJECT_SOURCE_DIR}
          ${PROJECT_BINARY_DIR})
set_tests_properties(bringup.rehearsal PROPERTIES LABELS bringup TIMEOUT 900 RUN_SERIAL TRUE)

# `tlaloc aot --plugin tpu` with the venv's libtpu, no TPU: recorded one- and two-device programs
# compile for v6e:1x1 and v6e:2x2 with no refusal (label tpu_aot; docs/BRINGUP.md). Skips without
# libtpu in third_party_py/, fails under CI=true.
add_test(NAME bringup.tpu_aot
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/tpu_aot_test.sh $<TARGET_FILE:tlaloc_cli>
          $<TARGET_FILE:tlaloc_pjrt_cpu> ${PROJECT_SOURCE_DIR})
set_tests_properties(bringup.tpu_aot PROPERTIES LABELS tpu_aot SKIP_RETURN_CODE 77
  TIMEOUT 600 RUN_SERIAL TRUE)

# `tlaloc aot --plugin cuda` with the venv's jax-cuda13-pjrt, no GPU: the plugin's H100 target
# config makes its topology deviceless; recorded one- and two-device programs compile for 1x1x1
# and 1x1x2 (label cuda_aot; docs/BRINGUP.md). Skips without the plugin, fails under CI=true.
add_test(NAME bringup.cuda_aot
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/cuda_aot_test.sh $<TARGET_FILE:tlaloc_cli>
          $<TARGET_FILE:tlaloc_pjrt_cpu> ${PROJECT_SOURCE_DIR})
set_tests_properties(bringup.cuda_aot PROPERTIES LABELS cuda_aot SKIP_RETURN_CODE 77
  TIMEOUT 600 RUN_SERIAL TRUE)
