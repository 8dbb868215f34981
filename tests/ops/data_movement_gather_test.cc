// Tests of gather and scatter. Besides hand-checked cases, the ops are compared with naive
// element-by-element implementations of the StableHLO specification's formulas written here.
#include <cmath>
#include <limits>

#include "ops/data_movement_test_util.h"

namespace tlaloc::dmtest {
namespace {

using Dims = std::vector<int64_t>;

bool In(const Dims& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

Dims Unravel(int64_t i, const Dims& dims) {
  Dims idx(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
  return idx;
}
int64_t Ravel(const Dims& idx, const Dims& dims) {
  int64_t i = 0;
  for (size_t d = 0; d < dims.size(); ++d) i = i * dims[d] + idx[d];
  return i;
}

struct GatherSpec {
  Dims offset_dims, collapsed, operand_batching, indices_batching, start_index_map;
  int64_t ivd = 0;
  Dims slice_sizes;
};

AttrDict GatherAttrs(const GatherSpec& g) {
  AttrDict f{{"offset_dims", Attribute::IntArray(g.offset_dims)},
             {"collapsed_slice_dims", Attribute::IntArray(g.collapsed)},
             {"start_index_map", Attribute::IntArray(g.start_index_map)},
             {"index_vector_dim", Attribute::Int(g.ivd)}};
  if (!g.operand_batching.empty()) {
    f["operand_batching_dims"] = Attribute::IntArray(g.operand_batching);
    f["start_indices_batching_dims"] = Attribute::IntArray(g.indices_batching);
  }
  return {{"dimension_numbers", Attribute::Struct("stablehlo.gather", f)},
          {"slice_sizes", Attribute::IntArray(g.slice_sizes)},
          {"indices_are_sorted", Attribute::Bool(false)}};
}

// The specification's gather, one result element at a time.
float NaiveGatherAt(const Literal& operand, const Literal& indices, const GatherSpec& g,
                    const Dims& result_dims, const Dims& ri) {
  Dims batch_dims;
  for (int64_t d = 0; d < static_cast<int64_t>(result_dims.size()); ++d)
    if (!In(g.offset_dims, d)) batch_dims.push_back(d);
  Dims batch_index;
  for (int64_t d : batch_dims) batch_index.push_back(ri[d]);
  const Dims& od = operand.dims();
  const Dims& id = indices.dims();
  Dims start_index;
  int64_t k_count = g.ivd < static_cast<int64_t>(id.size()) ? id[g.ivd] : 1;
  for (int64_t k = 0; k < k_count; ++k) {
    Dims ii = batch_index;
    if (g.ivd < static_cast<int64_t>(id.size())) ii.insert(ii.begin() + g.ivd, k);
    start_index.push_back(indices.GetAsInt64(Ravel(ii, id)));
  }
  Dims operand_index(od.size(), 0);
  for (size_t k = 0; k < g.start_index_map.size(); ++k) {
    int64_t d = g.start_index_map[k];
    operand_index[d] += std::clamp<int64_t>(start_index[k], 0, od[d] - g.slice_sizes[d]);
  }
  for (size_t i = 0; i < g.operand_batching.size(); ++i) {
    int64_t ds = g.indices_batching[i];
    operand_index[g.operand_batching[i]] += batch_index[ds - (ds < g.ivd ? 0 : 1)];
  }
  int64_t k = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(od.size()); ++d) {
    if (In(g.collapsed, d) || In(g.operand_batching, d)) continue;
    operand_index[d] += ri[g.offset_dims[k++]];
  }
  return operand.span<float>()[Ravel(operand_index, od)];
}

Literal Floats(Dims dims) {
  Literal l(T(ElementType::kF32, dims));
  auto s = l.span<float>();
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return l;
}

void ExpectGatherMatchesSpec(const Literal& operand, const Literal& indices, const GatherSpec& g) {
  auto out = RunOp("stablehlo.gather", {operand, indices}, GatherAttrs(g));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Literal& r = (*out)[0];
  for (int64_t i = 0; i < r.num_elements(); ++i)
    ASSERT_EQ(r.span<float>()[i],
              NaiveGatherAt(operand, indices, g, r.dims(), Unravel(i, r.dims())))
        << "result element " << i;
}

TEST(Gather, EmbeddingLookupRows) {
  Literal table = Floats({5, 3});
  Literal ids = Literal::FromVector<int32_t>({4, 1}, {3, 0, 4, 4});
  GatherSpec g{{1}, {0}, {}, {}, {0}, 1, {1, 3}};
  auto out = RunOp("stablehlo.gather", {table, ids}, GatherAttrs(g));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].dims(), (Dims{4, 3}));
  std::vector<int> rows = {3, 0, 4, 4};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ((*out)[0].span<float>()[i * 3 + j], table.span<float>()[rows[i] * 3 + j]);
}

TEST(Gather, ClampsStartsAndMatchesSpecOnVariedLayouts) {
  Literal operand = Floats({4, 5, 6});
  // Offset dims not trailing, index vector in the middle, out-of-range and negative starts.
  Literal idx = Literal::FromVector<int64_t>({3, 2, 2}, {0, 1, 9, -4, 2, 2, 3, 0, -1, 7, 1, 3});
  ExpectGatherMatchesSpec(operand, idx, {{0, 3}, {1}, {}, {}, {0, 1}, 1, {2, 1, 3}});
  ExpectGatherMatchesSpec(operand, idx, {{1, 2, 4}, {}, {}, {}, {2, 1}, 1, {3, 2, 4}});
  // Scalar indices (index_vector_dim == rank).
  Literal scalars = Literal::FromVector<uint8_t>({2, 3}, {0, 1, 2, 3, 200, 5});
  ExpectGatherMatchesSpec(operand, scalars, {{2, 3}, {2}, {}, {}, {2}, 2, {4, 5, 1}});
}

TEST(Gather, BatchingDimensions) {
  Literal operand = Floats({2, 5, 3});
  Literal idx = Literal::FromVector<int32_t>({2, 4}, {0, 4, 2, 2, 1, 1, 3, 0});
  GatherSpec g{{2}, {1}, {0}, {0}, {1}, 2, {1, 1, 3}};
  auto out = RunOp("stablehlo.gather", {operand, idx}, GatherAttrs(g));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].dims(), (Dims{2, 4, 3}));
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ((*out)[0].span<float>()[(b * 4 + i) * 3 + j],
                  operand.span<float>()[(b * 5 + idx.span<int32_t>()[b * 4 + i]) * 3 + j]);
  ExpectGatherMatchesSpec(operand, idx, g);
}

