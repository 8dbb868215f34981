// GGUF Q4_0 / Q4_K / Q6_K matrices kept packed (nn/gguf_linear.h): the import's repacking
// (models/qwen3/gguf_import_packed.cc) followed by the program's StableHLO dequantisation gives
// llama.cpp's dequantised weights bit for bit (io::DequantizeGgml, written after ggml's
// dequantize_row_*), and the interpreter's fused kernel for the composite tlaloc.gguf_linear
// (interp/fusion_gguf.cc) returns its decomposition's bits on decode rows and prefill tiles.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "models/decoder/gguf_import_internal.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/nn/gguf_linear.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/support/half.h"

namespace tlaloc::models {
namespace {

using io::GgmlType;

// n rows of k weights as random GGUF blocks of `t`: random quants and sub-block scales, block
// scales d (and Q4_K's dmin) in a realistic range.
std::vector<std::byte> RandomBlocks(GgmlType t, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sd(0.0005f, 0.01f);
  const int64_t per = io::GgmlBlockElements(t), bytes = io::GgmlBlockBytes(t);
  std::vector<std::byte> out(static_cast<size_t>(n * k / per * bytes));
  for (auto& b : out) b = static_cast<std::byte>(byte(rng));
  auto put_half = [&](std::byte* p) {
    const uint16_t h = FloatToHalfBits(sd(rng));
    std::memcpy(p, &h, 2);
  };
  for (size_t at = 0; at < out.size(); at += bytes) {
    std::byte* b = out.data() + at;
    if (t == GgmlType::kQ4_0) put_half(b);
    if (t == GgmlType::kQ4_K) put_half(b), put_half(b + 2);
    if (t == GgmlType::kQ6_K) put_half(b + 208);
  }
  return out;
}

struct Packed {
  Literal q, scale;
};

Packed Repack(GgmlType t, std::span<const std::byte> blocks, int64_t n, int64_t k) {
  std::vector<std::byte> q, s;
  Status st = decoder::RepackGgml(t, blocks, q, s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  const auto [qt, stt] = nn::GgufPackedTypes(*decoder::PackedFormatOf(t), n, k);
  Packed p{Literal(qt), Literal(stt)};
  EXPECT_EQ(q.size(), static_cast<size_t>(p.q.byte_size()));
  EXPECT_EQ(s.size(), static_cast<size_t>(p.scale.byte_size()));
  std::memcpy(p.q.data(), q.data(), q.size());
  std::memcpy(p.scale.data(), s.data(), s.size());
  return p;
}

bool SameBits(const Literal& a, const Literal& b) {
  return a.type() == b.type() && a.num_elements() > 0 &&
         std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

const GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K};

TEST(GgufPacked, ProgramDequantisationIsLlamaCpps) {
  const int64_t n = 5, k = 512;
  uint32_t seed = 1;
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(io::GgmlTypeName(t));
    const auto blocks = RandomBlocks(t, n, k, seed++);
    const Packed p = Repack(t, blocks, n, k);
    Literal want(TensorType(ElementType::kF32, {n, k}));
    ASSERT_TRUE(io::DequantizeGgml(t, blocks, want.span<float>()).ok());
    Module module("t");
    FunctionBuilder fb(&module, "main", {Type(p.q.type()), Type(p.scale.type())});
    ASSERT_TRUE(fb.Return({nn::GgufDequantize(fb.arg(0), fb.arg(1))}).ok());
    auto got = Interpret(module, "main", {p.q, p.scale});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(SameBits((*got)[0], want));
  }
}

TEST(GgufPacked, EmbeddingRowsAreDequantisedAfterTheGather) {
  const int64_t n = 9, k = 256;
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(io::GgmlTypeName(t));
    const auto blocks = RandomBlocks(t, n, k, 40);
    const Packed p = Repack(t, blocks, n, k);
    Literal all(TensorType(ElementType::kF32, {n, k}));
    ASSERT_TRUE(io::DequantizeGgml(t, blocks, all.span<float>()).ok());
    const Literal ids = Literal::FromVector<int32_t>({1, 2}, {7, 2});
    Module module("t");
    FunctionBuilder fb(&module, "main", {Type(p.q.type()), Type(p.scale.type()), Type(ids.type())});
    ASSERT_TRUE(fb.Return({nn::Embedding(fb.arg(0), fb.arg(2), nullptr, "embed", fb.arg(1))}).ok());
    auto got = Interpret(module, "main", {p.q, p.scale, ids});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ((*got)[0].dims(), (std::vector<int64_t>{1, 2, k}));
    const float* g = (*got)[0].span<float>().data();
    EXPECT_EQ(std::memcmp(g, all.span<float>().data() + 7 * k, k * 4), 0);
    EXPECT_EQ(std::memcmp(g + k, all.span<float>().data() + 2 * k, k * 4), 0);
  }
}

TEST(GgufPacked, FusedKernelHasTheDecompositionsBits) {
  struct Case {
    std::vector<int64_t> x_dims;
    int64_t n;
  };
  // Decode rows (1 to 4), prefill tiles (BLAS blocks of 256 rows with 1,100 rows, and the
  // whole-matrix path with few rows), a rank-3 x.
  const std::vector<Case> cases = {{{1, 1024}, 96},  {{2, 256}, 33},  {{3, 512}, 17},
                                   {{4, 256}, 40},   {{13, 256}, 70}, {{9, 512}, 1100},
                                   {{2, 7, 256}, 64}};
  uint32_t seed = 100;
  for (GgmlType t : kTypes) {
    for (const Case& c : cases) {
      const int64_t k = c.x_dims.back();
      SCOPED_TRACE(::testing::Message() << io::GgmlTypeName(t) << " x [" << c.x_dims.front() << ".."
                                        << k << "], n " << c.n);
      const auto blocks = RandomBlocks(t, c.n, k, seed++);
      const Packed p = Repack(t, blocks, c.n, k);
      Literal x(TensorType(ElementType::kF32, c.x_dims));
      std::mt19937 rng(seed);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (auto& v : x.span<float>()) v = nd(rng);
      Module module("t");
      FunctionBuilder fb(&module, "main", {Type(x.type()), Type(p.q.type()), Type(p.scale.type())});
      ASSERT_TRUE(fb.Return({nn::Linear(fb.arg(0), fb.arg(1), nullptr, "", fb.arg(2))}).ok());
      auto run = [&](bool fuse, int64_t* ops) {
        InterpreterOptions options;
        options.fuse = fuse;
        ExecutionStats stats;
        auto out = Interpret(module, "main", {x, p.q, p.scale}, &stats, options);
        EXPECT_TRUE(out.ok()) << out.status().ToString();
        *ops = stats.ops_executed;
        return out.ok() ? (*out)[0] : Literal();
      };
      int64_t fused_ops = 0, plain_ops = 0;
      const Literal fused = run(true, &fused_ops);
      const Literal plain = run(false, &plain_ops);
      EXPECT_LT(fused_ops, plain_ops) << "the composite ran its decomposition, not the kernel";
      EXPECT_TRUE(SameBits(fused, plain));
    }
  }
}

}  // namespace
}  // namespace tlaloc::models
