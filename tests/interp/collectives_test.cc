// Collective ops across N in-process devices (interp/multi_device.h), against hand-computed
// results: the specification's examples, uneven and partial groups, the four group strategies,
// a fixed reduction order, and the errors that must never hang a run.
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/interp/multi_device.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

using Lists = std::vector<std::vector<Literal>>;

StatusOr<Lists> Run(const std::string& text, Lists args, ProcessGrid grid,
                    MultiDeviceOptions options = {}) {
  TL_ASSIGN_OR_RETURN(auto parsed, ParseModule(text));
  std::shared_ptr<const Module> module = std::move(parsed);
  TL_ASSIGN_OR_RETURN(auto exe, Executable::Prepare(module, "main"));
  return ExecuteOnDevices(*exe, std::move(args), grid, options);
}

Lists MustRun(const std::string& text, Lists args, ProcessGrid grid) {
  auto r = Run(text, std::move(args), grid);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : Lists{};
}

template <typename T>
Literal Vec(std::vector<int64_t> dims, std::vector<T> v) {
  return Literal::FromVector<T>(std::move(dims), v);
}

Literal F32(std::vector<int64_t> dims, std::vector<double> v) {
  return Literal::FromDoubles(ElementType::kF32, std::move(dims), v);
}

std::vector<double> Values(const Literal& l) {
  std::vector<double> v;
  for (int64_t i = 0; i < l.num_elements(); ++i) v.push_back(l.GetAsDouble(i));
  return v;
}

std::string AllReduce(const std::string& type, const std::string& attrs,
                      const std::string& body = "stablehlo.add") {
  return "func.func @main(%x: " + type + ") -> " + type +
         " {\n"
         "  %r = \"stablehlo.all_reduce\"(%x) ({\n"
         "  ^bb0(%a: tensor<ELEM>, %b: tensor<ELEM>):\n"
         "    %s = " +
         body +
         " %a, %b : tensor<ELEM>\n"
         "    stablehlo.return %s : tensor<ELEM>\n"
         "  }) {" +
         attrs + "} : (" + type + ") -> " + type +
         "\n"
         "  return %r : " +
         type + "\n}\n";
}

std::string WithElem(std::string text, const std::string& elem) {
  for (size_t p; (p = text.find("ELEM")) != std::string::npos;) text.replace(p, 4, elem);
  return text;
}

TEST(Collectives, AllReduceSumOverTwoReplicasIsTheSpecExample) {
  std::string text = WithElem(
      AllReduce("tensor<4xi64>", "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"), "i64");
  Lists out =
      MustRun(text, {{Vec<int64_t>({4}, {1, 2, 3, 4})}, {Vec<int64_t>({4}, {5, 6, 7, 8})}}, {2, 1});
  ASSERT_EQ(out.size(), 2u);
  for (const auto& o : out) EXPECT_EQ(Values(o[0]), (std::vector<double>{6, 8, 10, 12}));
}

TEST(Collectives, AllReduceOverUnevenGroupsOfFourDevices) {
  // Groups {0} and {1, 2, 3}, padded with -1 as XLA writes uneven groups; s32 and max.
  std::string text =
      WithElem(AllReduce("tensor<2xi32>",
                         "replica_groups = dense<[[0, -1, -1], [3, 1, 2]]> : tensor<2x3xi64>",
                         "stablehlo.maximum"),
               "i32");
  Lists args;
  for (int d = 0; d < 4; ++d) args.push_back({Vec<int32_t>({2}, {d * 10, -d})});
  Lists out = MustRun(text, std::move(args), {4, 1});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Values(out[0][0]), (std::vector<double>{0, 0}));
  for (int d = 1; d < 4; ++d) EXPECT_EQ(Values(out[d][0]), (std::vector<double>{30, -1}));
}