TEST(Gather, ShapeErrorsNameTheProblem) {
  Literal operand = Floats({5, 3});
  Literal ids = Literal::FromVector<int32_t>({4, 1}, {0, 0, 0, 0});
  GatherSpec g{{1}, {0}, {}, {}, {0}, 1, {2, 3}};  // collapsed dim with slice size 2
  auto out = RunOp("stablehlo.gather", {operand, ids}, GatherAttrs(g));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("slice size"), std::string::npos) << out.status().message();
  GatherSpec g2{{1}, {0}, {}, {}, {0, 1}, 1, {1, 3}};  // index vectors of 1, map of 2
  auto out2 = RunOp("stablehlo.gather", {operand, ids}, GatherAttrs(g2));
  ASSERT_FALSE(out2.ok());
  EXPECT_NE(out2.status().message().find("start_index_map"), std::string::npos);
}

// ---- scatter -----------------------------------------------------------------------------------

struct ScatterSpec {
  Dims update_window_dims, inserted, input_batching, indices_batching, to_operand;
  int64_t ivd = 0;
};

AttrDict ScatterAttrs(const ScatterSpec& s) {
  AttrDict f{{"update_window_dims", Attribute::IntArray(s.update_window_dims)},
             {"inserted_window_dims", Attribute::IntArray(s.inserted)},
             {"scatter_dims_to_operand_dims", Attribute::IntArray(s.to_operand)},
             {"index_vector_dim", Attribute::Int(s.ivd)}};
  if (!s.input_batching.empty()) {
    f["input_batching_dims"] = Attribute::IntArray(s.input_batching);
    f["scatter_indices_batching_dims"] = Attribute::IntArray(s.indices_batching);
  }
  return {{"scatter_dimension_numbers", Attribute::Struct("stablehlo.scatter", f)}};
}

