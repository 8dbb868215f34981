# Multi-process runs under Open MPI's mpirun (issue 20); included from tests/CMakeLists.txt.
# Where mpirun cannot run, the tests fail in CI (CI=true) and skip (77) elsewhere.
if(NOT MPI_C_FOUND)
  foreach(name mpi.collectives cli.mpi_finetune)
    add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_missing.sh)
    set_tests_properties(${name} PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77)
  endforeach()
  return()
endif()
set(TLALOC_MPIRUN "${MPIEXEC_EXECUTABLE}")
# The interpreter's collectives across two ranks equal two in-process devices bit for bit.
# PJRT's node_id / num_nodes and key-value callbacks with Tlaloc's plugin span both ranks.
add_executable(tlaloc_mpi_tests ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_collectives_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_pjrt_test.cc)
target_link_libraries(tlaloc_mpi_tests PRIVATE tlaloc_pjrt tlaloc_interp tlaloc_stablehlo
  GTest::gtest GTest::gtest_main)
add_dependencies(tlaloc_mpi_tests tlaloc_pjrt_cpu)
target_compile_definitions(tlaloc_mpi_tests PRIVATE
  TLALOC_PJRT_CPU_PLUGIN="$<TARGET_FILE:tlaloc_pjrt_cpu>")
add_test(NAME mpi.collectives
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/run_under_mpirun.sh "${TLALOC_MPIRUN}" 2 120
          $<TARGET_FILE:tlaloc_mpi_tests>)
# Label mpi only: the sanitized tree (scripts/test.sh) runs labels core/shard without building
# this binary, and Open MPI's own allocations would trip LeakSanitizer there.
set_tests_properties(mpi.collectives PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77
  TIMEOUT 180)
# mpirun -np 2 tlaloc finetune --plan dp|fsdp: the losses and checkpoint of one process with two
# devices (dp_tp: 2 x 2 as 1 x 4); a killed or stopped rank ends the job within the limit;
# mismatched ranks are refused; generate --mesh model=2 prints the 1-process text (~20 s).
add_test(NAME cli.mpi_finetune
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_finetune_test.sh $<TARGET_FILE:tlaloc_cli>
          "${TLALOC_MPIRUN}")
set_tests_properties(cli.mpi_finetune PROPERTIES LABELS "cli;shard;mpi" SKIP_RETURN_CODE 77
  TIMEOUT 240)
