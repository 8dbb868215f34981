#include "tlaloc/ir/collectives.h"

#include <algorithm>

#include "tlaloc/ir/ir.h"

namespace tlaloc {

namespace {

std::string FormatRows(const std::vector<std::vector<int64_t>>& rows) {
  std::string s = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) s += ", ";
    s += "[";
    for (size_t j = 0; j < rows[i].size(); ++j) {
      if (j) s += ", ";
      s += std::to_string(rows[i][j]);
    }
    s += "]";
  }
  return s + "]";
}

// The channel id of `channel_handle` (#stablehlo.channel_handle<handle = N, type = T>), 0 when
// absent.
int64_t ChannelId(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, "channel_handle");
  if (!a || a->kind() != Attribute::Kind::kStruct) return 0;
  return GetIntAttr(a->as_dict(), "handle", 0);
}

// The single-device context used when no runner installed one.
class SoloContext : public CollectiveContext {
 public:
  const ProcessGrid& grid() const override { return grid_; }
  int64_t device() const override { return 0; }
  StatusOr<std::vector<std::vector<Literal>>> Exchange(const std::string& what,
                                                       const std::vector<int64_t>& group,
                                                       std::vector<Literal> values) override {
    if (group.size() != 1 || group[0] != 0)
      return InvalidArgument(what + " needs devices beyond the one this run has");
    return std::vector<std::vector<Literal>>{std::move(values)};
  }

 private:
  ProcessGrid grid_;
};

thread_local CollectiveContext* tls_context = nullptr;

}  // namespace

const char* GroupModeName(GroupMode mode) {
  switch (mode) {
    case GroupMode::kCrossReplica:
      return "cross_replica";
    case GroupMode::kCrossPartition:
      return "cross_partition";
    case GroupMode::kCrossReplicaAndPartition:
      return "cross_replica_and_partition";
    case GroupMode::kFlattenedIds:
      return "flattened_ids";
  }
  return "?";
}

StatusOr<GroupMode> CollectiveGroupMode(const std::string& op_name, const AttrDict& attrs) {
  const int64_t channel = ChannelId(attrs);
  const bool global = FindAttr(attrs, "use_global_device_ids") != nullptr &&
                      GetBoolAttr(attrs, "use_global_device_ids", true);
  const bool replica_style = op_name == "stablehlo.all_reduce" ||
                             op_name == "stablehlo.all_gather" ||
                             op_name == "stablehlo.reduce_scatter";
  if (!replica_style) {
    if (global) return InvalidArgument(op_name + " takes no use_global_device_ids");
    return channel > 0 ? GroupMode::kCrossPartition : GroupMode::kCrossReplica;
  }
  if (global && channel <= 0)
    return InvalidArgument("use_global_device_ids needs a channel_handle with a positive handle");
  if (channel <= 0) return GroupMode::kCrossReplica;
  return global ? GroupMode::kFlattenedIds : GroupMode::kCrossReplicaAndPartition;
}

