// PJRT across processes (run under mpirun -np 2): Tlaloc's client opens Tlaloc's plugin with
// node_id / num_nodes and the MPI-backed key-value store; every rank sees both ranks' devices
// in the global list and its own as the addressable ones, with global ids.
#include <gtest/gtest.h>

#include "tlaloc/interp/process_world.h"
#include "tlaloc/pjrt/kv_store.h"
#include "tlaloc/pjrt/session.h"

namespace tlaloc::pjrt {
namespace {

TEST(MpiPjrt, OwnPluginsDeviceListSpansTheRanksThroughTheStore) {
  auto world = CurrentWorld();
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  ASSERT_EQ((*world)->size(), 2) << "run this test under mpirun -np 2";
  const int rank = (*world)->rank();
  SessionOptions options;
  options.plugin_path = TLALOC_PJRT_CPU_PLUGIN;
  options.cpu_device_count = 2;
  options.node_id = rank;
  options.num_nodes = 2;
  options.kv_store = MakeWorldKeyValueStore(**world);
  auto session = PjrtSession::Open(options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ((*session)->process_index(), rank);
  EXPECT_EQ((*session)->global_device_count(), 4);
  ASSERT_EQ((*session)->devices().size(), 2u);
  EXPECT_EQ((*session)->devices()[0].id, 2 * rank);
  EXPECT_EQ((*session)->devices()[1].id, 2 * rank + 1);
  // The store holds what every rank put.
  auto other =
      options.kv_store->TryGet("tlaloc_pjrt_cpu:devices_of_node:" + std::to_string(1 - rank));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(*other, "2");
}

TEST(MpiPjrt, NodeOptionsAreCheckedBeforeThePluginIsAsked) {
  SessionOptions options;
  options.node_id = 0;
  options.num_nodes = 2;
  auto built = BuildCreateOptions(options, std::nullopt);
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("needs a key-value store"), std::string::npos);
  options.node_id = 2;
  options.kv_store = MakeInMemoryKeyValueStore();
  built = BuildCreateOptions(options, std::nullopt);
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("0 <= node_id < num_nodes"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::pjrt
