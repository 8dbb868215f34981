// kernelize over a paged KV cache, without jax: the decoder's Attention layer reads the pools
// through tlaloc.paged_dot composites (nn/paged_attention.h), so its traced range reads the pools
// and the block table; a kernel mapped to Attention still takes the dense operands, the pages
// gathered (the ops of paged_dot's decomposition that read only the pool and the table), which
// kernelize places before the call (kernels/kernelize.cc, kGatheringComposites).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kernels/kernel_repo_fixture.h"
#include "models/qwen3_reference.h"
#include "tlaloc/kernels/kernelize.h"
#include "tlaloc/models/family.h"
#include "tlaloc/nn/paged_attention.h"

namespace tlaloc::kernels {
namespace {

namespace fs = std::filesystem;

// A universal Attention kernel returning zeros: what kernelize passes it is what is checked.
constexpr char kMetadata[] = R"({
  "name": "zero-attention",
  "id": "tlaloc-tests/zero-attention",
  "version": 1,
  "license": "Apache-2.0",
  "backend": {"type": "universal"},
  "module": "attention.mlir",
  "layers": {
    "Attention": {"operands": ["q", "k", "v", "mask"], "results": ["out"],
                  "attributes": ["scale"], "function": "attention"}
  }
})";
constexpr char kModule[] = R"(
func.func @attention(%q: {{q}}, %k: {{k}}, %v: {{v}}, %mask: {{mask}}) -> {{out}} {
  %zero = stablehlo.constant dense<0.0> : tensor<{{out.dtype}}>
  %out = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<{{out.dtype}}>) -> {{out}}
  return %out : {{out}}
}
)";

int CountComposites(const Function& fn, std::string_view name) {
  int n = 0;
  for (const auto& op : fn.entry().operations())
    n += op->name() == "stablehlo.composite" && GetStringAttr(op->attrs(), "name") == name;
  return n;
}

TEST(KernelizePaged, AttentionKernelTakesTheGatheredPages) {
  const fs::path root = testing::KernelTempDir("paged");
  const fs::path variant = root / "build" / "tlaloc-universal";
  fs::create_directories(variant);
  std::ofstream(variant / "metadata.json") << kMetadata;
  std::ofstream(variant / "attention.mlir") << kModule;
  ASSERT_TRUE(SealVariant(variant).ok());
  KernelMapping mapping;
  mapping.Add("Attention", Backend::kCpu, Mode::kInference,
              {{root.string(), std::nullopt, ""}, "", std::nullopt});
  KernelizeOptions options;
  options.loader.cache_dir = root / "cache";
  options.loader.local_overrides = "none=none";
  auto k = Kernelizer::Create(mapping, options);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_EQ(k->resolved().size(), 1u);

  // A decode step of 2 rows over a paged cache: pages of 4 positions, 3-block tables.
  const io::ModelConfig c = testing::TinyConfig(false, 4, 2, 8);
  models::StepShape shape;
  shape.kind = models::StepKind::kDecode;
  shape.batch = 2;
  shape.page_size = 4;
  shape.num_blocks = 8;
  shape.table_blocks = 3;
  nn::LayerTrace trace;
  auto program = models::BuildStep(c, shape, &trace);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const int layers = static_cast<int>(c.num_hidden_layers);
  ASSERT_EQ(trace.Find("Attention").size(), static_cast<size_t>(layers));
  ASSERT_EQ(CountComposites(*program->module->Find(program->entry), nn::kPagedDotComposite),
            2 * layers);

  auto r = k->Apply(program->module, trace);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->replaced.size(), static_cast<size_t>(layers));
  for (const auto& kept : r->kept) ADD_FAILURE() << "kept: " << kept;
  const Function* fn = r->module->Find(program->entry);
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(CountComposites(*fn, nn::kPagedDotComposite), 0);
  // The kernel's operands in the decomposition's order of first use, q, k, mask, v: k and v are
  // the pools [N, Hkv, P, D] gathered by the table into [B, Hkv, M * P, D].
  int calls = 0;
  for (const auto& op : fn->entry().operations()) {
    if (op->name() != "func.call" ||
        GetStringAttr(op->attrs(), "callee").rfind("kernel.Attention", 0) != 0)
      continue;
    ++calls;
    ASSERT_EQ(op->num_operands(), 4);
    for (int i : {1, 3}) {
      SCOPED_TRACE("operand " + std::to_string(i));
      const Value gathered = op->operand(i);
      EXPECT_EQ(gathered.tensor_type().dims, (std::vector<int64_t>{2, 2, 3 * 4, 8}));
      ASSERT_FALSE(gathered.is_block_argument());
      const Operation* reshape = gathered.producer();
      ASSERT_EQ(reshape->name(), "stablehlo.reshape");
      ASSERT_FALSE(reshape->operand(0).is_block_argument());
      const Operation* gather = reshape->operand(0).producer();
      ASSERT_EQ(gather->name(), "stablehlo.gather");
      EXPECT_EQ(gather->operand(0).tensor_type().dims, (std::vector<int64_t>{8, 2, 4, 8}));
      EXPECT_EQ(gather->operand(1).tensor_type().dims, (std::vector<int64_t>{2, 3}));
    }
  }
  EXPECT_EQ(calls, layers);
  fs::remove_all(root);
}

}  // namespace
}  // namespace tlaloc::kernels
