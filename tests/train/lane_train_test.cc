// Training on the TLALOC_TEST_PJRT_TARGET lane's plugin (Tlaloc's own by default, XLA:CPU with
// xla-cpu) against the interpreter, same inputs:
//  - the loss and every gradient of the chunked LM-head loss with remat layers;
//  - the AdamW step with parameters and moments donated: the plugin reports the aliasing in its
//    compiled memory, the donated inputs are consumed, and the updated outputs live where the
//    inputs were (device addresses, where the plugin reports them): no copy;
//  - the sharding plans (dp, fsdp, tp, dp_tp; dense and MoE) as per-device programs on 2 and 4
//    of the plugin's devices give the unsharded step's losses.
// Exact on Tlaloc's plugin; on another the largest differences are printed and bounded (XLA:CPU's
// figures: docs/PJRT.md).
#include <gtest/gtest.h>

#include <cstdio>

#include "pjrt/pjrt_test_util.h"
#include "sharded_test_util.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/pjrt/program_text.h"
#include "tlaloc/shard/plan.h"
#include "tlaloc/train/adamw.h"
#include "tlaloc/train/sharded_trainer.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {
namespace {

using namespace testing_sharded;  // NOLINT: the shared fixture's names read as local ones

class LaneTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    lane_ = pjrt::testing::TestLane();
    ASSERT_TRUE(lane_.error.empty()) << lane_.error;
    if (!lane_.skip.empty()) GTEST_SKIP() << lane_.skip;
  }
  pjrt::SessionOptions Options(int devices) const {
    pjrt::SessionOptions o;
    o.target = lane_.target;
    if (devices > 1) o.cpu_device_count = devices;
    return o;
  }
  // Prints `value` (a relative difference) and checks it: zero on Tlaloc's plugin, at most
  // `bound` on another.
  void Expect(const std::string& what, double value, double bound) {
    RecordProperty(what, std::to_string(value));
    std::printf("  %s: %.3g\n", what.c_str(), value);
    if (lane_.is_tlaloc_plugin()) {
      EXPECT_EQ(value, 0) << what;
    } else {
      EXPECT_LE(value, bound) << what;
    }
  }
  pjrt::testing::Lane lane_;
};

TEST_F(LaneTrain, LossAndGradientsOfTheChunkedLossWithRemat) {
  const io::ModelConfig c = TinyConfig();
  TrainOptions o = testing_sharded::Options();
  o.loss_chunk = 8;  // 4 x 8 tokens in 4 chunks of the LM head
  o.remat_layers = true;
  auto module = BuildLossAndGradProgram(c, o, kBatch, kSeq);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto plugin = pjrt::MakePjrtBackend(Options(1));
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  auto interp = MakeInterpreterBackend();
  std::vector<Literal> args = Weights(c);
  const Batch batch = MakeBatch(c, 3);
  args.push_back(batch.input_ids);
  args.push_back(batch.labels);
  auto p1 = interp->Compile(*module);
  auto p2 = (*plugin)->Compile(*module);
  ASSERT_TRUE(p1.ok() && p2.ok()) << p2.status().ToString();
  auto want = interp->Run(**p1, args);
  auto got = (*plugin)->Run(**p2, args);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want->size());
  Expect("loss_relative_difference", RelativeDiff((*got)[0], (*want)[0]), 1e-5);
  EXPECT_EQ((*got)[1].GetAsDouble(0), (*want)[1].GetAsDouble(0)) << "counted tokens";
  double worst = 0;
  for (size_t i = 2; i < want->size(); ++i)
    worst = std::max(worst, RelativeDiff((*got)[i], (*want)[i]));
  Expect("largest_gradient_relative_difference", worst, 1e-4);
}