TEST(Collectives, AllReduceBf16SumsInAscendingDeviceOrder) {
  std::string text = WithElem(
      AllReduce("tensor<2xbf16>", "replica_groups = dense<[[3, 2, 1, 0]]> : tensor<1x4xi64>"),
      "bf16");
  // Ascending order: ((256 + 1) + 1) + 1 rounds at each step in bf16 (8 bits of mantissa):
  // 256 + 1 = 256, three times. Any other order that adds the ones first gives 259 -> 260.
  for (int round = 0; round < 5; ++round) {
    Lists args;
    args.push_back({Literal::FromDoubles(ElementType::kBF16, {2}, {256, 1})});
    for (int d = 1; d < 4; ++d)
      args.push_back({Literal::FromDoubles(ElementType::kBF16, {2}, {1, 2})});
    Lists out = MustRun(text, std::move(args), {4, 1});
    ASSERT_EQ(out.size(), 4u);
    for (const auto& o : out) {
      EXPECT_EQ(Values(o[0]), (std::vector<double>{256, 7}));
      EXPECT_TRUE(o[0].BitwiseEquals(out[0][0]));
    }
  }
}

TEST(Collectives, AllReduceF32OrderIsFixedWhateverTheGroupOrder) {
  for (const char* groups : {"[[0, 1, 2, 3]]", "[[2, 3, 0, 1]]", "[[3, 1, 0, 2]]"}) {
    std::string text = WithElem(AllReduce("tensor<1xf32>", std::string("replica_groups = dense<") +
                                                               groups + "> : tensor<1x4xi64>"),
                                "f32");
    Lists args;
    for (double v : {1e8, 1.0, -1e8, 1.0}) args.push_back({F32({1}, {v})});
    Lists out = MustRun(text, std::move(args), {4, 1});
    ASSERT_EQ(out.size(), 4u);
    // ((1e8 + 1) - 1e8) + 1 in f32 is 1: the 1 added first is lost to rounding.
    for (const auto& o : out) EXPECT_EQ(Values(o[0]), (std::vector<double>{1})) << groups;
  }
}

TEST(Collectives, GroupStrategiesOnATwoByTwoGrid) {
  // Device d = replica * 2 + partition holds d + 1.
  auto run = [](const std::string& attrs) {
    std::string text = WithElem(AllReduce("tensor<i32>", attrs), "i32");
    Lists args;
    for (int d = 0; d < 4; ++d) args.push_back({Literal::Scalar<int32_t>(d + 1)});
    Lists out = MustRun(text, std::move(args), {2, 2});
    std::vector<double> v;
    for (const auto& o : out) v.push_back(o[0].GetAsDouble(0));
    return v;
  };
  // cross_replica: replicas {0, 1} within each partition: devices {0, 2} and {1, 3}.
  EXPECT_EQ(run("replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"),
            (std::vector<double>{4, 6, 4, 6}));
  // cross_replica_and_partition: one group of every partition of replicas {0, 1}.
  EXPECT_EQ(run("replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = "
                "#stablehlo.channel_handle<handle = 1, type = 1>"),
            (std::vector<double>{10, 10, 10, 10}));
  // flattened_ids: device ids as written.
  EXPECT_EQ(run("replica_groups = dense<[[0, 3], [1, 2]]> : tensor<2x2xi64>, channel_handle = "
                "#stablehlo.channel_handle<handle = 1, type = 1>, use_global_device_ids"),
            (std::vector<double>{5, 5, 5, 5}));
  // Groups of one: every device keeps its value.
  EXPECT_EQ(run("replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>"),
            (std::vector<double>{1, 2, 3, 4}));
}

TEST(Collectives, AllGatherIsTheSpecExampleAndGathersPerGroup) {
  const std::string text = R"(
func.func @main(%a: tensor<2x2xi64>) -> tensor<2x4xi64> {
  %r = "stablehlo.all_gather"(%a) {all_gather_dim = 1 : i64,
       replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>,
       channel_handle = #stablehlo.channel_handle<handle = 0, type = 0>}
       : (tensor<2x2xi64>) -> tensor<2x4xi64>
  return %r : tensor<2x4xi64>
})";
  Lists args;
  for (int d = 0; d < 4; ++d) {
    int64_t b = 4 * d;
    args.push_back({Vec<int64_t>({2, 2}, {b + 1, b + 2, b + 3, b + 4})});
  }
  Lists out = MustRun(text, std::move(args), {4, 1});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Values(out[0][0]), (std::vector<double>{1, 2, 5, 6, 3, 4, 7, 8}));
  EXPECT_EQ(Values(out[1][0]), (std::vector<double>{1, 2, 5, 6, 3, 4, 7, 8}));
  EXPECT_EQ(Values(out[3][0]), (std::vector<double>{9, 10, 13, 14, 11, 12, 15, 16}));
}

