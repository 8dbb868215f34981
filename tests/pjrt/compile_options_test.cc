#include "tlaloc/pjrt/compile_options.h"

#include <gtest/gtest.h>

#include "compile_options.pb.h"

namespace tlaloc::pjrt {
namespace {

std::string Hex(const std::string& bytes) {
  std::string out;
  char buf[4];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof(buf), "%02X ", c);
    out += buf;
  }
  if (!out.empty()) out.pop_back();
  return out;
}

// The runbook's pin: executable_build_options (3) { num_replicas (4) = 1, num_partitions (5) = 1 }.
TEST(CompileOptions, OneReplicaOnePartitionEncodesToSixBytes) {
  CompileOptions o;
  auto bytes = o.Serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(Hex(*bytes), "1A 04 20 01 28 01");
  // And the same bytes decode to one replica, one partition, with protobuf's own parser.
  xla_compat::CompileOptionsProto proto;
  ASSERT_TRUE(proto.ParseFromString(std::string("\x1A\x04\x20\x01\x28\x01", 6)));
  EXPECT_EQ(proto.executable_build_options().num_replicas(), 1);
  EXPECT_EQ(proto.executable_build_options().num_partitions(), 1);
  auto back = CompileOptions::Parse(*bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->num_replicas, 1);
  EXPECT_EQ(back->num_partitions, 1);
  EXPECT_FALSE(back->strict_precision);
}

// The Shardy global program's options, as XLA:CPU compiles them (tests/train/lane_train_test.cc):
// build options { num_replicas 1, num_partitions 2, use_spmd_partitioning, device_assignment
// { replica_count 1, computation_count 2, computation_devices [{0}], [{1}] },
// use_shardy_partitioner (field 19: tag 98 01) }.
TEST(CompileOptions, ShardyTwoPartitionsEncodeTo27Bytes) {
  CompileOptions o;
  o.num_partitions = 2;
  o.use_spmd_partitioning = true;
  o.use_shardy_partitioner = true;
  o.device_assignment = {{0, 1}};
  auto bytes = o.Serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(Hex(*bytes),
            "1A 19 20 01 28 02 30 01 4A 0E 08 01 10 02 1A 03 0A 01 00 1A 03 0A 01 01 98 01 01");
  auto back = CompileOptions::Parse(*bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->num_partitions, 2);
  EXPECT_TRUE(back->use_spmd_partitioning);
  EXPECT_TRUE(back->use_shardy_partitioner);
  EXPECT_EQ(back->device_assignment, (std::vector<std::vector<int64_t>>{{0, 1}}));
}

TEST(CompileOptions, RoundTripsEveryField) {
  CompileOptions o;
  o.num_replicas = 2;
  o.num_partitions = 3;
  o.use_spmd_partitioning = true;
  o.use_shardy_partitioner = true;
  o.device_assignment = {{0, 1, 2}, {3, 4, 5}};
  o.strict_precision = true;
  o.dump_to = "/tmp/dump";
  auto bytes = o.Serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = CompileOptions::Parse(*bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->num_replicas, 2);
  EXPECT_EQ(back->num_partitions, 3);
  EXPECT_TRUE(back->use_spmd_partitioning);
  EXPECT_TRUE(back->use_shardy_partitioner);
  EXPECT_EQ(back->device_assignment, o.device_assignment);
  EXPECT_TRUE(back->strict_precision);
  EXPECT_EQ(back->dump_to.value_or(""), "/tmp/dump");
  // Field numbers, checked on the message itself: use_shardy_partitioner is field 19.
  xla_compat::CompileOptionsProto proto;
  ASSERT_TRUE(proto.ParseFromString(*bytes));
  EXPECT_TRUE(proto.executable_build_options().use_shardy_partitioner());
  EXPECT_FALSE(proto.executable_build_options().has_debug_options());
  EXPECT_EQ(proto.env_option_overrides().at("xla_dump_to").string_field(), "/tmp/dump");
}

// The runbook's STRICT_PRECISION form, pinned like the default's: the six bytes, then
// env_option_overrides (7) { key (1) = "xla_allow_excess_precision", value (2) {
// bool_field (2) = false } }. No debug_options message (3 inside 3): XLA would take it whole,
// every other debug option at proto zero instead of XLA's defaults.
TEST(CompileOptions, StrictPrecisionIsAnOptionOverride) {
  auto bytes = CompileOptions::StrictPrecision().Serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  std::string key_hex = Hex("xla_allow_excess_precision");
  EXPECT_EQ(Hex(*bytes), "1A 04 20 01 28 01 3A 20 0A 1A " + key_hex + " 12 02 10 00");
  xla_compat::CompileOptionsProto proto;
  ASSERT_TRUE(proto.ParseFromString(*bytes));
  EXPECT_FALSE(proto.executable_build_options().has_debug_options());
  ASSERT_EQ(proto.env_option_overrides().count("xla_allow_excess_precision"), 1u);
  const auto& v = proto.env_option_overrides().at("xla_allow_excess_precision");
  EXPECT_EQ(v.value_case(), xla_compat::OptionOverrideProto::kBoolField);
  EXPECT_FALSE(v.bool_field());
  auto back = CompileOptions::Parse(*bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->strict_precision);
  EXPECT_EQ(back->num_replicas, 1);
  // The same options are the same bytes (map entries in key order), and a plain form differs.
  CompileOptions both = CompileOptions::StrictPrecision();
  both.dump_to = "/d";
  EXPECT_EQ(both.Serialize().value(), both.Serialize().value());
  EXPECT_NE(Hex(*bytes), Hex(CompileOptions().Serialize().value()));
}

// Bytes an older Tlaloc sent (an empty debug_options) still read back as strict.
TEST(CompileOptions, ParsesTheDebugOptionsForm) {
  auto back = CompileOptions::Parse(std::string("\x1A\x06\x1A\x00\x20\x01\x28\x01", 8));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->strict_precision);
}

TEST(CompileOptions, RefusesBadShapes) {
  CompileOptions o;
  o.num_replicas = 0;
  EXPECT_EQ(o.Serialize().status().code(), StatusCode::kInvalidArgument);
  CompileOptions d;
  d.num_replicas = 2;
  d.device_assignment = {{0}};
  auto s = d.Serialize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("device_assignment"), std::string::npos);
}

TEST(CompileOptions, MalformedBytesAreDataLoss) {
  auto r = CompileOptions::Parse(std::string("\x1A\x7F\x20", 3));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tlaloc::pjrt