TEST_F(LaneTrain, AdamWDonationIsHonouredInPlace) {
  const std::vector<TensorType> types = {TensorType(ElementType::kF32, {64, 32}),
                                         TensorType(ElementType::kF32, {32})};
  auto module = BuildAdamWProgram(testing_sharded::Options().adamw, types);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const Function& entry = *(*module)->Entry();
  auto text = pjrt::PrintProgramText(**module, entry);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto session = pjrt::PjrtSession::Open(Options(1));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  pjrt::PjrtSession& s = **session;
  auto exe = s.Compile(*text);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  // params, grads, m, v (two each), step.
  std::vector<Literal> args;
  for (int group = 0; group < 4; ++group)
    for (size_t i = 0; i < types.size(); ++i) {
      std::vector<float> v(types[i].num_elements());
      for (size_t k = 0; k < v.size(); ++k)
        v[k] = group == 3 ? 0.01f * static_cast<float>(k % 5)
                          : 0.1f * static_cast<float>((k * (group + 3)) % 17) - 0.8f;
      args.push_back(Literal::FromVector<float>(types[i].dims, v));
    }
  args.push_back(Literal::FromVector<int32_t>({}, {3}));
  int64_t donated_bytes = 0;
  for (const TensorType& t : types) donated_bytes += 3 * t.num_elements() * 4;

  auto stats = (*exe)->MemoryStats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  std::printf(
      "  compiled memory: arguments %lld, outputs %lld, alias %lld, temp %lld bytes\n",
      static_cast<long long>(stats->argument_bytes), static_cast<long long>(stats->output_bytes),
      static_cast<long long>(stats->alias_bytes), static_cast<long long>(stats->temp_bytes));
  EXPECT_EQ(stats->alias_bytes, donated_bytes) << "params and moments alias their updates";

  std::vector<pjrt::PjrtBuffer> buffers;
  std::vector<const pjrt::PjrtBuffer*> ptrs;
  for (const Literal& a : args) {
    auto b = s.ToDevice(a);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    buffers.push_back(std::move(*b));
  }
  for (const auto& b : buffers) ptrs.push_back(&b);
  // Where params (0, 1), m (4, 5) and v (6, 7) live before the step.
  const std::vector<std::pair<size_t, size_t>> aliased = {{0, 0}, {1, 1}, {4, 2},
                                                          {5, 3}, {6, 4}, {7, 5}};
  std::vector<uintptr_t> before;
  for (auto [in, out] : aliased) {
    auto a = s.DeviceAddress(buffers[in]);
    if (!a.ok()) break;
    before.push_back(*a);
  }
  auto outs = s.Execute(**exe, ptrs);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  for (auto [in, out] : aliased) EXPECT_TRUE(buffers[in].IsDeleted()) << "argument " << in;
  EXPECT_FALSE(buffers[2].IsDeleted()) << "gradients are not donated";
  if (before.size() == aliased.size()) {
    int in_place = 0;
    for (size_t k = 0; k < aliased.size(); ++k) {
      auto after = s.DeviceAddress((*outs)[aliased[k].second]);
      ASSERT_TRUE(after.ok()) << after.status().ToString();
      in_place += *after == before[k];
    }
    RecordProperty("adamw_outputs_in_place", in_place);
    std::printf("  %d of %zu updated parameters and moments live where the donated inputs were\n",
                in_place, aliased.size());
    EXPECT_EQ(in_place, static_cast<int>(aliased.size()));
  } else {
    std::printf(
        "  the plugin does not report device addresses (PJRT_Buffer_UnsafePointer): "
        "in-place update checked by alias bytes and deletion only\n");
  }
  auto want = Interpret(**module, entry.name(), args);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  double worst = 0;
  for (size_t i = 0; i < want->size(); ++i) {
    auto host = s.ToHost((*outs)[i]);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    worst = std::max(worst, RelativeDiff(*host, (*want)[i]));
  }
  Expect("adamw_largest_relative_difference", worst, 1e-5);
}

struct PlanCase {
  const char* plan;
  const char* mesh;
  bool moe;
};

