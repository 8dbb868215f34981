// The interpreter's result buffers: ops whose OpDef says they write every element
// (OpTraits::writes_all_results) get uninitialised storage, possibly a reused block holding
// old bytes; the others still get zeros. Ops with the trait are run on such dirty blocks and
// must still give exactly the specified result.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "ops/reduction_test_util.h"
#include "tlaloc/support/buffer_cache.h"

namespace tlaloc {
namespace {

using rdtest::DotAttrs;
using rdtest::RunOp;

// 256 KiB: large enough for the buffer cache to keep.
const TensorType kBig(ElementType::kF32, {256, 256});

bool CacheOn() { return BufferCache::Global().capacity_bytes() > 0; }

// Leaves a freed block of `type`'s size full of 0xFF bytes (a NaN pattern) in the buffer
// cache, so that the next allocation of that size receives it; returns its address.
const std::byte* LeaveDirtyBlock(const TensorType& type) {
  Literal l = Literal::Uninitialized(type);
  std::memset(l.data(), 0xFF, static_cast<size_t>(l.byte_size()));
  return l.data();
}

// @main(%a: T, %b: T) -> `name`(%a, %b) ; the op is the first of the entry block.
struct OneOp {
  Module module{"t"};
  const Operation* op = nullptr;
};
std::unique_ptr<OneOp> BuildOp(const std::string& name, const std::vector<Type>& args,
                               AttrDict attrs = {}, std::optional<std::vector<Type>> result = {}) {
  auto m = std::make_unique<OneOp>();
  Function* fn = m->module.AddFunction("main", args, {});
  OpBuilder b(&fn->entry(), &m->module);
  std::vector<Value> outs = b.Create(name, fn->entry().arguments(), std::move(attrs), result);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  m->op = fn->entry().operations().front().get();
  return m;
}

bool AllZero(const Literal& l) {
  for (int64_t i = 0; i < l.byte_size(); ++i)
    if (l.data()[i] != std::byte{0}) return false;
  return true;
}

TEST(ResultBuffers, TraitIsSetOnOpsThatWriteEveryElementOnly) {
  const OpRegistry& r = OpRegistry::Global();
  for (const char* name :
       {"stablehlo.add", "stablehlo.exponential", "stablehlo.convert", "stablehlo.select",
        "stablehlo.compare", "stablehlo.broadcast_in_dim", "stablehlo.transpose",
        "stablehlo.reshape", "stablehlo.concatenate", "stablehlo.pad", "stablehlo.iota",
        "stablehlo.dot_general", "stablehlo.reduce", "stablehlo.gather", "stablehlo.scatter",
        "stablehlo.dynamic_update_slice", "stablehlo.slice", "stablehlo.constant"}) {
    const OpDef* d = r.Find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_TRUE(d->traits.writes_all_results) << name;
  }
  // A custom_call handler may write any part of its results; the token of after_all is never
  // written.
  for (const char* name : {"stablehlo.custom_call", "stablehlo.after_all"}) {
    const OpDef* d = r.Find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_FALSE(d->traits.writes_all_results) << name;
  }
}

TEST(ResultBuffers, OpWithTheTraitGetsUninitialisedStorage) {
  if (!CacheOn())
    GTEST_SKIP() << "the buffer cache is off (AddressSanitizer or TLALOC_BUFFER_CACHE_MB=0), so "
                    "no dirty block can be handed out";
  auto add = BuildOp("stablehlo.add", {Type(kBig), Type(kBig)});
  const std::byte* dirty = LeaveDirtyBlock(kBig);
  std::vector<Literal> results = AllocateResults(*add->op);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].type(), kBig);
  EXPECT_EQ(results[0].data(), dirty) << "the freed block of the same size was not reused";
  // Not zero-filled: the old bytes are still there.
  EXPECT_EQ(results[0].data()[0], std::byte{0xFF});
  EXPECT_EQ(results[0].data()[results[0].byte_size() - 1], std::byte{0xFF});
}

TEST(ResultBuffers, OpWithoutTheTraitGetsZeros) {
  AttrDict attrs{{"call_target_name", Attribute::String("anything")}};
  auto call = BuildOp("stablehlo.custom_call", {Type(kBig)}, attrs, std::vector<Type>{kBig});
  const std::byte* dirty = LeaveDirtyBlock(kBig);
  std::vector<Literal> results = AllocateResults(*call->op);
  ASSERT_EQ(results.size(), 1u);
  if (CacheOn()) {
    EXPECT_EQ(results[0].data(), dirty);
  }
  EXPECT_TRUE(AllZero(results[0]));
}

