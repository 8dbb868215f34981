# The bring-up session of issue 19 rehearsed with TARGET=cpu: prepare.sh's tarball from this build
# tree, unpacked in a temporary folder, session.sh's preflight, lanes, refusals and results, and
# `tlaloc aot` on the programs the lanes recorded (docs/BRINGUP.md). Runs the test binaries the
# build made (no second build); about two minutes on two cores.
add_test(NAME bringup.rehearsal
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/bringup_rehearsal_test.sh ${PROJECT_SOURCE_DIR}
          ${PROJECT_BINARY_DIR})
set_tests_properties(bringup.rehearsal PROPERTIES LABELS bringup TIMEOUT 900 RUN_SERIAL TRUE)