// The per-device step programs of each plan on the plugin's devices against the unsharded
// step on one interpreter device: three AdamW steps' losses and gradient norms.
TEST_F(LaneTrain, ShardingPlansGiveTheUnshardedLosses) {
  for (const PlanCase& k :
       {PlanCase{"dp", "data=2", false}, PlanCase{"fsdp", "data=2", false},
        PlanCase{"tp", "model=2", false}, PlanCase{"dp_tp", "data=2,model=2", false},
        PlanCase{"tp", "model=2", true}, PlanCase{"fsdp", "data=4", true}}) {
    const std::string what = std::string(k.moe ? "moe_" : "") + k.plan + "_" + k.mesh;
    const io::ModelConfig c = k.moe ? TinyMoeConfig() : TinyConfig();
    auto mesh = Mesh::Parse(k.mesh);
    ASSERT_TRUE(mesh.ok());
    const int n = static_cast<int>(mesh->num_devices());
    TrainOptions o = testing_sharded::Options();
    o.mesh = k.mesh;
    o.plan = k.plan;
    auto plugin = pjrt::MakePjrtBackend(Options(n));
    ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
    ASSERT_GE((*plugin)->num_devices(), n) << what;
    auto one = MakeInterpreterBackend({}, 1);
    auto want = Trainer::Create(c, Weights(c), testing_sharded::Options(), *one, kBatch, kSeq);
    auto got = Trainer::Create(c, Weights(c), o, **plugin, kBatch, kSeq);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    double loss = 0, norm = 0;
    for (int s = 0; s < 3; ++s) {
      const Batch batch = MakeBatch(c, 40 + s);
      auto a = (*want)->Step(batch);
      auto b = (*got)->Step(batch);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(b.ok()) << what << ": " << b.status().ToString();
      EXPECT_EQ(a->tokens, b->tokens) << what;
      loss = std::max(loss, std::fabs(a->loss - b->loss) / std::fabs(a->loss));
      norm = std::max(norm, std::fabs(a->grad_norm - b->grad_norm) / std::fabs(a->grad_norm));
    }
    // A sharded sum adds in another order than the unsharded one, even on the interpreter.
    RecordProperty(what + "_loss", std::to_string(loss));
    std::printf("  %s: loss %.3g, gradient norm %.3g (largest relative differences, 3 steps)\n",
                what.c_str(), loss, norm);
    EXPECT_LE(loss, 1e-5) << what;
    EXPECT_LE(norm, 1e-4) << what;
  }
}

