// Mosaic TPU kernels made from Pallas on this CPU machine (scripts/kernels/pallas_tpu_kernels.py,
// jax 0.10.2 from the venv, generated once per run): kernelize(tpu) claims the tiny Qwen3 decode
// step's RMSNorm and SiluAndMul call sites with them; each payload, and jax's own lowered module
// around it, round-trips Tlaloc's parser and printer byte for byte; the layers they replace give,
// on the interpreter, what the same Pallas kernels give in interpret mode on jax's CPU backend.
// With TLALOC_PALLAS_AOT_DIR set, the kernelized programs are written there as a programs folder
// for `tlaloc aot --plugin tpu` (tests/kernels/pallas_tpu_aot.sh, label tpu_aot).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/kernel_repo_fixture.h"
#include "testing/oracle.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/kernels/kernelize.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/paged_attention.h"
#include "tlaloc/stablehlo/npy.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::kernels {
namespace {

namespace fs = std::filesystem;

// Interpreter (f32, Tlaloc's decomposition) against Pallas interpret mode (jax on CPU): both
// compute in f32, with different reduction orders and rsqrt / exp implementations.
constexpr float kTolerance = 2e-6f;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Generates the repository once for the suite; empty with `missing` set when jax is absent.
struct Generated {
  fs::path dir;
  std::string missing, error;
};

// Removes the generated folder when the test binary exits.
struct RemoveAtExit {
  fs::path dir;
  ~RemoveAtExit() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

// TLALOC_PALLAS_REPO names a repository the generator wrote with --check (the bring-up tarball's
// kernels/pallas-tpu): used as it is, with no Python (a TPU VM's session has none).
const char* ShippedRepo() {
  const char* dir = std::getenv("TLALOC_PALLAS_REPO");
  return dir && *dir ? dir : nullptr;
}

const Generated& Repo() {
  static const Generated g = [] {
    Generated r;
    if (const char* shipped = ShippedRepo()) {
      r.dir = shipped;
      if (!fs::exists(r.dir / "check" / "index.tsv"))
        r.error = "TLALOC_PALLAS_REPO=" + r.dir.string() +
                  " holds no check/index.tsv (expected pallas_tpu_kernels.py --check output)";
      return r;
    }
    r.missing = testing::PythonMissing("jax numpy");
    if (!r.missing.empty()) return r;
    r.dir = testing::KernelTempDir("pallas_tpu");
    const std::string cmd = testing::OraclePython() +
                            " " TLALOC_SOURCE_DIR
                            "/scripts/kernels/pallas_tpu_kernels.py --check --out '" +
                            r.dir.string() + "' --tlaloc '" TLALOC_CLI_BINARY "' > '" +
                            (r.dir / "generate.log").string() + "' 2>&1";
    if (std::system(cmd.c_str()) != 0) r.error = cmd + " failed: " + Slurp(r.dir / "generate.log");
    return r;
  }();
  static const RemoveAtExit cleanup{ShippedRepo() ? fs::path() : g.dir};
  return g;
}

#define NEED_REPO()                                          \
  const Generated& gen = Repo();                             \
  if (!gen.missing.empty()) TL_ORACLE_MISSING(gen.missing);  \
  ASSERT_TRUE(gen.error.empty()) << gen.error;               \
  const fs::path variant = gen.dir / "build" / "tlaloc-tpu"; \
  (void)variant

StatusOr<Kernelizer> TpuKernelizer(const fs::path& repo) {
  KernelMapping mapping;
  for (const char* layer : {"RMSNorm", "SiluAndMul", "Attention", "PagedAttention"})
    mapping.Add(layer, Backend::kTpu, Mode::kInference,
                {{repo.string(), std::nullopt, ""}, "", {}});
  KernelizeOptions options;
  options.target = *Target::Parse("tpu");
  return Kernelizer::Create(mapping, options);
}

// The backend_config strings of every tpu_custom_call in `module`, in order.
std::vector<std::string> Payloads(const Module& module) {
  std::vector<std::string> out;
  for (const auto& f : module.functions())
    for (const auto& op : f->entry().operations()) {
      auto t = op->attrs().find("call_target_name");
      if (t == op->attrs().end() || t->second.as_string() != "tpu_custom_call") continue;
      out.push_back(op->attrs().at("backend_config").as_string());
    }
  return out;
}

// Appends a program to the `tlaloc aot` folder `dir` (index.tsv: file, module, platform,
// replicas, partitions, strict precision, bytes; see pjrt/program_recorder.h).
void AddAotProgram(const fs::path& dir, const std::string& name, const std::string& text) {
  fs::create_directories(dir);
  std::ofstream(dir / (name + ".mlir")) << text;
  std::ofstream(dir / "index.tsv", std::ios::app)
      << name << ".mlir\t" << name << "\ttpu\t1\t1\t0\t" << text.size() << "\n";
}

struct Kernelized {
  std::shared_ptr<Module> module;
  KernelizeResult result;
  std::string entry;
  size_t traced = 0;
};

StatusOr<Kernelized> TinyStep(const Kernelizer& k, models::StepKind kind) {
  TL_ASSIGN_OR_RETURN(io::ModelConfig config, models::PresetConfig("tiny"));
  // The layers' shapes are the preset's; a 512-token vocabulary (against 151,936) only keeps the
  // embedding and LM head small, so that libtpu compiles the step in seconds (tpu_aot).
  config.vocab_size = 512;
  config.bos_token_id = 0;
  config.pad_token_id = 0;
  config.eos_token_ids = {1};
  models::StepShape shape;
  shape.kind = kind;
  shape.batch = 1;
  shape.prompt_len = 4;
  // The paged KV cache: pages of 16 positions, a 2-block table (32 positions gathered).
  shape.page_size = 16;
  shape.num_blocks = 4;
  shape.table_blocks = 2;
  nn::LayerTrace trace;
  TL_ASSIGN_OR_RETURN(models::ModelProgram program, models::BuildStep(config, shape, &trace));
  Kernelized out;
  out.traced = trace.Find("RMSNorm").size() + trace.Find("SiluAndMul").size() +
               trace.Find("Attention").size();
  out.entry = program.entry;
  TL_ASSIGN_OR_RETURN(out.result, k.Apply(program.module, trace));
  out.module = out.result.module;
  return out;
}

TEST(PallasTpuKernels, KernelizeClaimsTheTinyDecodeStep) {
  NEED_REPO();
  auto k = TpuKernelizer(variant.parent_path().parent_path());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_EQ(k->resolved().size(), 4u);
  auto decode = TinyStep(*k, models::StepKind::kDecode);
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  // Two layers: input, q, k and post-attention norms, the attention over the gathered pages and
  // the MLP's SiluAndMul each, and the final norm (on the last position, [1, 64]): 13 call
  // sites, each at a shape the generator lowered.
  EXPECT_EQ(decode->traced, 13u);
  EXPECT_EQ(decode->result.replaced.size(), 13u);
  for (const auto& kept : decode->result.kept) ADD_FAILURE() << "kept: " << kept;
  std::vector<std::string> payloads = Payloads(*decode->module);
  ASSERT_EQ(payloads.size(), 13u);
  // The payloads sent are the files' bytes (the hidden-state norm's, the MLP's).
  const std::string hidden = Slurp(variant / "rms_norm_tiny_hidden.mosaic");
  const std::string mlp = Slurp(variant / "silu_and_mul_tiny.mosaic");
  EXPECT_EQ(std::count(payloads.begin(), payloads.end(), hidden), 4);
  EXPECT_EQ(std::count(payloads.begin(), payloads.end(), mlp), 2);
  const std::string attention = Slurp(variant / "decode_attention_tiny.mosaic");
  EXPECT_EQ(std::count(payloads.begin(), payloads.end(), attention), 2);
  // The weight [64] enters the kernel as [1, 64]: kernelize reshaped it, as jax does.
  std::string text = PrintModule(*decode->module);
  EXPECT_NE(text.find("(tensor<64xf32>) -> tensor<1x64xf32>"), std::string::npos);
  // Every tlaloc.rms_norm composite was replaced (its decomposition, unreferenced, stays).
  EXPECT_EQ(text.find("stablehlo.composite \"tlaloc.rms_norm\""), std::string::npos)
      << "an RMSNorm was not replaced";
  // The kernelized program prints, parses and prints again unchanged, payloads included.
  auto reparsed = ParseModule(text, "kernelized");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  EXPECT_EQ(PrintModule(**reparsed), text);
  EXPECT_EQ(Payloads(**reparsed), payloads);

  // Prefill (4 tokens) has no payload of its shapes but for the final norm (the last position
  // only, as in decode): the other 12 call sites keep their decomposition, each with the reason.
  auto prefill = TinyStep(*k, models::StepKind::kPrefill);
  ASSERT_TRUE(prefill.ok()) << prefill.status().ToString();
  ASSERT_EQ(prefill->result.replaced.size(), 1u);
  EXPECT_EQ(prefill->result.replaced[0].rfind("RMSNorm model.norm ->", 0), 0u)
      << prefill->result.replaced[0];
  ASSERT_EQ(prefill->result.kept.size(), 12u);
  EXPECT_NE(prefill->result.kept[0].find("no tpu payload for operands"), std::string::npos)
      << prefill->result.kept[0];

  if (const char* dir = std::getenv("TLALOC_PALLAS_AOT_DIR")) {
    // A programs folder for `tlaloc aot`: the entry named main, as PJRT sessions send it.
    std::string program = text;
    const std::string from = "@" + decode->entry + "(";
    size_t at = program.find(from);
    ASSERT_NE(at, std::string::npos);
    program.replace(at, from.size(), "@main(");
    AddAotProgram(dir, "tiny_decode_pallas", program);
  }
}

TEST(PallasTpuKernels, PayloadsRoundTripTheParserAndPrinterByteForByte) {
  NEED_REPO();
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(gen.dir / "programs")) {
    const std::string stem = entry.path().stem().string();
    SCOPED_TRACE(stem);
    // jax's lowered module around the kernel, parsed by Tlaloc: the backend_config it holds is
    // the payload file byte for byte, and printing then parsing again changes nothing.
    auto parsed = ParseModule(Slurp(entry.path()), entry.path().string());
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    std::vector<std::string> payloads = Payloads(**parsed);
    ASSERT_EQ(payloads.size(), 1u);
    EXPECT_EQ(payloads[0], Slurp(variant / (stem + ".mosaic")));
    const std::string printed = PrintModule(**parsed);
    auto again = ParseModule(printed, "printed");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(PrintModule(**again), printed);
    EXPECT_EQ(Payloads(**again), payloads);
    // jax's paged attention, as Tlaloc prints it, for `tlaloc aot` as well.
    if (const char* dir = std::getenv("TLALOC_PALLAS_AOT_DIR"); dir && stem.find("paged") == 0)
      AddAotProgram(dir, "paged_attention_qwen3_0_6b", printed);
    ++checked;
  }
  EXPECT_EQ(checked, 13);  // 6 kernels x 2 presets, and jax's paged attention
}

TEST(PallasTpuKernels, InterpreterMatchesPallasInterpretMode) {
  NEED_REPO();
  std::ifstream index(gen.dir / "check" / "index.tsv");
  std::string stem, layer, operands;
  int checked = 0;
  while (std::getline(index, stem, '\t') && std::getline(index, layer, '\t') &&
         std::getline(index, operands)) {
    SCOPED_TRACE(stem);
    const fs::path check = gen.dir / "check";
    std::vector<Literal> ins;
    for (int i = 0; i < std::stoi(operands); ++i) {
      auto in = ReadNpyFile((check / (stem + ".in" + std::to_string(i) + ".npy")).string());
      ASSERT_TRUE(in.ok()) << in.status().ToString();
      ins.push_back(*in);
    }
    auto want = ReadNpyFile((check / (stem + ".out.npy")).string());
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    // The layer the kernel replaces, built as Tlaloc builds it, on the interpreter.
    auto module = std::make_shared<Module>("reference");
    FunctionBuilder fb(module.get(), "main");
    std::vector<Tensor> a;
    for (const Literal& in : ins) a.push_back(fb.AddArg(in.type()));
    Tensor out;
    if (layer == "RMSNorm") {
      out = nn::RmsNormLayer(a[0], a[1], 1e-6);
    } else if (layer == "SiluAndMul") {
      out = nn::SiluAndMul(a[0], a[1]);
    } else {  // Attention: q, k, mask (as i32 0/1), v, the order kernelize passes them in
      Tensor mask = Ne(a[2], Zeros(fb.ops(), a[2].dims(), ElementType::kS32));
      out = nn::GroupedAttention(a[0], a[1], a[3], mask,
                                 1.0 / std::sqrt(static_cast<double>(a[0].dim(3))));
    }
    ASSERT_TRUE(fb.Return({out}).ok());
    auto exe = Executable::Prepare(module, "main");
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    auto got = (*exe)->Execute(std::move(ins));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto g = (*got)[0].span<float>();
    auto w = want->span<float>();
    ASSERT_EQ(g.size(), w.size());
    float worst = 0;
    for (size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, std::abs(g[i] - w[i]) / std::max(1.0f, std::abs(w[i])));
    EXPECT_LE(worst, kTolerance) << layer << " " << stem;
    std::printf("%s %s: %zu values, worst relative difference %.3g\n", layer.c_str(), stem.c_str(),
                g.size(), worst);
    ++checked;
  }
  EXPECT_EQ(checked, 12);
}

// One decode query's nn::PagedAttention over the pool `in` describes (the layer's operands in
// the order of their first use, as the generator saved them): a program returning out and lse,
// or out alone, traced for kernelize. `tokens` > 1 makes a prefill-like call site.
struct PagedProgram {
  std::shared_ptr<Module> module;
  nn::LayerTrace trace;
};

PagedProgram PagedAttentionProgram(const std::vector<Literal>& in, bool with_lse,
                                   int64_t tokens = 1) {
  PagedProgram p;
  p.module = std::make_shared<Module>("paged_attention");
  FunctionBuilder fb(p.module.get(), "main");
  std::vector<Tensor> a;
  for (const Literal& l : in) {
    TensorType t = l.type();
    if (tokens > 1 && (&l == &in[3] || &l == &in[6])) t.dims[1] = tokens;  // q, q_positions
    a.push_back(fb.AddArg(t));
  }
  // Operands: k_pages, block_table, v_pages, q, kv_start, kv_lengths, q_positions.
  nn::AttentionPartial r = nn::PagedAttention(a[3], a[6], a[0], a[2], a[1], a[4], a[5],
                                              1.0 / std::sqrt(static_cast<double>(a[3].dim(3))),
                                              &p.trace, "model.layers.0.self_attn");
  std::vector<Tensor> results = {r.out};
  if (with_lse) results.push_back(r.lse);
  EXPECT_TRUE(fb.Return(results).ok());
  return p;
}

std::vector<Literal> ReadNpys(const fs::path& check, const std::string& name, int n) {
  std::vector<Literal> out;
  for (int i = 0; i < n; ++i) {
    auto l =
        ReadNpyFile((check / ("paged_attention." + name + std::to_string(i) + ".npy")).string());
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) out.push_back(*l);
  }
  return out;
}