TEST(ResultBuffers, CustomCallThatWritesNothingReturnsZeros) {
  Literal x(kBig);
  InterpreterOptions options;
  options.custom_calls["noop"] = [](std::span<const Literal>, std::vector<Literal>&) {
    return OkStatus();
  };
  LeaveDirtyBlock(kBig);
  auto out = RunOp("stablehlo.custom_call", {x}, {{"call_target_name", Attribute::String("noop")}},
                   std::vector<Type>{kBig}, {}, options);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(AllZero((*out)[0]));
}

TEST(ResultBuffers, PadOnADirtyBlockWritesPaddingEverywhere) {
  // [254, 254] padded by one on each side, interior 0: the border must be the padding value.
  std::vector<float> in(254 * 254);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 97);
  Literal operand = Literal::FromVector<float>({254, 254}, in);
  Literal value = Literal::Scalar<float>(-3.0f);
  AttrDict attrs{{"edge_padding_low", Attribute::IntArray({1, 1})},
                 {"edge_padding_high", Attribute::IntArray({1, 1})},
                 {"interior_padding", Attribute::IntArray({0, 0})}};
  LeaveDirtyBlock(kBig);
  auto out = RunOp("stablehlo.pad", {operand, value}, attrs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto got = (*out)[0].span<float>();
  ASSERT_EQ(got.size(), 256u * 256u);
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t c = 0; c < 256; ++c) {
      bool border = r == 0 || c == 0 || r == 255 || c == 255;
      float want = border ? -3.0f : in[(r - 1) * 254 + (c - 1)];
      ASSERT_EQ(got[r * 256 + c], want) << "at [" << r << ", " << c << "]";
    }
}

TEST(ResultBuffers, ScatterOnADirtyBlockKeepsTheUntouchedInput) {
  std::vector<float> in(256 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 89);
  Literal input = Literal::FromVector<float>({256, 256}, in);  // held here: not reused
  Literal idx = Literal::FromVector<int64_t>({2, 1}, {3, 100});
  std::vector<float> upd(2 * 256, 7.0f);
  Literal updates = Literal::FromVector<float>({2, 256}, upd);
  AttrDict attrs{{"scatter_dimension_numbers",
                  Attribute::Struct("stablehlo.scatter",
                                    {{"update_window_dims", Attribute::IntArray({1})},
                                     {"inserted_window_dims", Attribute::IntArray({0})},
                                     {"scatter_dims_to_operand_dims", Attribute::IntArray({0})},
                                     {"index_vector_dim", Attribute::Int(1)}})}};
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(rdtest::MakeRegion(
      {rdtest::Scalar(ElementType::kF32), rdtest::Scalar(ElementType::kF32)},
      [](OpBuilder&, const std::vector<Value>& a) { return std::vector<Value>{a[1]}; }));
  LeaveDirtyBlock(kBig);
  auto out =
      RunOp("stablehlo.scatter", {input, idx, updates}, attrs, std::nullopt, std::move(regions));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto got = (*out)[0].span<float>();
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t c = 0; c < 256; ++c) {
      float want = (r == 3 || r == 100) ? 7.0f : in[r * 256 + c];
      ASSERT_EQ(got[r * 256 + c], want) << "at [" << r << ", " << c << "]";
    }
}

TEST(ResultBuffers, DotWithAnEmptyContractionOnADirtyBlockIsZero) {
  // k = 0: every element of the product is an empty sum.
  Literal lhs(TensorType(ElementType::kF32, {256, 0}));
  Literal rhs(TensorType(ElementType::kF32, {0, 256}));
  LeaveDirtyBlock(kBig);
  auto out = RunOp("stablehlo.dot_general", {lhs, rhs}, DotAttrs({}, {}, {1}, {0}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].type(), kBig);
  EXPECT_TRUE(AllZero((*out)[0]));
}

TEST(ResultBuffers, ReduceOverAnEmptyDimensionOnADirtyBlockIsTheInit) {
  Literal x(TensorType(ElementType::kF32, {256, 256, 0}));
  Literal init = Literal::Scalar<float>(2.5f);
  LeaveDirtyBlock(kBig);
  auto out = RunOp("stablehlo.reduce", {x, init}, {{"dimensions", Attribute::IntArray({2})}},
                   std::nullopt, [] {
                     std::vector<std::unique_ptr<Region>> v;
                     v.push_back(rdtest::BinaryRegion("stablehlo.add", ElementType::kF32));
                     return v;
                   }());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (float v : (*out)[0].span<float>()) ASSERT_EQ(v, 2.5f);
}

