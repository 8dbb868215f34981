// N devices in one process: runs one prepared function once per device, each with its own
// argument list on its own thread, the collective ops meeting through a rendezvous. Device d is
// process (replica d / num_partitions, partition d % num_partitions) of the grid.
//
// A collective completes when every member of its process group has reached it; members are
// matched by how many collectives each device has entered (SPMD programs reach the same ones in
// the same order). A device that fails, finishes without reaching a collective its group waits
// at, or reaches a different one there, makes the waiting members fail with an error naming it;
// a wait longer than the timeout fails too, so no run ever hangs.
#pragma once

#include <chrono>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/interp/process_world.h"
#include "tlaloc/ir/collectives.h"

namespace tlaloc {

struct MultiDeviceOptions {
  // How long a device waits at a collective for the other members of its group; zero: the
  // TLALOC_COLLECTIVE_TIMEOUT_S environment variable, else 300 s.
  std::chrono::milliseconds timeout{0};
  // The processes the grid spans (null or a world of one: this process runs every device).
  // With N ranks each runs grid.num_processes() / N devices, rank r devices [r * L, (r + 1) * L);
  // the args of other ranks' devices are ignored and their results come back empty. Every
  // collective gathers all ranks' contributions (process_world.h), then each device reduces
  // its group's values in group order, as in one process.
  ProcessWorld* world = nullptr;
};

// Runs `exe` on grid.num_processes() devices; args[d] is device d's argument list. Returns each
// device's results, or the error of the device that failed first (its id in the message).
StatusOr<std::vector<std::vector<Literal>>> ExecuteOnDevices(
    const Executable& exe, std::vector<std::vector<Literal>> args, const ProcessGrid& grid,
    MultiDeviceOptions options = {}, std::vector<ExecutionStats>* stats = nullptr);

// How long a collective waits for its members: TLALOC_COLLECTIVE_TIMEOUT_S, else 300 s.
std::chrono::milliseconds CollectiveTimeout();

// The device count TLALOC_CPU_DEVICES asks for (a positive integer; unset: 1). An unparsable
// value is an error naming the variable.
StatusOr<int> CpuDevicesFromEnvironment();

}  // namespace tlaloc
