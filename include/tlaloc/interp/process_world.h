// The processes of one run: a world of one (a plain `tlaloc ...`), or the ranks Open MPI's
// `mpirun` started. Each process runs its own devices; a mesh spans world size x local devices,
// and global device d lives on rank d / local_devices. The interpreter's collectives exchange
// contributions across ranks through AllGather (multi_device.h), so every rank reduces the same
// values in the same device order and a 2-process run equals the 1-process, 2-device run bit
// for bit. MPI is used in one place only (process_world_mpi.cc). See docs/SHARDING.md.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

class ProcessWorld {
 public:
  virtual ~ProcessWorld() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "single" or "mpi".
  virtual std::string name() const = 0;
  // Every rank's `bytes`, in rank order. Every rank must call it the same number of times (the
  // k-th calls meet). Fails with an error naming `what` when the others do not arrive within
  // `timeout`; a rank that died ends the job through the launcher (mpirun names the lost rank).
  virtual StatusOr<std::vector<std::string>> AllGather(std::string_view bytes,
                                                       std::chrono::milliseconds timeout,
                                                       const std::string& what) = 0;
  // Ends every process of the world with `exit_code` (after this rank reported its error), so
  // no rank waits for one that gave up. A world of one just exits.
  [[noreturn]] virtual void Abort(int exit_code) = 0;
};

// The world of this process: MPI's when started by mpirun (OMPI_COMM_WORLD_SIZE or PMIX_RANK
// in the environment; MPI is initialized on the first call and finalized at exit), else a world
// of one. An mpirun launch in a build without MPI is an error saying so.
StatusOr<ProcessWorld*> CurrentWorld();
// A world of one, whatever launched the process.
ProcessWorld& SingleProcessWorld();

// True when this process was started by an MPI launcher (what CurrentWorld checks).
bool LaunchedByMpi();

// Literals as bytes (type and contents) and back, for exchanges across ranks.
void AppendLiterals(const std::vector<Literal>& literals, std::string& out);
// Reads the literals AppendLiterals wrote at `pos`, advancing it; fails on malformed bytes.
StatusOr<std::vector<Literal>> ReadLiterals(std::string_view bytes, size_t& pos);

// Every rank's strings of `fields` (name, value) compared with rank 0's: an error naming each
// field that differs and the ranks holding another value, or OK when all agree. Call it on every
// rank before the first collective of a run (a digest of the model, mesh, plan and data).
Status CheckSameOnAllRanks(ProcessWorld& world,
                           const std::vector<std::pair<std::string, std::string>>& fields,
                           std::chrono::milliseconds timeout);

// A stable 64-bit digest (FNV-1a) as 16 hex digits, for the fields above.
std::string Digest(std::string_view bytes);

}  // namespace tlaloc