TEST(Collectives, ReduceScatterIsTheSpecExample) {
  const std::string text = R"(
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x2xf32> {
  %r = "stablehlo.reduce_scatter"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}
     : (tensor<2x4xf32>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
})";
  Lists out = MustRun(
      text,
      {{F32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}, {F32({2, 4}, {9, 10, 11, 12, 13, 14, 15, 16})}},
      {2, 1});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Values(out[0][0]), (std::vector<double>{10, 12, 18, 20}));
  EXPECT_EQ(Values(out[1][0]), (std::vector<double>{14, 16, 22, 24}));
}

TEST(Collectives, ReduceScatterOverFourDevicesGivesEachItsQuarter) {
  const std::string text = R"(
func.func @main(%x: tensor<4xi32>) -> tensor<1xi32> {
  %r = "stablehlo.reduce_scatter"(%x) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
     : (tensor<4xi32>) -> tensor<1xi32>
  return %r : tensor<1xi32>
})";
  Lists args;
  for (int d = 0; d < 4; ++d) args.push_back({Vec<int32_t>({4}, {1, 10, 100, 1000 * (d + 1)})});
  Lists out = MustRun(text, std::move(args), {4, 1});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Values(out[0][0]), (std::vector<double>{4}));
  EXPECT_EQ(Values(out[1][0]), (std::vector<double>{40}));
  EXPECT_EQ(Values(out[2][0]), (std::vector<double>{400}));
  EXPECT_EQ(Values(out[3][0]), (std::vector<double>{10000}));
}

TEST(Collectives, AllToAllIsTheSpecExample) {
  const std::string text = R"(
func.func @main(%x: tensor<2x4xi64>) -> tensor<4x2xi64> {
  %r = "stablehlo.all_to_all"(%x) {split_dimension = 1 : i64, concat_dimension = 0 : i64,
       split_count = 2 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}
       : (tensor<2x4xi64>) -> tensor<4x2xi64>
  return %r : tensor<4x2xi64>
})";
  Lists out = MustRun(text,
                      {{Vec<int64_t>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})},
                       {Vec<int64_t>({2, 4}, {9, 10, 11, 12, 13, 14, 15, 16})}},
                      {2, 1});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Values(out[0][0]), (std::vector<double>{1, 2, 5, 6, 9, 10, 13, 14}));
  EXPECT_EQ(Values(out[1][0]), (std::vector<double>{3, 4, 7, 8, 11, 12, 15, 16}));
}

TEST(Collectives, CollectivePermuteShiftsAndZeroFillsOnFourDevices) {
  // A partial chain 0 -> 1 -> 2 (the spec's example) plus 3 -> 0 over partitions.
  const std::string text = R"(
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = "stablehlo.collective_permute"(%x) {
       source_target_pairs = dense<[[0, 1], [1, 2], [3, 0]]> : tensor<3x2xi64>,
       channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>}
       : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
})";
  Lists args;
  for (int d = 0; d < 4; ++d) args.push_back({F32({2}, {d + 1.0, -(d + 1.0)})});
  Lists out = MustRun(text, std::move(args), {1, 4});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Values(out[0][0]), (std::vector<double>{4, -4}));
  EXPECT_EQ(Values(out[1][0]), (std::vector<double>{1, -1}));
  EXPECT_EQ(Values(out[2][0]), (std::vector<double>{2, -2}));
  EXPECT_EQ(Values(out[3][0]), (std::vector<double>{0, 0}));
}

