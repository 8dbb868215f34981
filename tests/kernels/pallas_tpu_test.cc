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

const Generated& Repo() {
  static const Generated g = [] {
    Generated r;
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
  static const RemoveAtExit cleanup{g.dir};
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
  for (const char* layer : {"RMSNorm", "SiluAndMul", "Attention"})
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
  ASSERT_EQ(k->resolved().size(), 3u);
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
  EXPECT_EQ(text.find("stablehlo.rsqrt"), std::string::npos) << "an RMSNorm was not replaced";
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

}  // namespace
}  // namespace tlaloc::kernels
