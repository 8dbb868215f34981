// What collective ops (all_reduce, all_gather, ...) need from the place they run: the process
// grid (replicas x partitions), how an op's replica_groups split it into process groups (the
// StableHLO specification's four strategies), and an exchange of values within one group.
//
// The interpreter runs one argument list per device, each on its own thread; the runner
// (interp/multi_device.h) installs a CollectiveContext on every device thread and the ops'
// eval functions find it with CurrentCollectiveContext(). Without one a program runs as the
// only process of a 1 x 1 grid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tlaloc/ir/attribute.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

class Function;

// The StableHLO process grid. A process (replica r, partition p) runs on device
// r * num_partitions + p, which is the specification's flattened id.
struct ProcessGrid {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  int64_t num_processes() const { return num_replicas * num_partitions; }
  int64_t DeviceOf(int64_t replica, int64_t partition) const {
    return replica * num_partitions + partition;
  }
};

// How replica_groups (or source_target_pairs) are read, per the specification.
enum class GroupMode {
  kCrossReplica,              // groups of replica ids, one copy per partition
  kCrossPartition,            // groups of partition ids, one copy per replica
  kCrossReplicaAndPartition,  // groups of replica ids spanning every partition
  kFlattenedIds,              // groups of device ids
};
const char* GroupModeName(GroupMode mode);

// The strategy of an op: all_reduce, all_gather and reduce_scatter choose among cross_replica,
// cross_replica_and_partition and flattened_ids (channel_id > 0, use_global_device_ids);
// all_to_all, collective_permute and collective_broadcast between cross_replica and
// cross_partition (channel_id > 0). use_global_device_ids without a positive channel is an error.
StatusOr<GroupMode> CollectiveGroupMode(const std::string& op_name, const AttrDict& attrs);

// A rank-2 integer attribute (replica_groups, source_target_pairs) as rows; -1 entries (padding
// of uneven groups, as XLA writes them) are dropped. Absent: no rows.
StatusOr<std::vector<std::vector<int64_t>>> GroupRows(const AttrDict& attrs,
                                                      const std::string& name);

// The process groups as device ids, in the order the specification lists their members. Checks
// that ids are unique and in range and, where the strategy demands it (`must_cover`), that
// every id appears; errors name the attribute's rows. Empty `groups` means one group of all.
StatusOr<std::vector<std::vector<int64_t>>> ProcessGroups(
    GroupMode mode, const std::vector<std::vector<int64_t>>& groups, const ProcessGrid& grid,
    bool must_cover = true);

// Gives every collective of `fn` (nested regions too) that carries a positive channel handle its
// own handle, 1, 2, ... in program order. Autodiff copies a collective's attributes to the
// gradient's collective, so a differentiated program repeats handles; XLA and StableHLO's
// reference interpreter pair collectives by handle, and the reference interpreter mixed up two
// all_reduces that shared one. Returns how many handles it set.
int64_t NumberChannels(Function& fn);

// The group holding `device`, or an empty vector when it is in none.
std::vector<int64_t> GroupOf(const std::vector<std::vector<int64_t>>& groups, int64_t device);

// The services of one device thread.
class CollectiveContext {
 public:
  virtual ~CollectiveContext() = default;
  virtual const ProcessGrid& grid() const = 0;
  virtual int64_t device() const = 0;
  int64_t replica_id() const { return device() / grid().num_partitions; }
  int64_t partition_id() const { return device() % grid().num_partitions; }
  // Gives this device's values to every member of `group` (device ids, this device among them)
  // and returns every member's values, in the order of `group`. Blocks until all members have
  // arrived; fails (never hangs) when a member failed or finished, the groups disagree, or the
  // wait times out. `what` names the op in errors. The values returned are shared, not copied:
  // read them, never write them.
  virtual StatusOr<std::vector<std::vector<Literal>>> Exchange(const std::string& what,
                                                               const std::vector<int64_t>& group,
                                                               std::vector<Literal> values) = 0;
};

// The context of the calling thread: the one installed by ScopedCollectiveContext, else a
// single-device context (a 1 x 1 grid, device 0).
CollectiveContext& CurrentCollectiveContext();

// Installs `ctx` as the calling thread's context for its lifetime.
class ScopedCollectiveContext {
 public:
  explicit ScopedCollectiveContext(CollectiveContext* ctx);
  ~ScopedCollectiveContext();
  ScopedCollectiveContext(const ScopedCollectiveContext&) = delete;
  ScopedCollectiveContext& operator=(const ScopedCollectiveContext&) = delete;

 private:
  CollectiveContext* saved_;
};

}  // namespace tlaloc