// The plan's train step as one global program with Shardy annotations (sdy.mesh, sdy.sharding,
// sdy.sharding_constraint), partitioned by XLA itself: use_spmd_partitioning and
// use_shardy_partitioner, one replica of N partitions. Each device gets its part of every
// argument as the annotations say; the parts of the results assemble to the unsharded step's.
TEST_F(LaneTrain, ShardyGlobalProgramGivesTheUnshardedStep) {
  auto probe = pjrt::PjrtSession::Open(Options(1));
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  bool xla = false;
  for (const auto& [key, value] : (*probe)->attributes()) xla = xla || key == "xla_version";
  probe->reset();
  if (!xla)
    GTEST_SKIP() << "the global program is for XLA's partitioner; this lane's plugin ("
                 << lane_.plugin_path << ") has none (its per-device programs are "
                 << "ShardingPlansGiveTheUnshardedLosses)";
  for (const PlanCase& k :
       {PlanCase{"dp", "data=2", false}, PlanCase{"fsdp", "data=4", false},
        PlanCase{"tp", "model=2", false}, PlanCase{"dp_tp", "data=2,model=2", false}}) {
    const std::string what = std::string("shardy_") + k.plan + "_" + k.mesh;
    const io::ModelConfig c = TinyConfig();
    auto mesh = Mesh::Parse(k.mesh);
    ASSERT_TRUE(mesh.ok());
    const int n = static_cast<int>(mesh->num_devices());
    auto plan = shard::ShardingPlan::Make(k.plan, *mesh, c, kBatch);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    TrainOptions o = testing_sharded::Options();
    auto module = BuildAnnotatedStepProgram(c, o, *plan, kSeq);
    ASSERT_TRUE(module.ok()) << module.status().ToString();
    const Function& fn = *(*module)->Entry();

    // Global arguments: weights, zero moments, step 1, tokens.
    std::vector<Literal> args = Weights(c);
    const size_t w = args.size();
    for (int g = 0; g < 2; ++g)
      for (size_t i = 0; i < w; ++i) args.push_back(Literal(args[i].type()));
    args.push_back(Literal::Scalar<int32_t>(1));
    const Batch batch = MakeBatch(c, 50);
    args.push_back(batch.input_ids);
    args.push_back(batch.labels);
    ASSERT_EQ(static_cast<int>(args.size()), fn.num_arguments());
    auto want = Interpret(**module, fn.name(), args);
    ASSERT_TRUE(want.ok()) << want.status().ToString();

    auto session = pjrt::PjrtSession::Open(Options(n));
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    pjrt::CompileOptions options;
    options.num_partitions = n;
    options.use_spmd_partitioning = true;
    options.use_shardy_partitioner = true;
    options.device_assignment.assign(1, {});
    for (int d = 0; d < n; ++d) options.device_assignment[0].push_back((*session)->devices()[d].id);
    auto text = pjrt::PrintProgramText(**module, fn);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto exe = (*session)->Compile(*text, options);
    ASSERT_TRUE(exe.ok()) << what << ": " << exe.status().ToString();

    std::vector<std::vector<pjrt::PjrtBuffer>> held(n);
    std::vector<std::vector<const pjrt::PjrtBuffer*>> lists(n);
    for (int d = 0; d < n; ++d) {
      for (int i = 0; i < fn.num_arguments(); ++i) {
        auto sharding = ArgSharding(fn, i);
        ASSERT_TRUE(sharding.ok()) << sharding.status().ToString();
        Literal part = args[i];
        if (sharding->has_value()) {
          auto local = shard::LocalPart(args[i], *mesh, **sharding, d);
          ASSERT_TRUE(local.ok()) << local.status().ToString();
          part = std::move(*local);
        }
        auto b = (*session)->ToDevice(part, d);
        ASSERT_TRUE(b.ok()) << b.status().ToString();
        held[d].push_back(std::move(*b));
      }
      for (const auto& b : held[d]) lists[d].push_back(&b);
    }
    pjrt::ExecuteRequest keep;  // the arguments stay: nothing donated
    for (int i = 0; i < fn.num_arguments(); ++i) keep.non_donatable_input_indices.push_back(i);
    auto outs = (*session)->ExecuteOnDevices(**exe, lists, keep);
    ASSERT_TRUE(outs.ok()) << what << ": " << outs.status().ToString();
    ASSERT_EQ(static_cast<int>(outs->size()), n);
    ASSERT_EQ((*outs)[0].size(), want->size()) << what;

    double worst = 0, loss = 0, norm = 0;
    for (size_t r = 0; r < want->size(); ++r) {
      auto sharding = ResultSharding(fn, static_cast<int>(r));
      ASSERT_TRUE(sharding.ok());
      std::vector<Literal> parts;
      for (int d = 0; d < n; ++d) {
        auto host = (*session)->ToHost((*outs)[d][r]);
        ASSERT_TRUE(host.ok()) << host.status().ToString();
        parts.push_back(std::move(*host));
      }
      Literal global = parts[0];
      if (sharding->has_value()) {
        auto assembled = shard::Assemble(parts, *mesh, **sharding, (*want)[r].type());
        ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
        global = std::move(*assembled);
      }
      ASSERT_EQ(global.type(), (*want)[r].type()) << what << ", result " << r;
      const double d = RelativeDiff(global, (*want)[r]);
      worst = std::max(worst, d);
      // Results: parameters', m', v' (3 per weight), then loss, tokens, gradient norm, lr.
      if (r == 3 * w) loss = d;
      if (r == 3 * w + 2) norm = d;
    }
    RecordProperty(what, std::to_string(worst));
    std::printf(
        "  %s on %d XLA devices: loss %.3g, gradient norm %.3g, largest over all %zu "
        "results (updated weights and moments) %.3g\n",
        what.c_str(), n, loss, norm, want->size(), worst);
    EXPECT_LE(loss, 1e-5) << what;
    EXPECT_LE(norm, 1e-4) << what;
    EXPECT_LE(worst, 1e-4) << what;
  }
}

}  // namespace
}  // namespace tlaloc::train