// An update computation over n operands: `op` applied to (current, update), or the update
// itself when op is empty.
std::unique_ptr<Region> MakeRegion(const std::vector<ElementType>& ets, const std::string& op,
                                   bool swap = false) {
  auto region = std::make_unique<Region>();
  Block& b = region->AddBlock();
  for (int k = 0; k < 2; ++k)
    for (ElementType et : ets) b.AddArgument(Type(T(et, {})));
  OpBuilder rb(&b);
  const size_t n = ets.size();
  std::vector<Value> outs;
  for (size_t i = 0; i < n; ++i) {
    Value cur = b.argument(static_cast<int>(i)), upd = b.argument(static_cast<int>(n + i));
    if (swap) std::swap(cur, upd);
    outs.push_back(op.empty() ? upd : rb.CreateOne(op, {cur, upd}));
  }
  rb.Create("stablehlo.return", outs);
  EXPECT_TRUE(rb.ok()) << rb.status().ToString();
  return region;
}

bool HasOp(const char* name) { return OpRegistry::Global().Find(name) != nullptr; }

// The specification's scatter (with XLA's rule of skipping windows that do not fit), element by
// element, for one f32 operand and a combining function.
template <typename F>
Literal NaiveScatter(const Literal& input, const Literal& indices, const Literal& updates,
                     const ScatterSpec& s, F combine) {
  Literal out = input.Clone();
  const Dims& od = input.dims();
  const Dims& ud = updates.dims();
  const Dims& id = indices.dims();
  Dims scatter_dims;
  for (int64_t d = 0; d < static_cast<int64_t>(ud.size()); ++d)
    if (!In(s.update_window_dims, d)) scatter_dims.push_back(d);
  // Window extent in each operand dim.
  Dims extent(od.size(), 1);
  for (int64_t d = 0, k = 0; d < static_cast<int64_t>(od.size()); ++d)
    if (!In(s.inserted, d) && !In(s.input_batching, d)) extent[d] = ud[s.update_window_dims[k++]];
  for (int64_t u = 0; u < updates.num_elements(); ++u) {
    Dims ui = Unravel(u, ud);
    Dims usi;
    for (int64_t d : scatter_dims) usi.push_back(ui[d]);
    Dims start(od.size(), 0);
    int64_t k_count = s.ivd < static_cast<int64_t>(id.size()) ? id[s.ivd] : 1;
    for (int64_t k = 0; k < k_count; ++k) {
      Dims ii = usi;
      if (s.ivd < static_cast<int64_t>(id.size())) ii.insert(ii.begin() + s.ivd, k);
      start[s.to_operand[k]] += indices.GetAsInt64(Ravel(ii, id));
    }
    for (size_t i = 0; i < s.input_batching.size(); ++i) {
      int64_t ds = s.indices_batching[i];
      start[s.input_batching[i]] += usi[ds - (ds < s.ivd ? 0 : 1)];
    }
    bool fits = true;
    for (size_t d = 0; d < od.size(); ++d)
      fits = fits && start[d] >= 0 && start[d] + extent[d] <= od[d];
    if (!fits) continue;
    Dims ri = start;
    for (int64_t d = 0, k = 0; d < static_cast<int64_t>(od.size()); ++d)
      if (!In(s.inserted, d) && !In(s.input_batching, d)) ri[d] += ui[s.update_window_dims[k++]];
    float& dst = out.span<float>()[Ravel(ri, od)];
    dst = combine(dst, updates.span<float>()[u]);
  }
  return out;
}

