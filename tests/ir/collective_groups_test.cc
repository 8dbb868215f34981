// How replica_groups become process groups (ir/collectives.h), for each of the specification's
// strategies, and which attributes choose the strategy.
#include <gtest/gtest.h>

#include "tlaloc/ir/collectives.h"

namespace tlaloc {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

Groups Must(GroupMode mode, const Groups& g, ProcessGrid grid) {
  auto r = ProcessGroups(mode, g, grid);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Groups{};
}

TEST(ProcessGroups, TheSpecificationsExamples) {
  // Device ids: replica * num_partitions + partition.
  EXPECT_EQ(Must(GroupMode::kCrossReplica, {{0, 1}, {2, 3}}, {4, 2}),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(Must(GroupMode::kCrossPartition, {{0, 1}}, {4, 2}),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(Must(GroupMode::kCrossReplicaAndPartition, {{0, 1}, {2, 3}}, {4, 2}),
            (Groups{{0, 2, 1, 3}, {4, 6, 5, 7}}));
  EXPECT_EQ(Must(GroupMode::kFlattenedIds, {{0, 1, 2, 3}, {4, 5, 6, 7}}, {4, 2}),
            (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // No groups written: one group of everything.
  EXPECT_EQ(Must(GroupMode::kCrossReplica, {}, {3, 1}), (Groups{{0, 1, 2}}));
  EXPECT_EQ(GroupOf(Groups{{0, 2}, {1, 3}}, 3), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(GroupOf(Groups{{0, 2}}, 1).empty());
}

TEST(ProcessGroups, BadGroupsNameTheirRowsAndTheId) {
  auto e = ProcessGroups(GroupMode::kFlattenedIds, {{0, 1}, {1, 2}}, {3, 1});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("replica_groups [[0, 1], [1, 2]] (flattened_ids over 3 "
                                      "replica(s) x 1 partition(s)): device id 1 appears twice"),
            std::string::npos)
      << e.status().message();
  e = ProcessGroups(GroupMode::kCrossPartition, {{0, 2}}, {1, 2});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("partition id 2 is out of range [0, 2)"), std::string::npos)
      << e.status().message();
  // Groups that leave a replica out are an error unless the op allows it (collective_broadcast).
  EXPECT_FALSE(ProcessGroups(GroupMode::kCrossReplica, {{0, 1}}, {3, 1}).ok());
  EXPECT_TRUE(ProcessGroups(GroupMode::kCrossReplica, {{0, 1}}, {3, 1}, false).ok());
}

TEST(ProcessGroups, ModesFollowChannelAndGlobalIds) {
  AttrDict none;
  EXPECT_EQ(*CollectiveGroupMode("stablehlo.all_reduce", none), GroupMode::kCrossReplica);
  AttrDict channel{{"channel_handle",
                    Attribute::Struct("stablehlo.channel_handle", {{"handle", Attribute::Int(1)},
                                                                   {"type", Attribute::Int(1)}})}};
  EXPECT_EQ(*CollectiveGroupMode("stablehlo.all_gather", channel),
            GroupMode::kCrossReplicaAndPartition);
  EXPECT_EQ(*CollectiveGroupMode("stablehlo.all_to_all", channel), GroupMode::kCrossPartition);
  EXPECT_EQ(*CollectiveGroupMode("stablehlo.collective_permute", none), GroupMode::kCrossReplica);
  AttrDict global = channel;
  global["use_global_device_ids"] = Attribute::Unit();
  EXPECT_EQ(*CollectiveGroupMode("stablehlo.reduce_scatter", global), GroupMode::kFlattenedIds);
  AttrDict global_no_channel{{"use_global_device_ids", Attribute::Unit()}};
  EXPECT_FALSE(CollectiveGroupMode("stablehlo.all_reduce", global_no_channel).ok());
}

}  // namespace
}  // namespace tlaloc