float WorstRelative(const Literal& got, const Literal& want) {
  auto g = got.span<float>();
  auto w = want.span<float>();
  EXPECT_EQ(g.size(), w.size());
  float worst = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i)
    worst = std::max(worst, std::abs(g[i] - w[i]) / std::max(1.0f, std::abs(w[i])));
  return worst;
}

// jax's paged attention claims nn::PagedAttention's decode call site through kernelize's
// jax-paged-attention adapter. On the interpreter the tpu_custom_call is answered by what jax's
// kernel returned in Pallas' TPU interpret mode for the operands the generator mapped; the
// handler first checks the adapter handed the kernel exactly those operands. The kernelized
// program's out and lse then equal the layer's decomposition.
TEST(PallasTpuKernels, JaxPagedAttentionClaimsThePagedAttentionLayer) {
  NEED_REPO();
  const fs::path check = gen.dir / "check";
  std::vector<Literal> layer_in = ReadNpys(check, "layer_in", 7);
  std::vector<Literal> kernel_in = ReadNpys(check, "kernel_in", 7);
  std::vector<Literal> kernel_out = ReadNpys(check, "kernel_out", 3);
  ASSERT_EQ(layer_in.size() + kernel_in.size() + kernel_out.size(), 17u);
  auto k = TpuKernelizer(variant.parent_path().parent_path());
  ASSERT_TRUE(k.ok()) << k.status().ToString();

  PagedProgram reference = PagedAttentionProgram(layer_in, true);
  auto ref_exe = Executable::Prepare(reference.module, "main");
  ASSERT_TRUE(ref_exe.ok()) << ref_exe.status().ToString();
  auto want = (*ref_exe)->Execute(layer_in);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  PagedProgram program = PagedAttentionProgram(layer_in, true);
  ASSERT_EQ(program.trace.Find("PagedAttention").size(), 1u);
  auto result = k->Apply(program.module, program.trace);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  for (const auto& kept : result->kept) ADD_FAILURE() << "kept: " << kept;
  ASSERT_EQ(result->replaced.size(), 1u);
  EXPECT_EQ(Payloads(*program.module),
            std::vector<std::string>{Slurp(variant / "paged_attention_qwen3-0.6b.mosaic")});
  const std::string text = PrintModule(*program.module);
  auto reparsed = ParseModule(text, "kernelized");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  EXPECT_EQ(PrintModule(**reparsed), text);

  int calls = 0;
  InterpreterOptions options;
  options.custom_calls["tpu_custom_call"] = [&](std::span<const Literal> operands,
                                                std::vector<Literal>& results) -> Status {
    ++calls;
    if (operands.size() != kernel_in.size()) return InvalidArgument("operand count");
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].type() != kernel_in[i].type())
        return InvalidArgument("kernel operand " + std::to_string(i) + " is " +
                               operands[i].type().ToString() + ", jax's is " +
                               kernel_in[i].type().ToString());
      // Integers and moved f32 exactly; q * scale is one f32 product on both sides.
      if (std::memcmp(operands[i].data(), kernel_in[i].data(), operands[i].byte_size()) != 0)
        return InvalidArgument("kernel operand " + std::to_string(i) +
                               " differs from the operand jax's kernel was run on");
    }
    results.clear();
    for (const Literal& l : kernel_out) results.push_back(l);
    return OkStatus();
  };
  auto exe = Executable::Prepare(program.module, "main", options);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto got = (*exe)->Execute(layer_in);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(got->size(), 2u);
  // The kernel's online softmax over blocks of 32 keys against the decomposition's one pass.
  const float out_diff = WorstRelative((*got)[0], (*want)[0]);
  const float lse_diff = WorstRelative((*got)[1], (*want)[1]);
  EXPECT_LE(out_diff, 1e-5f);
  EXPECT_LE(lse_diff, 1e-5f);
  std::printf("PagedAttention via jax's kernel: out worst relative %.3g, lse %.3g\n", out_diff,
              lse_diff);

  // A caller that drops lse is claimed too; a 4-query (prefill) call site has no payload.
  PagedProgram out_only = PagedAttentionProgram(layer_in, false);
  auto r1 = k->Apply(out_only.module, out_only.trace);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->replaced.size(), 1u);
  PagedProgram prefill = PagedAttentionProgram(layer_in, true, 4);
  auto r4 = k->Apply(prefill.module, prefill.trace);
  ASSERT_TRUE(r4.ok()) << r4.status().ToString();
  EXPECT_TRUE(r4->replaced.empty());
  ASSERT_EQ(r4->kept.size(), 1u);
  EXPECT_NE(r4->kept[0].find("no tpu payload"), std::string::npos) << r4->kept[0];

  if (const char* dir = std::getenv("TLALOC_PALLAS_AOT_DIR"))
    AddAotProgram(dir, "paged_attention_kernelized", text);
}

}  // namespace
}  // namespace tlaloc::kernels