TEST(Scatter, ReplaceRowsWithUpdateRegion) {
  Literal input = Floats({4, 3});
  Literal idx = Literal::FromVector<int64_t>({2, 1}, {2, 0});
  Literal upd = Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  ScatterSpec s{{1}, {0}, {}, {}, {0}, 1};
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(MakeRegion({ElementType::kF32}, ""));
  auto out = RunOp("stablehlo.scatter", {input, idx, upd}, ScatterAttrs(s), {}, std::move(regions));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Literal want = input.Clone();
  for (int j = 0; j < 3; ++j) {
    want.span<float>()[2 * 3 + j] = upd.span<float>()[j];
    want.span<float>()[0 * 3 + j] = upd.span<float>()[3 + j];
  }
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(want));
}

TEST(Scatter, SkipsWindowsThatDoNotFit) {
  Literal input = Floats({5, 4});
  // Window of 2 rows: start 4 does not fit in 5 rows, -1 is negative; 3 fits.
  Literal idx = Literal::FromVector<int32_t>({3}, {4, -1, 3});
  Literal upd = Literal::FromVector<float>({3, 2, 4}, std::vector<float>(24, 9.0f));
  ScatterSpec s{{1, 2}, {}, {}, {}, {0}, 1};
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(MakeRegion({ElementType::kF32}, ""));
  auto out = RunOp("stablehlo.scatter", {input, idx, upd}, ScatterAttrs(s), {}, std::move(regions));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Literal want = NaiveScatter(input, idx, upd, s, [](float, float u) { return u; });
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(want));
  for (int j = 0; j < 12; ++j) EXPECT_EQ((*out)[0].span<float>()[j], input.span<float>()[j]);
  for (int j = 12; j < 20; ++j) EXPECT_EQ((*out)[0].span<float>()[j], 9.0f);
}

TEST(Scatter, AddAccumulatesDuplicatesAndMatchesSpec) {
  Literal input = Floats({3, 4, 5});
  Literal idx = Literal::FromVector<int32_t>({2, 3, 2}, {0, 1, 2, 3, 0, 1, 1, 0, 2, 3, 9, 9});
  Literal upd = Floats({2, 3, 4});
  ScatterSpec s{{2}, {0, 1}, {}, {}, {0, 1}, 2};
  for (bool swap : {false, true}) {
    std::vector<std::unique_ptr<Region>> regions;
    regions.push_back(MakeRegion({ElementType::kF32}, "stablehlo.add", swap));
    auto out =
        RunOp("stablehlo.scatter", {input, idx, upd}, ScatterAttrs(s), {}, std::move(regions));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    Literal want = NaiveScatter(input, idx, upd, s, [](float a, float b) { return a + b; });
    EXPECT_EQ(Values<float>((*out)[0]), Values<float>(want));
  }
}

TEST(Scatter, GeneralRegionRunsPerElement) {
  // subtract is not recognised as a fast combiner, so this runs the region itself; the order of
  // arguments matters (current - update).
  Literal input = Floats({6});
  Literal idx = Literal::FromVector<int64_t>({3, 1}, {1, 4, 1});
  Literal upd = Literal::FromVector<float>({3}, {0.5f, 2.0f, 10.0f});
  ScatterSpec s{{}, {0}, {}, {}, {0}, 1};
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(MakeRegion({ElementType::kF32}, "stablehlo.subtract"));
  auto out = RunOp("stablehlo.scatter", {input, idx, upd}, ScatterAttrs(s), {}, std::move(regions));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Literal want = NaiveScatter(input, idx, upd, s, [](float a, float b) { return a - b; });
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(want));
}

