// The interpreter's collectives across processes (interp/process_world.h), run under
// `mpirun -np 2` by tests/mpi/run_under_mpirun.sh: every program's results on this rank's
// devices equal, bit for bit, those of the same devices in one process (ExecuteOnDevices with
// no world); the agreement check names each differing field and rank; literals survive the
// byte format. Without mpirun (a world of one) the test says so and fails: it must run there.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tlaloc/interp/multi_device.h"
#include "tlaloc/interp/process_world.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

using Lists = std::vector<std::vector<Literal>>;

ProcessWorld& World() {
  auto w = CurrentWorld();
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? **w : SingleProcessWorld();
}

StatusOr<Lists> RunProgram(const std::string& text, Lists args, ProcessGrid grid,
                           ProcessWorld* world) {
  TL_ASSIGN_OR_RETURN(auto parsed, ParseModule(text));
  std::shared_ptr<const Module> module = std::move(parsed);
  TL_ASSIGN_OR_RETURN(auto exe, Executable::Prepare(module, "main"));
  MultiDeviceOptions options;
  options.world = world;
  options.timeout = std::chrono::seconds(60);
  return ExecuteOnDevices(*exe, std::move(args), grid, options);
}

// Values whose f32 sum depends on the order of addition, so that any other reduction order
// than the in-process one shows up as a different bit pattern.
Literal OrderSensitive(int64_t device, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(
        std::ldexp(1.0 + 0.1 * (i + 1), static_cast<int>((device * 7 + i) % 40 - 20)) *
        (device % 2 ? -1 : 1));
  return Literal::FromVector<float>({n}, v);
}

// Runs `text` on `devices` devices split over the world and in one process; compares this
// rank's devices' results.
void ExpectSameAsOneProcess(const std::string& text, int64_t devices, ProcessGrid grid, int64_t n) {
  ProcessWorld& world = World();
  ASSERT_EQ(world.size(), 2) << "run this test under mpirun -np 2 (run_under_mpirun.sh)";
  Lists args, again;
  for (int64_t d = 0; d < devices; ++d) {
    args.push_back({OrderSensitive(d, n)});
    again.push_back({OrderSensitive(d, n)});
  }
  auto one = RunProgram(text, std::move(args), grid, nullptr);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto many = RunProgram(text, std::move(again), grid, &world);
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  const int64_t local = devices / world.size();
  for (int64_t d = 0; d < devices; ++d) {
    const bool mine = d / local == world.rank();
    ASSERT_EQ((*many)[d].empty(), !mine) << "device " << d;
    if (!mine) continue;
    ASSERT_EQ((*many)[d].size(), (*one)[d].size());
    for (size_t k = 0; k < (*one)[d].size(); ++k)
      EXPECT_TRUE((*many)[d][k].BitwiseEquals((*one)[d][k]))
          << "device " << d << " result " << k << ": " << (*many)[d][k].ToString() << " vs "
          << (*one)[d][k].ToString();
  }
}

// The f32 addition region of a reduction, up to the attribute dictionary's opening brace.
const std::string kSum =
    "\n  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "    %s = stablehlo.add %a, %b : tensor<f32>\n"
    "    stablehlo.return %s : tensor<f32>\n  }) {";

TEST(MpiCollectives, AllReduceOfTwoRanksEqualsTwoInProcessDevices) {
  const std::string text =
      R"(
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %r = "stablehlo.all_reduce"(%x) ({)" +
      kSum +
      R"(replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<64xf32>) -> tensor<64xf32>
  return %r : tensor<64xf32>
})";
  ExpectSameAsOneProcess(text, 2, {2, 1}, 64);
}

TEST(MpiCollectives, FourDevicesOnTwoRanksMixLocalAndRemoteMembers) {
  // Groups {0, 2} and {1, 3} cross ranks (rank 0 holds 0 and 1); then one group of all four;
  // then a gather, a scatter, an all-to-all and a permute.
  const std::string text =
      R"(
func.func @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<32xf32>, tensor<2xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a = "stablehlo.all_reduce"(%x) ({)" +
      kSum +
      R"(replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<8xf32>) -> tensor<8xf32>
  %b = "stablehlo.all_reduce"(%a) ({)" +
      kSum +
      R"(replica_groups = dense<[[3, 1, 0, 2]]> : tensor<1x4xi64>} : (tensor<8xf32>) -> tensor<8xf32>
  %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<8xf32>) -> tensor<32xf32>
  %s = "stablehlo.reduce_scatter"(%x) ({)" +
      kSum +
      R"(scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<8xf32>) -> tensor<2xf32>
  %t = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 4 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<8xf32>) -> tensor<8xf32>
  %p = "stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 3], [3, 1], [2, 0]]> : tensor<3x2xi64>} : (tensor<8xf32>) -> tensor<8xf32>
  return %a, %b, %g, %s, %t, %p : tensor<8xf32>, tensor<8xf32>, tensor<32xf32>, tensor<2xf32>, tensor<8xf32>, tensor<8xf32>
})";
  ExpectSameAsOneProcess(text, 4, {4, 1}, 8);
}

TEST(MpiCollectives, MismatchedProgramsAcrossRanksAreAnErrorNamingTheDevice) {
  ProcessWorld& world = World();
  ASSERT_EQ(world.size(), 2);
  // Rank 1's device reaches an all_gather where rank 0's reaches an all_reduce.
  const std::string reduce =
      R"(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = "stablehlo.all_reduce"(%x) ({)" +
      kSum +
      R"(replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
})";
  const std::string gather = R"(
func.func @main(%x: tensor<4xf32>) -> tensor<8xf32> {
  %r = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
})";
  Lists args{{OrderSensitive(0, 4)}, {OrderSensitive(1, 4)}};
  auto r = RunProgram(world.rank() == 0 ? reduce : gather, std::move(args), {2, 1}, &world);
  ASSERT_FALSE(r.ok());
  const std::string other = world.rank() == 0 ? "device 1 reached stablehlo.all_gather"
                                              : "device 0 reached stablehlo.all_reduce";
  EXPECT_NE(r.status().message().find(other), std::string::npos) << r.status().ToString();
}

TEST(MpiCollectives, AgreementCheckNamesTheFieldAndTheRank) {
  ProcessWorld& world = World();
  ASSERT_EQ(world.size(), 2);
  const std::string rank = std::to_string(world.rank());
  EXPECT_TRUE(
      CheckSameOnAllRanks(world, {{"mesh", "data=2"}, {"plan", "dp"}}, std::chrono::seconds(60))
          .ok());
  Status s =
      CheckSameOnAllRanks(world, {{"mesh", "data=2"}, {"plan", world.rank() ? "fsdp" : "dp"}},
                          std::chrono::seconds(60));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("plan: rank 1 has fsdp, rank 0 has dp"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.message().find("mesh"), std::string::npos) << s.ToString();
}

TEST(MpiCollectives, LiteralsSurviveTheByteFormat) {
  std::vector<Literal> in{Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, -0.0f}),
                          Literal::Scalar<int32_t>(7), Literal::FromVector<int64_t>({0}, {})};
  std::string bytes = "junk";
  size_t pos = bytes.size();
  AppendLiterals(in, bytes);
  auto out = ReadLiterals(bytes, pos);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(pos, bytes.size());
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE((*out)[i].BitwiseEquals(in[i])) << i;
  size_t at = 4;
  EXPECT_FALSE(ReadLiterals(std::string_view(bytes).substr(0, bytes.size() - 3), at).ok());
}

}  // namespace
}  // namespace tlaloc