TEST(Collectives, CollectiveBroadcastIsTheSpecExample) {
  const std::string text = R"(
func.func @main(%x: tensor<1x2xi64>) -> tensor<1x2xi64> {
  %r = "stablehlo.collective_broadcast"(%x) {replica_groups = dense<[[2, 1]]> : tensor<1x2xi64>,
       channel_handle = #stablehlo.channel_handle<handle = 0, type = 0>}
       : (tensor<1x2xi64>) -> tensor<1x2xi64>
  return %r : tensor<1x2xi64>
})";
  Lists args;
  for (int d = 0; d < 4; ++d) args.push_back({Vec<int64_t>({1, 2}, {2 * d + 1, 2 * d + 2})});
  Lists out = MustRun(text, std::move(args), {4, 1});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Values(out[0][0]), (std::vector<double>{0, 0}));
  EXPECT_EQ(Values(out[1][0]), (std::vector<double>{5, 6}));
  EXPECT_EQ(Values(out[2][0]), (std::vector<double>{5, 6}));
  EXPECT_EQ(Values(out[3][0]), (std::vector<double>{0, 0}));
}

TEST(Collectives, ReplicaAndPartitionIds) {
  const std::string text = R"(
func.func @main() -> (tensor<ui32>, tensor<ui32>) {
  %r = stablehlo.replica_id : tensor<ui32>
  %p = stablehlo.partition_id : tensor<ui32>
  return %r, %p : tensor<ui32>, tensor<ui32>
})";
  Lists out = MustRun(text, Lists(4), {2, 2});
  ASSERT_EQ(out.size(), 4u);
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(out[d][0].GetAsInt64(0), d / 2);
    EXPECT_EQ(out[d][1].GetAsInt64(0), d % 2);
  }
  // One device, no runner: replica 0, partition 0, and a group of one is the identity.
  auto single = ParseModule(text);
  ASSERT_TRUE(single.ok());
  auto r = Interpret(**single, "main", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].GetAsInt64(0), 0);
}

TEST(Collectives, ProgramsWithCollectivesPrintAndParseBack) {
  const std::string text =
      WithElem(AllReduce("tensor<4xf32>",
                         "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = "
                         "#stablehlo.channel_handle<handle = 1, type = 1>, use_global_device_ids"),
               "f32") +
      R"(
func.func @others(%x: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<1x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>, tensor<ui32>) {
  %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %s = "stablehlo.reduce_scatter"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %t = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xf32>) -> tensor<1x4xf32>
  %a2a = "stablehlo.all_to_all"(%x) {split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 2 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %p = "stablehlo.collective_permute"(%x) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %id = stablehlo.partition_id : tensor<ui32>
  return %g, %s, %a2a, %p, %id : tensor<4x4xf32>, tensor<1x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>, tensor<ui32>
})";
  auto m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::string printed = PrintModule(**m);
  for (const char* piece :
       {"\"stablehlo.all_reduce\"(", "use_global_device_ids", "\"stablehlo.all_gather\"(",
        "\"stablehlo.reduce_scatter\"(", "\"stablehlo.all_to_all\"(",
        "\"stablehlo.collective_permute\"(", "stablehlo.partition_id : tensor<ui32>",
        "#stablehlo.channel_handle<handle = 1, type = 1>",
        "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"})
    EXPECT_NE(printed.find(piece), std::string::npos) << piece << "\n" << printed;
  auto again = ParseModule(printed);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << printed;
  EXPECT_EQ(PrintModule(**again), printed);
}

// ---- Errors -----------------------------------------------------------------------------------

std::string RunError(const std::string& text, Lists args, ProcessGrid grid,
                     MultiDeviceOptions options = {}) {
  auto r = Run(text, std::move(args), grid, options);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().ToString();
}

Lists Scalars(int n) {
  Lists args;
  for (int d = 0; d < n; ++d) args.push_back({Literal::Scalar<int32_t>(d)});
  return args;
}