TEST(Scatter, FastCombinersAcrossTypesAndEdgeValues) {
  struct Case {
    const char* op;
    ElementType et;
  };
  for (Case c :
       {Case{"stablehlo.add", ElementType::kS8}, Case{"stablehlo.multiply", ElementType::kU16},
        Case{"stablehlo.maximum", ElementType::kF32}, Case{"stablehlo.minimum", ElementType::kBF16},
        Case{"stablehlo.add", ElementType::kPred}, Case{"stablehlo.or", ElementType::kU32},
        Case{"stablehlo.and", ElementType::kS64}, Case{"stablehlo.add", ElementType::kF16}}) {
    ASSERT_TRUE(HasOp(c.op)) << c.op << " is not registered";
    std::vector<double> in_vals, up_vals;
    if (IsFloat(c.et)) {
      in_vals = {1.5, std::nan(""), -0.0, 3.0};
      up_vals = {2.25, 1.0, 0.0, std::nan("")};
    } else if (c.et == ElementType::kPred) {
      in_vals = {0, 1, 0, 1};
      up_vals = {0, 0, 1, 1};
    } else {
      in_vals = {127, 300, 5, 6};
      up_vals = {100, 250, 3, 12};
    }
    Literal input = Literal::FromDoubles(c.et, {4}, in_vals);
    Literal upd = Literal::FromDoubles(c.et, {4}, up_vals);
    Literal idx = Literal::FromVector<int32_t>({4, 1}, {0, 1, 2, 3});
    ScatterSpec s{{}, {0}, {}, {}, {0}, 1};
    std::vector<std::unique_ptr<Region>> fast, slow;
    fast.push_back(MakeRegion({c.et}, c.op));
    auto got = RunOp("stablehlo.scatter", {input, idx, upd}, ScatterAttrs(s), {}, std::move(fast));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    // The same op applied elementwise by its own definition is the reference.
    auto want = RunOp(c.op, {input, upd}, {});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    EXPECT_TRUE((*got)[0].BitwiseEquals((*want)[0]))
        << c.op << " " << MlirName(c.et) << ": " << (*got)[0].ToString() << " vs "
        << (*want)[0].ToString();
  }
}

TEST(Scatter, VariadicReplaceAndBatchingDims) {
  Literal a = Floats({2, 3, 4});
  Literal bi(T(ElementType::kS32, {2, 3, 4}));
  Literal idx = Literal::FromVector<int32_t>({2, 2}, {2, 0, 1, 1});
  Literal ua = Floats({2, 2, 4});
  Literal ub(T(ElementType::kS32, {2, 2, 4}));
  for (int i = 0; i < 16; ++i) ub.span<int32_t>()[i] = 100 + i;
  // Operand dim 0 is batched with index dim 0; dim 1 is scattered into; dim 2 is the window.
  ScatterSpec s{{2}, {1}, {0}, {0}, {1}, 2};
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(MakeRegion({ElementType::kF32, ElementType::kS32}, ""));
  auto out =
      RunOp("stablehlo.scatter", {a, bi, idx, ua, ub}, ScatterAttrs(s), {}, std::move(regions));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  Literal want = NaiveScatter(a, idx, ua, s, [](float, float u) { return u; });
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(want));
  // Row (batch 1, index 1) of the second result got ub[1, 1, :].
  for (int j = 0; j < 4; ++j) EXPECT_EQ((*out)[1].span<int32_t>()[(1 * 3 + 1) * 4 + j], 112 + j);
  EXPECT_EQ((*out)[1].span<int32_t>()[(0 * 3 + 1) * 4], 0);
}

TEST(Scatter, RejectsMismatchedUpdates) {
  Literal input = Floats({4, 3});
  Literal idx = Literal::FromVector<int64_t>({2, 1}, {2, 0});
  Literal upd = Floats({3, 3});  // 3 updates for 2 indices
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(MakeRegion({ElementType::kF32}, ""));
  auto out = RunOp("stablehlo.scatter", {input, idx, upd}, ScatterAttrs({{1}, {0}, {}, {}, {0}, 1}),
                   {}, std::move(regions));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("batch shape"), std::string::npos)
      << out.status().message();
}

}  // namespace
}  // namespace tlaloc::dmtest
