// The key-value store a multi-process PJRT client lends its plugin (PJRT_Client_Create's
// kv_get / kv_try_get / kv_put callbacks, with the node_id / num_nodes create options): the
// plugins' processes publish their topology (and, on GPUs, NCCL ids) and read each other's.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tlaloc/interp/process_world.h"
#include "tlaloc/support/status.h"

namespace tlaloc::pjrt {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for some process to put it.
  virtual StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // The value if this process knows it now (NotFound otherwise); never waits.
  virtual StatusOr<std::string> TryGet(const std::string& key) = 0;
};

// A store in this process only (one process, or tests playing several nodes).
std::shared_ptr<KeyValueStore> MakeInMemoryKeyValueStore();

// A store over the ranks of `world` (mpirun): Put records locally; a Get of a key this rank
// does not hold exchanges every rank's puts so far in one allgather, so it is a collective:
// every rank must reach it (as PJRT plugins do at client creation: each node puts its own
// topology, then gets every node's). TryGet reads local knowledge only.
std::shared_ptr<KeyValueStore> MakeWorldKeyValueStore(ProcessWorld& world);

}  // namespace tlaloc::pjrt