TEST(Collectives, BadGroupsAreRefusedNamingThem) {
  auto err = [](const std::string& groups, int n) {
    return RunError(WithElem(AllReduce("tensor<i32>", "replica_groups = " + groups), "i32"),
                    Scalars(n), {n, 1});
  };
  std::string dup = err("dense<[[0, 1], [1, 2]]> : tensor<2x2xi64>", 4);
  EXPECT_NE(dup.find("replica_groups [[0, 1], [1, 2]]"), std::string::npos) << dup;
  EXPECT_NE(dup.find("replica id 1 appears twice"), std::string::npos) << dup;
  std::string range = err("dense<[[0, 5]]> : tensor<1x2xi64>", 2);
  EXPECT_NE(range.find("replica id 5 is out of range [0, 2)"), std::string::npos) << range;
  std::string missing = err("dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>", 4);
  EXPECT_NE(missing.find("replica id 3 is in no group"), std::string::npos) << missing;
  // use_global_device_ids needs a channel: refused when the program is parsed.
  auto m = ParseModule(WithElem(
      AllReduce("tensor<i32>",
                "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids"),
      "i32"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("use_global_device_ids needs a channel_handle"),
            std::string::npos)
      << m.status().ToString();
}

TEST(Collectives, ArgumentListsMustMatchTheGrid) {
  std::string e = RunError(
      WithElem(AllReduce("tensor<i32>", "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"),
               "i32"),
      Scalars(3), {2, 1});
  EXPECT_NE(e.find("2 device(s), got 3 argument list(s)"), std::string::npos) << e;
}

TEST(Collectives, AFailingDeviceAbortsTheOthersInsteadOfHanging) {
  const std::string text = WithElem(
      AllReduce("tensor<i32>", "replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>"), "i32");
  Lists args = Scalars(4);
  args[2] = {Literal::Scalar<float>(1.0f)};  // device 2 fails before its first op
  std::string e = RunError(text, std::move(args), {4, 1});
  EXPECT_NE(e.find("device 2"), std::string::npos) << e;
  EXPECT_NE(e.find("argument 0 of @main"), std::string::npos) << e;
}

// Device 0 takes a branch without the all_reduce; device 1 waits at it.
const char* kDivergent = R"(
func.func @main(%x: tensor<i32>) -> tensor<i32> {
  %id = stablehlo.replica_id : tensor<ui32>
  %i = stablehlo.convert %id : (tensor<ui32>) -> tensor<i32>
  %r = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<i32>
  }, {
    %s = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      %t = stablehlo.add %a, %b : tensor<i32>
      stablehlo.return %t : tensor<i32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<i32>) -> tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) : (tensor<i32>) -> tensor<i32>
  return %r : tensor<i32>
})";

TEST(Collectives, ADeviceThatNeverArrivesIsNamed) {
  std::string e = RunError(kDivergent, Scalars(2), {2, 1});
  EXPECT_NE(e.find("device 1"), std::string::npos) << e;
  EXPECT_NE(e.find("device 0 finished its program without reaching it"), std::string::npos) << e;
}

TEST(Collectives, DevicesAtDifferentCollectivesAreTold) {
  std::string text = kDivergent;
  // Device 0's branch permutes instead.
  text.replace(text.find("stablehlo.return %x : tensor<i32>"),
               std::string("stablehlo.return %x : tensor<i32>").size(),
               "%g = \"stablehlo.collective_permute\"(%x) {source_target_pairs = "
               "dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>} : (tensor<i32>) -> tensor<i32>\n"
               "    stablehlo.return %g : tensor<i32>");
  MultiDeviceOptions fast;
  fast.timeout = std::chrono::milliseconds(2000);
  std::string e = RunError(text, Scalars(2), {2, 1}, fast);
  EXPECT_NE(e.find("reached stablehlo."), std::string::npos) << e;
  EXPECT_NE(e.find("instead"), std::string::npos) << e;
}

TEST(Collectives, CpuDevicesFromEnvironment) {
  unsetenv("TLALOC_CPU_DEVICES");
  EXPECT_EQ(*CpuDevicesFromEnvironment(), 1);
  setenv("TLALOC_CPU_DEVICES", "4", 1);
  EXPECT_EQ(*CpuDevicesFromEnvironment(), 4);
  setenv("TLALOC_CPU_DEVICES", "four", 1);
  auto bad = CpuDevicesFromEnvironment();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TLALOC_CPU_DEVICES"), std::string::npos);
  unsetenv("TLALOC_CPU_DEVICES");
}

}  // namespace
}  // namespace tlaloc