TEST(ResultBuffers, DynamicUpdateSliceOnADirtyBlockCopiesTheOperand) {
  std::vector<float> in(256 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 83);
  Literal operand = Literal::FromVector<float>({256, 256}, in);  // held here: not reused
  Literal update = Literal::FromVector<float>({1, 4}, {-1, -2, -3, -4});
  Literal r0 = Literal::Scalar<int32_t>(5), c0 = Literal::Scalar<int32_t>(10);
  LeaveDirtyBlock(kBig);
  auto out = RunOp("stablehlo.dynamic_update_slice", {operand, update, r0, c0}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto got = (*out)[0].span<float>();
  for (int64_t i = 0; i < 256 * 256; ++i) {
    bool updated = i / 256 == 5 && i % 256 >= 10 && i % 256 < 14;
    float want = updated ? -1.0f - static_cast<float>(i % 256 - 10) : in[i];
    ASSERT_EQ(got[i], want) << "at " << i;
  }
  EXPECT_EQ(operand.span<float>()[5 * 256 + 10], in[5 * 256 + 10]) << "the operand was changed";
}

TEST(ResultBuffers, UninitializedKeepsTheAlignmentPaddingZero) {
  // 65535 floats end 4 bytes short of a 64-byte boundary: those 4 bytes are zero (vector loops
  // may read them) even in a reused dirty block.
  const TensorType t(ElementType::kF32, {65535});
  LeaveDirtyBlock(t);
  Literal l = Literal::Uninitialized(t);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(l.data()) % 64, 0u);
  for (int64_t i = l.byte_size(); i < l.byte_size() + 4; ++i)
    EXPECT_EQ(l.data()[i], std::byte{0}) << i;
}

TEST(ResultBuffers, OpsThatReplaceTheirResultsGetPlaceholders) {
  const OpRegistry& r = OpRegistry::Global();
  for (const char* name :
       {"stablehlo.constant", "func.call", "stablehlo.reshape", "stablehlo.while", "stablehlo.if",
        "stablehlo.case", "stablehlo.optimization_barrier", "sdy.sharding_constraint",
        "stablehlo.partition_id", "stablehlo.replica_id"}) {
    const OpDef* d = r.Find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_TRUE(d->traits.replaces_results) << name;
    EXPECT_TRUE(d->traits.writes_all_results) << name << ": replacing implies writing all";
  }
  // These fill (part of) a buffer they are given.
  for (const char* name : {"stablehlo.add", "stablehlo.dynamic_update_slice", "stablehlo.scatter",
                           "stablehlo.custom_call", "stablehlo.rng_bit_generator"}) {
    const OpDef* d = r.Find(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_FALSE(d->traits.replaces_results) << name;
  }
  auto reshape = BuildOp("stablehlo.reshape", {Type(kBig)}, {},
                         std::vector<Type>{Type(TensorType(ElementType::kF32, {65536}))});
  std::vector<Literal> results = AllocateResults(*reshape->op);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].valid()) << "a placeholder has no storage";
  EXPECT_EQ(results[0].type(), TensorType(ElementType::kF32, {65536}));
}

// A dying operand is placed in the result's slot before the eval (OpTraits::in_place); one the
// caller still holds never is, and keeps its values.
TEST(ResultBuffers, OnlyADyingOperandIsUpdatedInPlace) {
  std::vector<float> in(256 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 71);
  Literal held = Literal::FromVector<float>({256, 256}, in);
  auto out = RunOp("stablehlo.negate", {held}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE((*out)[0].data(), held.data());
  EXPECT_EQ(held.span<float>()[5], 5.0f);
  EXPECT_EQ((*out)[0].span<float>()[5], -5.0f);

  Module m("t");
  Function* fn = m.AddFunction("main", {Type(kBig)}, {Type(kBig)});
  OpBuilder b(&fn->entry(), &m);
  Value n = b.CreateOne("stablehlo.negate", {fn->entry().argument(0)});
  b.Create("func.return", {b.CreateOne("stablehlo.abs", {n})});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<Literal> args;
  args.push_back(Literal::FromVector<float>({256, 256}, in));  // unique storage: donated
  const std::byte* donated = args[0].data();
  ExecutionStats stats;
  auto r = Interpret(m, "main", std::move(args), &stats);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].data(), donated);
  EXPECT_EQ((*r)[0].span<float>()[70], 70.0f);
  EXPECT_EQ(stats.peak_live_bytes, kBig.byte_size()) << "no second buffer was allocated";
}

TEST(ResultBuffers, AnEmptyLiteralFromAnEmptyVector) {
  // An empty vector's data() may be null; FromVector must not pass it to memcpy (UBSan checks
  // this in the sanitizer build).
  Literal l = Literal::FromVector<float>({0, 4}, std::vector<float>{});
  EXPECT_EQ(l.num_elements(), 0);
  EXPECT_TRUE(l.valid());
}

}  // namespace
}  // namespace tlaloc
