// Prepared kernels (interp/prepared_ops.h): the hot ops of a decode step with their attributes
// read when the block is planned. Each case runs one op with them and without them
// (TLALOC_PREPARED_OPS=0) and requires the same bits, checks that the planner does prepare it,
// and counts the heap allocations a prepared call makes: none.
#include "interp/prepared_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "ops/reduction_test_util.h"
#include "testing/random_literal.h"
#include "tlaloc/cpu/kernels.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/serial_eval_context.h"

// Counts this binary's operator new calls while `g_counting` is set (the prepared call runs on
// the test's thread: its context runs ParallelFor inline). Allocates with malloc.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The other unaligned forms go through the same malloc and free, so that no block is released by
// a different allocator than made it (a sanitizer's own operator delete reports that; the
// standard library's temporary buffers use the nothrow form). Not inlined: gcc's
// -Wmismatched-new-delete would see the free() at each inlined call site.
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return ::operator new(size, tag);
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace tlaloc {
namespace {

using rdtest::DotAttrs;

// Sets TLALOC_PREPARED_OPS=0 for its lifetime.
class PreparedOff {
 public:
  PreparedOff() { setenv("TLALOC_PREPARED_OPS", "0", 1); }
  ~PreparedOff() { unsetenv("TLALOC_PREPARED_OPS"); }
};

struct OneOp {
  std::shared_ptr<Module> module = std::make_shared<Module>("t");
  const Operation* op = nullptr;
};

// @main(args) -> name(args) {attrs}.
std::unique_ptr<OneOp> Build(const std::string& name, const std::vector<Literal>& args,
                             AttrDict attrs, std::optional<std::vector<Type>> result = {}) {
  auto one = std::make_unique<OneOp>();
  std::vector<Type> arg_types;
  for (const Literal& a : args) arg_types.push_back(Type(a.type()));
  Function* fn = one->module->AddFunction("main", arg_types, {});
  OpBuilder b(&fn->entry(), one->module.get());
  std::vector<Value> outs = b.Create(name, fn->entry().arguments(), std::move(attrs), result);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return nullptr;
  fn->set_result_types({outs[0].type()});
  b.Create("func.return", outs);
  one->op = fn->entry().operations().front().get();
  return one;
}

Literal Run(const OneOp& one, std::vector<Literal> args) {
  auto exe = Executable::Prepare(one.module, "main");
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  auto out = (*exe)->Execute(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move((*out)[0]) : Literal();
}

Literal Random(const std::vector<int64_t>& dims, ElementType et, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::RandomNormalLiteral(dims, et, rng, 1.0f);
}

Literal Index(int32_t v) { return Literal::Scalar<int32_t>(v); }

// Copies of `args` whose storage the test does not keep (so the interpreter may reuse a dying
// operand's buffer, as it does in a program).
std::vector<Literal> Fresh(const std::vector<Literal>& args) {
  std::vector<Literal> out;
  for (const Literal& a : args) out.push_back(a.Clone());
  return out;
}

// Heap allocations of one `call` (after `setup`, which is not counted, and a first call that
// warms any buffer the kernel keeps).
int64_t CountAllocations(const std::function<void()>& setup, const std::function<Status()>& call) {
  setup();
  EXPECT_TRUE(call().ok());
  setup();
  g_allocations = 0;
  g_counting = true;
  const Status st = call();
  g_counting = false;
  EXPECT_TRUE(st.ok()) << st.ToString();
  return g_allocations.load();
}

// The op runs with and without its prepared kernel to the same bits, with its operands reused
// and not. Called directly, a prepared call allocates nothing (`kernel_allocates`: a product,
// whose matrix kernel keeps its own vector buffer; its call then allocates less than the CPU
// kernel's call, which reads the dimension numbers and works out the views each time).
void ExpectPrepared(const std::string& name, const std::vector<Literal>& args, AttrDict attrs,
                    std::optional<std::vector<Type>> result = {}, bool kernel_allocates = false) {
  auto one = Build(name, args, std::move(attrs), result);
  ASSERT_NE(one, nullptr);
  SCOPED_TRACE(name + " -> " + one->op->result(0).type().ToString());
  const interp::PreparedFn fn = interp::PrepareOp(*one->op);
  ASSERT_TRUE(fn) << name << " has no prepared kernel";
  Literal with = Run(*one, Fresh(args));
  Literal shared_with = Run(*one, args);  // the operands are still held here: no reuse
  Literal without, shared_without;
  {
    PreparedOff off;
    without = Run(*one, Fresh(args));
    shared_without = Run(*one, args);
  }
  ASSERT_TRUE(with.valid() && without.valid());
  EXPECT_TRUE(with.BitwiseEquals(without)) << with.ToString(16) << "\nvs\n" << without.ToString(16);
  EXPECT_TRUE(shared_with.BitwiseEquals(without));
  EXPECT_TRUE(shared_without.BitwiseEquals(without));
  const TensorType& out_type = one->op->result(0).type().tensor;
  const EvalFn& kernel = cpu::KernelFor(one->op->def());
  for (bool reuse : {false, true}) {
    // Operand 0 reused and not, as the interpreter may call it; one ParallelFor call, so the
    // allocation counts are not multiplied by chunks.
    SerialEvalContext ctx({.reuse_operand0 = reuse});
    std::vector<Literal> operands = Fresh(args);
    std::vector<Literal> results;
    // The result's buffer, as the interpreter allocates it before the call.
    auto setup = [&] { results = {Literal::Uninitialized(out_type)}; };
    auto call = [&](bool prepared) -> std::function<Status()> {
      if (prepared) return [&] { return fn(operands, results, ctx); };
      return [&] { return kernel(*one->op, operands, results, ctx); };
    };
    const int64_t prepared = CountAllocations(setup, call(true));
    EXPECT_TRUE(results[0].BitwiseEquals(without)) << "called directly, reuse " << reuse;
    if (kernel_allocates) {
      const int64_t unprepared = CountAllocations(setup, call(false));
      EXPECT_LT(prepared, unprepared) << "heap allocations of a prepared and an unprepared call";
    } else {
      EXPECT_EQ(prepared, 0) << "heap allocations in one prepared call (reuse " << reuse << ")";
    }
  }
}

AttrDict Ints(const std::string& name, std::vector<int64_t> v) {
  return {{name, Attribute::IntArray(std::move(v))}};
}

TEST(PreparedOps, Slice) {
  for (ElementType et : {ElementType::kF32, ElementType::kBF16}) {
    AttrDict attrs = Ints("start_indices", {1, 0, 2});
    attrs["limit_indices"] = Attribute::IntArray({3, 6, 8});
    attrs["strides"] = Attribute::IntArray({1, 2, 3});
    ExpectPrepared("stablehlo.slice", {Random({4, 6, 8}, et, 1)}, attrs);
    AttrDict row = Ints("start_indices", {2, 0});
    row["limit_indices"] = Attribute::IntArray({3, 40});
    row["strides"] = Attribute::IntArray({1, 1});
    ExpectPrepared("stablehlo.slice", {Random({5, 40}, et, 2)}, row);
  }
}

TEST(PreparedOps, Transpose) {
  ExpectPrepared("stablehlo.transpose", {Random({3, 5, 7}, ElementType::kF32, 3)},
                 Ints("permutation", {2, 0, 1}));
  // Rows of 32 or more take the tiled copy.
  ExpectPrepared("stablehlo.transpose", {Random({48, 64}, ElementType::kBF16, 4)},
                 Ints("permutation", {1, 0}));
  // [1, heads, 1, 128] -> [heads, 1, 1, 128]: merges into one contiguous row.
  ExpectPrepared("stablehlo.transpose", {Random({1, 4, 1, 128}, ElementType::kF32, 5)},
                 Ints("permutation", {1, 0, 2, 3}));
}

TEST(PreparedOps, BroadcastInDim) {
  auto bcast = [](const std::vector<int64_t>& to, ElementType et) {
    return std::vector<Type>{Type(TensorType(et, to))};
  };
  ExpectPrepared("stablehlo.broadcast_in_dim", {Random({5}, ElementType::kF32, 6)},
                 Ints("broadcast_dimensions", {1}), bcast({3, 5}, ElementType::kF32));
  ExpectPrepared("stablehlo.broadcast_in_dim", {Random({1, 4}, ElementType::kBF16, 7)},
                 Ints("broadcast_dimensions", {0, 2}), bcast({3, 2, 4}, ElementType::kBF16));
  ExpectPrepared("stablehlo.broadcast_in_dim", {Random({2, 3}, ElementType::kF32, 8)},
                 Ints("broadcast_dimensions", {0, 1}), bcast({2, 3}, ElementType::kF32));
}

TEST(PreparedOps, Concatenate) {
  AttrDict attrs{{"dimension", Attribute::Int(1, ElementType::kS64)}};
  ExpectPrepared("stablehlo.concatenate",
                 {Random({2, 3, 4}, ElementType::kF32, 9), Random({2, 5, 4}, ElementType::kF32, 10),
                  Random({2, 1, 4}, ElementType::kF32, 11)},
                 attrs);
}

TEST(PreparedOps, DynamicSlice) {
  // Starts past the end are clamped so the box stays inside; negative ones to 0.
  for (auto [r, c] : {std::pair{6, -2}, std::pair{1, 3}, std::pair{100, 100}})
    ExpectPrepared("stablehlo.dynamic_slice",
                   {Random({8, 16}, ElementType::kBF16, 12), Index(r), Index(c)},
                   Ints("slice_sizes", {4, 8}));
}

TEST(PreparedOps, DynamicUpdateSlice) {
  for (auto [r, c] : {std::pair{7, 3}, std::pair{0, 0}, std::pair{-5, 20}})
    ExpectPrepared("stablehlo.dynamic_update_slice",
                   {Random({8, 16}, ElementType::kF32, 13), Random({2, 4}, ElementType::kF32, 14),
                    Index(r), Index(c)},
                   {});
}

TEST(PreparedOps, ConstantAndIota) {
  ExpectPrepared("stablehlo.constant", {},
                 {{"value", Attribute::Elements(Random({3, 4}, ElementType::kBF16, 25))}});
  // Below the buffer cache's smallest cached block: dropping the placeholder result the shared
  // values replace is a free, not a cache entry.
  for (int64_t dim : {0, 1})
    ExpectPrepared("stablehlo.iota", {}, {{"iota_dimension", Attribute::Int(dim)}},
                   std::vector<Type>{Type(TensorType(ElementType::kS32, {3, 4096}))});
  ExpectPrepared("stablehlo.iota", {}, {{"iota_dimension", Attribute::Int(0)}},
                 std::vector<Type>{Type(TensorType(ElementType::kF32, {5}))});
}

TEST(PreparedOps, SharedIotaIsNotOverwrittenInPlace) {
  // iota + iota: the add could take a dying operand's buffer, but not the iota's shared one.
  auto module = std::make_shared<Module>("t");
  Function* fn = module->AddFunction("main", {}, {});
  OpBuilder b(&fn->entry(), module.get());
  const Type t(TensorType(ElementType::kS32, {8}));
  Value i = b.CreateOne("stablehlo.iota", {}, {{"iota_dimension", Attribute::Int(0)}},
                        std::vector<Type>{t});
  Value sum = b.CreateOne("stablehlo.add", {i, i});
  Value twice = b.CreateOne("stablehlo.add", {sum, i});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  fn->set_result_types({t});
  b.Create("func.return", {twice});
  auto exe = Executable::Prepare(module, "main");
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  for (int run = 0; run < 3; ++run) {
    auto out = (*exe)->Execute({});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(rdtest::Values<int32_t>((*out)[0]),
              (std::vector<int32_t>{0, 3, 6, 9, 12, 15, 18, 21}))
        << "run " << run;
  }
}

TEST(PreparedOps, DotGeneral) {
  // A decode step's projection: [1, K] x [N, K]^T (the weights read as a transposed matrix).
  for (ElementType out : {ElementType::kF32, ElementType::kBF16}) {
    ExpectPrepared(
        "stablehlo.dot_general",
        {Random({1, 64}, ElementType::kBF16, 15), Random({96, 64}, ElementType::kBF16, 16)},
        DotAttrs({}, {}, {1}, {1}), std::vector<Type>{Type(TensorType(out, {1, 96}))}, true);
    // Several rows, row-major weights [K, N].
    ExpectPrepared(
        "stablehlo.dot_general",
        {Random({5, 32}, ElementType::kF32, 17), Random({32, 24}, ElementType::kF32, 18)},
        DotAttrs({}, {}, {1}, {0}), std::vector<Type>{Type(TensorType(out, {5, 24}))}, true);
  }
  // Batched: attention's scores [heads, 1, D] x [heads, S, D].
  ExpectPrepared(
      "stablehlo.dot_general",
      {Random({4, 1, 16}, ElementType::kF32, 19), Random({4, 10, 16}, ElementType::kF32, 20)},
      DotAttrs({0}, {0}, {2}, {2}), {}, true);
  ExpectPrepared("stablehlo.dot",
                 {Random({3, 8}, ElementType::kF32, 21), Random({8, 6}, ElementType::kF32, 22)}, {},
                 {}, true);
}

TEST(PreparedOps, PackedDotIsLeftToTheCpuKernel) {
  // The batch dimension does not lead: the CPU kernel packs the lhs, so no prepared kernel.
  auto one =
      Build("stablehlo.dot_general",
            {Random({8, 2, 3}, ElementType::kF32, 23), Random({2, 8, 5}, ElementType::kF32, 24)},
            DotAttrs({1}, {0}, {0}, {1}));
  ASSERT_NE(one, nullptr);
  EXPECT_FALSE(interp::PrepareOp(*one->op));
  // Integer products are the reference's.
  auto ints = Build("stablehlo.dot_general",
                    {Literal::FromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}),
                     Literal::FromVector<int32_t>({3, 2}, {1, 2, 3, 4, 5, 6})},
                    DotAttrs({}, {}, {1}, {0}));
  ASSERT_NE(ints, nullptr);
  EXPECT_FALSE(interp::PrepareOp(*ints->op));
}

}  // namespace
}  // namespace tlaloc