StatusOr<std::vector<std::vector<int64_t>>> GroupRows(const AttrDict& attrs,
                                                      const std::string& name) {
  std::vector<std::vector<int64_t>> rows;
  const Attribute* a = FindAttr(attrs, name);
  if (!a) return rows;
  if (a->kind() != Attribute::Kind::kElements || !IsInteger(a->as_elements().element_type()) ||
      a->as_elements().type().rank() != 2)
    return InvalidArgument("'" + name + "' must be a rank-2 integer dense attribute");
  const Literal& l = a->as_elements();
  const int64_t n = l.dims()[0], m = l.dims()[1];
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> row;
    for (int64_t j = 0; j < m; ++j) {
      int64_t v = l.GetAsInt64(i * m + j);
      if (v != -1) row.push_back(v);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

StatusOr<std::vector<std::vector<int64_t>>> ProcessGroups(
    GroupMode mode, const std::vector<std::vector<int64_t>>& groups, const ProcessGrid& grid,
    bool must_cover) {
  const int64_t R = grid.num_replicas, P = grid.num_partitions;
  const int64_t bound =
      mode == GroupMode::kCrossReplica || mode == GroupMode::kCrossReplicaAndPartition ? R
      : mode == GroupMode::kCrossPartition                                             ? P
                                           : grid.num_processes();
  const char* unit = bound == R && mode != GroupMode::kFlattenedIds ? "replica"
                     : mode == GroupMode::kCrossPartition           ? "partition"
                                                                    : "device";
  std::vector<std::vector<int64_t>> rows = groups;
  if (rows.empty()) {
    rows.emplace_back();
    for (int64_t i = 0; i < bound; ++i) rows.back().push_back(i);
  }
  const std::string where = std::string("replica_groups ") + FormatRows(groups) + " (" +
                            GroupModeName(mode) + " over " + std::to_string(R) + " replica(s) x " +
                            std::to_string(P) + " partition(s))";
  std::vector<bool> seen(static_cast<size_t>(bound), false);
  int64_t count = 0;
  for (const auto& row : rows) {
    if (row.empty()) return InvalidArgument(where + ": a group is empty");
    for (int64_t id : row) {
      if (id < 0 || id >= bound)
        return InvalidArgument(where + ": " + unit + " id " + std::to_string(id) +
                               " is out of range [0, " + std::to_string(bound) + ")");
      if (seen[id])
        return InvalidArgument(where + ": " + unit + " id " + std::to_string(id) +
                               " appears twice");
      seen[id] = true;
      ++count;
    }
  }
  if (must_cover && count != bound) {
    for (int64_t id = 0; id < bound; ++id)
      if (!seen[id])
        return InvalidArgument(where + ": " + unit + " id " + std::to_string(id) +
                               " is in no group");
  }
  std::vector<std::vector<int64_t>> out;
  for (const auto& row : rows) {
    switch (mode) {
      case GroupMode::kCrossReplica:
        for (int64_t p = 0; p < P; ++p) {
          out.emplace_back();
          for (int64_t r : row) out.back().push_back(grid.DeviceOf(r, p));
        }
        break;
      case GroupMode::kCrossPartition:
        for (int64_t r = 0; r < R; ++r) {
          out.emplace_back();
          for (int64_t p : row) out.back().push_back(grid.DeviceOf(r, p));
        }
        break;
      case GroupMode::kCrossReplicaAndPartition:
        out.emplace_back();
        for (int64_t p = 0; p < P; ++p)
          for (int64_t r : row) out.back().push_back(grid.DeviceOf(r, p));
        break;
      case GroupMode::kFlattenedIds:
        out.push_back(row);
        break;
    }
  }
  return out;
}

std::vector<int64_t> GroupOf(const std::vector<std::vector<int64_t>>& groups, int64_t device) {
  for (const auto& g : groups)
    if (std::find(g.begin(), g.end(), device) != g.end()) return g;
  return {};
}

CollectiveContext& CurrentCollectiveContext() {
  static SoloContext solo;
  return tls_context ? *tls_context : solo;
}

ScopedCollectiveContext::ScopedCollectiveContext(CollectiveContext* ctx) : saved_(tls_context) {
  tls_context = ctx;
}

ScopedCollectiveContext::~ScopedCollectiveContext() { tls_context = saved_; }

namespace {

void NumberChannelsIn(Region& region, int64_t& next) {
  for (auto& block : region.blocks()) {
    for (auto& op : block->mutable_operations()) {
      auto it = op->attrs().find("channel_handle");
      if (it != op->attrs().end() && ChannelId(op->attrs()) > 0) {
        AttrDict fields = it->second.as_dict();
        fields["handle"] = Attribute::Int(next++);
        it->second = Attribute::Struct(it->second.struct_kind(), std::move(fields));
      }
      for (int r = 0; r < op->num_regions(); ++r) NumberChannelsIn(op->region(r), next);
    }
  }
}

}  // namespace

int64_t NumberChannels(Function& fn) {
  int64_t next = 1;
  NumberChannelsIn(fn.body(), next);
  return next - 1;
}

}  // namespace tlaloc
