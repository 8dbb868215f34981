// kernelize on a tiny Qwen3: universal and cpu kernels loaded from git repositories give the
// same greedy tokens as the decompositions; signature mismatches, disabled fallback, training
// mode, CUDA capability ranges and the TPU example's tpu_custom_call.
#include "tlaloc/kernels/kernelize.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include "kernels/kernel_repo_fixture.h"
#include "models/qwen3_reference.h"
#include "testing/oracle.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/models/family.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::kernels {
namespace {

namespace fs = std::filesystem;
using testing::KernelTempDir;
using testing::RandomModel;
using testing::RefModel;
using testing::TinyConfig;

struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<std::string> replaced;
  size_t traced = 0;  // traced calls of the layers the kernelizer resolved
  std::string printed_prefill;
};

// Prefill then decode steps with the models' programs on the interpreter, optionally
// kernelized; greedy sampling inside the programs.
StatusOr<GreedyRun> Greedy(const RefModel& m, const std::vector<int32_t>& prompt, int steps,
                           const Kernelizer* kernelizer) {
  GreedyRun run;
  models::StepShape shape;
  shape.batch = 1;
  shape.prompt_len = static_cast<int64_t>(prompt.size());
  shape.max_len = 32;
  models::ModelProgram programs[2];  // prefill, decode
  auto prepare = [&](bool prefill) -> StatusOr<std::unique_ptr<Executable>> {
    nn::LayerTrace trace;
    shape.kind = prefill ? models::StepKind::kPrefill : models::StepKind::kDecode;
    TL_ASSIGN_OR_RETURN(models::ModelProgram program, models::BuildStep(m.config, shape, &trace));
    std::shared_ptr<Module> module = program.module;
    InterpreterOptions io;
    if (kernelizer) {
      for (const auto& [layer, _] : kernelizer->resolved()) run.traced += trace.Find(layer).size();
      TL_ASSIGN_OR_RETURN(KernelizeResult r, kernelizer->Apply(module, trace));
      module = r.module;
      io.custom_calls = r.custom_calls;
      run.replaced.insert(run.replaced.end(), r.replaced.begin(), r.replaced.end());
    }
    if (prefill) run.printed_prefill = PrintModule(*module);
    programs[prefill ? 0 : 1] = program;
    return Executable::Prepare(module, program.entry, io);
  };
  TL_ASSIGN_OR_RETURN(auto prefill, prepare(true));
  TL_ASSIGN_OR_RETURN(auto decode, prepare(false));
  const int64_t t = shape.prompt_len;
  std::vector<int32_t> positions(t);
  for (int64_t i = 0; i < t; ++i) positions[i] = static_cast<int32_t>(i);
  std::map<models::Port, Literal> in;
  in[models::Port::kTokens] = Literal::FromVector<int32_t>({1, t}, prompt);
  in[models::Port::kPositions] = Literal::FromVector<int32_t>({1, t}, positions);
  in[models::Port::kLengths] = Literal::FromVector<int32_t>({1}, {static_cast<int32_t>(t)});
  in[models::Port::kSlots] = Literal::FromVector<int32_t>({1}, {0});
  TL_ASSIGN_OR_RETURN(std::vector<Literal> out,
                      prefill->Execute(testing::StepArgs(programs[0], m.literals, std::move(in))));
  const models::ProgramSignature& sig = programs[1].signature;
  for (int s = 0; s < steps; ++s) {
    int32_t token = out[sig.Output(models::Port::kNextTokens)].span<int32_t>()[0];
    run.tokens.push_back(token);
    if (s + 1 == steps) break;
    std::map<models::Port, Literal> step;
    step[models::Port::kTokens] = Literal::FromVector<int32_t>({1}, {token});
    step[models::Port::kPositions] =
        Literal::FromVector<int32_t>({1}, {static_cast<int32_t>(t + s)});
    std::vector<Literal> caches;
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      if (sig.outputs[i].aliased_input >= 0) caches.push_back(std::move(out[i]));
    TL_ASSIGN_OR_RETURN(
        out, decode->Execute(testing::StepArgs(programs[1], m.literals, std::move(step), {}, 0,
                                               static_cast<uint32_t>(s + 1), std::move(caches))));
  }
  return run;
}

class KernelizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = KernelTempDir("kz");
    options_.loader.cache_dir = root_ / "cache";
    options_.loader.local_overrides = "none=none";
    model_ = RandomModel(TinyConfig(false, 4, 2, 8), 7);
    options_.layer_attributes["RMSNorm"]["eps"] = model_.config.rms_norm_eps;
  }
  // A git repository over file:// holding `variants`.
  std::string GitRepo(const std::string& name, const testing::VariantFiles& variants) {
    fs::path dir = root_ / name;
    Status s = testing::MakeGitKernelRepo(dir, variants);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return testing::FileUrl(dir);
  }
  // A plain folder holding one variant whose metadata.json has `from` replaced by `to`.
  std::string EditedFolder(const std::string& name, const std::string& variant,
                           const std::vector<fs::path>& files, const std::string& from,
                           const std::string& to) {
    fs::path dir = root_ / name / "build" / variant;
    fs::create_directories(dir);
    for (const auto& f : files) fs::copy_file(f, dir / f.filename());
    std::string text = *ReadFileBytes(dir / "metadata.json");
    size_t p = text.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    if (p != std::string::npos) text.replace(p, from.size(), to);
    std::ofstream(dir / "metadata.json", std::ios::trunc) << text;
    EXPECT_TRUE(SealVariant(dir).ok());
    return (root_ / name).string();
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
  KernelizeOptions options_;
  RefModel model_;
  const std::vector<int32_t> prompt_{3, 14, 15, 92, 65};
};

TEST_F(KernelizeTest, UniversalRmsNormOverFileUrlKeepsTokens) {
  if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
  fs::path ex = testing::ExamplesDir() / "rmsnorm" / "universal";
  std::string url =
      GitRepo("uni", {{"tlaloc-universal", {ex / "metadata.json", ex / "rms_norm.mlir"}}});
  KernelMapping mapping;
  mapping.Add("RMSNorm", Backend::kCpu, Mode::kInference, {{url, 1, ""}, "", std::nullopt});
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  auto base = Greedy(model_, prompt_, 6, nullptr);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto kern = Greedy(model_, prompt_, 6, &*k);
  ASSERT_TRUE(kern.ok()) << kern.status().ToString();
  EXPECT_EQ(kern->tokens, base->tokens);
  // Every traced RMSNorm (4 per decoder layer with Qwen3's q/k norms, and the final norm) in
  // both programs.
  EXPECT_EQ(kern->traced, 2u * (4 * model_.config.num_hidden_layers + 1));
  EXPECT_EQ(kern->replaced.size(), kern->traced);
  EXPECT_NE(kern->printed_prefill.find("call @kernel.RMSNorm"), std::string::npos);
  EXPECT_EQ(base->printed_prefill.find("kernel.RMSNorm"), std::string::npos);
}

// RMSNorm is the composite tlaloc.rms_norm (builder/composite.h): kernelize replaces the
// composite op itself, found by name, so a program built without a LayerTrace is kernelized as
// well, with eps from the composite's attributes.
TEST_F(KernelizeTest, ReplacesTheRmsNormCompositeWithoutATrace) {
  if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
  fs::path ex = testing::ExamplesDir() / "rmsnorm" / "universal";
  std::string url =
      GitRepo("uni", {{"tlaloc-universal", {ex / "metadata.json", ex / "rms_norm.mlir"}}});
  KernelMapping mapping;
  mapping.Add("RMSNorm", Backend::kCpu, Mode::kInference, {{url, 1, ""}, "", std::nullopt});
  options_.layer_attributes.clear();  // eps must come from the composites
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  models::StepShape shape;
  shape.kind = models::StepKind::kPrefill;
  shape.prompt_len = 4;
  shape.max_len = 16;
  auto program = models::BuildStep(model_.config, shape, nullptr);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const std::string entry = program->entry;
  auto count = [&](const Module& m, const std::string& what) {
    size_t n = 0;
    for (const auto& op : m.Find(entry)->entry().operations())
      n += op->name() == "stablehlo.composite" && GetStringAttr(op->attrs(), "name") == what;
    return n;
  };
  const size_t norms = 4 * model_.config.num_hidden_layers + 1;
  ASSERT_EQ(count(*program->module, "tlaloc.rms_norm"), norms);
  std::set<std::string> norm_decompositions;
  for (const auto& op : program->module->Find(entry)->entry().operations())
    if (op->name() == "stablehlo.composite" &&
        GetStringAttr(op->attrs(), "name") == "tlaloc.rms_norm")
      norm_decompositions.insert(GetStringAttr(op->attrs(), "decomposition"));
  ASSERT_FALSE(norm_decompositions.empty());
  auto r = k->Apply(program->module, nn::LayerTrace());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->replaced.size(), norms);
  EXPECT_EQ(count(*r->module, "tlaloc.rms_norm"), 0u);
  EXPECT_GT(count(*r->module, "tlaloc.rotary"), 0u) << "another layer's composite was replaced";
  size_t calls = 0;
  for (const auto& op : r->module->Find(program->entry)->entry().operations())
    calls += op->name() == "func.call" &&
             GetStringAttr(op->attrs(), "callee").rfind("kernel.RMSNorm", 0) == 0;
  EXPECT_EQ(calls, norms);
  // The replaced composites' decompositions are gone; the others' stay.
  for (const std::string& name : norm_decompositions)
    EXPECT_EQ(r->module->Find(name), nullptr) << name << " is left in the kernelized module";
  for (const auto& op : r->module->Find(entry)->entry().operations())
    if (op->name() == "stablehlo.composite") {
      EXPECT_NE(r->module->Find(GetStringAttr(op->attrs(), "decomposition")), nullptr);
    }
}

TEST_F(KernelizeTest, CpuKernelsKeepTokensAndRunThroughCustomCalls) {
  if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
  std::string rms = GitRepo("rms", testing::RmsNormVariants());
  std::string silu = GitRepo("silu", testing::SiluVariants());
  KernelMapping mapping;
  mapping.Add("RMSNorm", Backend::kCpu, Mode::kInference, {{rms, 2, ""}, "", std::nullopt});
  mapping.Add("SiluAndMul", Backend::kCpu, Mode::kInference, {{silu, 1, ""}, "", std::nullopt});
  // Untrusted remote native code is refused before any program is built.
  auto refused = Kernelizer::Create(mapping, options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  options_.loader.trust_remote_code = true;
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->resolved().at("RMSNorm").variant.meta.variant, testing::HostCpuVariant());
  EXPECT_EQ(k->resolved().at("RMSNorm").variant.meta.version, 2);
  auto base = Greedy(model_, prompt_, 6, nullptr);
  auto kern = Greedy(model_, prompt_, 6, &*k);
  ASSERT_TRUE(base.ok() && kern.ok()) << kern.status().ToString();
  EXPECT_EQ(kern->tokens, base->tokens);
  EXPECT_EQ(kern->replaced.size(), kern->traced);
  EXPECT_GT(kern->traced, 0u);
  EXPECT_NE(kern->printed_prefill.find("stablehlo.custom_call @tlaloc_rms_norm_f32"),
            std::string::npos);
  EXPECT_NE(kern->printed_prefill.find("stablehlo.custom_call @tlaloc_silu_and_mul_f32"),
            std::string::npos);
}

TEST_F(KernelizeTest, MismatchedSignatureIsRefusedByName) {
  fs::path ex = testing::ExamplesDir() / "rmsnorm" / "universal";
  std::string dir =
      EditedFolder("badsig", "tlaloc-universal", {ex / "metadata.json", ex / "rms_norm.mlir"},
                   "\"operands\": [\"x\", \"weight\"]", "\"operands\": [\"x\"]");
  KernelMapping mapping;
  mapping.Add("RMSNorm", Backend::kCpu, Mode::kInference, {{dir, std::nullopt, ""}, "", {}});
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("RMSNorm"), std::string::npos);
  EXPECT_NE(k.status().message().find("declares operands (x)"), std::string::npos)
      << k.status().ToString();
  EXPECT_NE(k.status().message().find("(x, weight)"), std::string::npos);
}

TEST_F(KernelizeTest, FallbackKeepsDecompositionUnlessDisabled) {
  fs::path ex = testing::ExamplesDir() / "rmsnorm" / "universal";
  KernelMapping mapping;
  // Only a CUDA kernel is mapped; the target is the CPU.
  mapping.Add("RMSNorm", Backend::kCuda, Mode::kInference,
              {{(ex / "..").string(), std::nullopt, ""}, "", std::nullopt});
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_TRUE(k->unresolved().count("RMSNorm"));
  auto run = Greedy(model_, prompt_, 2, &*k);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->replaced.empty());
  options_.use_fallback = false;
  auto strict = Kernelizer::Create(mapping, options_);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("fallback to the decomposition is disabled"),
            std::string::npos);
}

TEST_F(KernelizeTest, MissingVariantFallsBackOrFailsWithTheVariantList) {
  fs::path ex = testing::ExamplesDir() / "relu_tpu" / "tpu";
  fs::path dir = root_ / "tpu-only";
  ASSERT_TRUE(
      testing::WriteVariants(dir, {{"tlaloc-tpu", {ex / "metadata.json", ex / "relu.mosaic"}}}, 1)
          .ok());
  KernelMapping mapping;
  mapping.Add("ReLU", Backend::kCpu, Mode::kInference, {{dir.string(), std::nullopt, ""}, "", {}});
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_TRUE(k->unresolved().count("ReLU"));
  EXPECT_NE(k->unresolved().at("ReLU").find("tlaloc-tpu: backend tpu is not the target's cpu"),
            std::string::npos)
      << k->unresolved().at("ReLU");
  options_.use_fallback = false;
  auto strict = Kernelizer::Create(mapping, options_);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("has no variant for target"), std::string::npos)
      << strict.status().ToString();
}

TEST_F(KernelizeTest, KernelDependenciesAreLoadedAndVerified) {
  if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
  std::string silu = GitRepo("silu", testing::SiluVariants());
  fs::path ex = testing::ExamplesDir() / "rmsnorm" / "universal";
  std::vector<fs::path> files = {ex / "metadata.json", ex / "rms_norm.mlir"};
  std::string dep = "\"kernel-depends\": [{\"repo-id\": \"" + silu + "\", \"version\": 1}], ";
  std::string dir =
      EditedFolder("with-dep", "tlaloc-universal", files, "\"layers\"", dep + "\"layers\"");
  KernelMapping mapping;
  mapping.Add("RMSNorm", Backend::kCpu, Mode::kInference, {{dir, std::nullopt, ""}, "", {}});
  // The dependency is native code from a remote source: untrusted until the flag is given.
  auto refused = Kernelizer::Create(mapping, options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("kernel dependency " + silu), std::string::npos)
      << refused.status().ToString();
  options_.loader.trust_remote_code = true;
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const auto& r = k->resolved().at("RMSNorm");
  ASSERT_EQ(r.dependencies.size(), 1u);
  EXPECT_EQ(r.dependencies[0].meta.name, "silu-and-mul");
  EXPECT_EQ(r.dependency_libraries.size(), 1u);
  std::string missing = EditedFolder("missing-dep", "tlaloc-universal", files, "\"layers\"",
                                     "\"kernel-depends\": [{\"repo-id\": \"org/absent\"}], "
                                     "\"layers\"");
  KernelMapping m2;
  m2.Add("RMSNorm", Backend::kCpu, Mode::kInference, {{missing, std::nullopt, ""}, "", {}});
  auto absent = Kernelizer::Create(m2, options_);
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("org/absent"), std::string::npos);
  EXPECT_NE(absent.status().message().find("TLALOC_KERNELS_HUB"), std::string::npos);
}

TEST_F(KernelizeTest, TrainingNeedsABackward) {
  if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
  std::string rms = GitRepo("rms", testing::RmsNormVariants());
  options_.loader.trust_remote_code = true;
  options_.mode = Mode::kTraining;
  KernelMapping mapping;
  mapping.Add("RMSNorm", Backend::kCpu, Mode::kInference, {{rms, 1, ""}, "", std::nullopt});
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok());
  // Inference kernels are not candidates in training mode.
  EXPECT_TRUE(k->resolved().empty());
  KernelMapping training;
  training.Add("RMSNorm", Backend::kCpu, Mode::kTraining, {{rms, 1, ""}, "", std::nullopt});
  k = Kernelizer::Create(training, options_);
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(k->unresolved().count("RMSNorm"));
  EXPECT_NE(k->unresolved().at("RMSNorm").find("no backward"), std::string::npos);
}

TEST_F(KernelizeTest, CudaCapabilityRangesPickTheSmallestContainingRange) {
  fs::path ex = testing::ExamplesDir() / "rmsnorm" / "cuda";
  std::ofstream(root_ / "librmsnorm_cuda.so") << "placeholder: registered through PJRT FFI";
  auto t = Target::HostCpu();
  std::string variant = "tlaloc1-cu126-" + t.arch + "-" + t.os;
  std::vector<fs::path> files = {ex / "metadata.json", root_ / "librmsnorm_cuda.so"};
  std::string wide = EditedFolder("wide", variant, files, "tlaloc_rms_norm_ffi", "wide_ffi");
  std::string narrow = EditedFolder("narrow", variant, files, "tlaloc_rms_norm_ffi", "hopper_ffi");
  KernelMapping mapping;
  mapping.Add("RMSNorm", Backend::kCuda, Mode::kInference,
              {{wide, std::nullopt, ""}, "", CapabilityRange{70, 100}});
  mapping.Add("RMSNorm", Backend::kCuda, Mode::kInference,
              {{narrow, std::nullopt, ""}, "", CapabilityRange{90, 90}});
  options_.target = *Target::Parse("cuda12.8:sm90");
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->resolved().at("RMSNorm").spec.symbol, "hopper_ffi");
  options_.target = *Target::Parse("cuda12.8:sm80");
  k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->resolved().at("RMSNorm").spec.symbol, "wide_ffi");
  // The program carries a typed-FFI custom_call with eps in its backend_config.
  models::StepShape shape;
  shape.kind = models::StepKind::kPrefill;
  shape.prompt_len = 4;
  shape.max_len = 16;
  nn::LayerTrace trace;
  auto program = models::BuildStep(model_.config, shape, &trace);
  ASSERT_TRUE(program.ok());
  auto r = k->Apply(program->module, trace);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string text = PrintModule(*r->module);
  EXPECT_NE(text.find("stablehlo.custom_call @wide_ffi"), std::string::npos);
  EXPECT_NE(text.find("api_version = 4"), std::string::npos);
  EXPECT_NE(text.find("eps = "), std::string::npos);
}

TEST_F(KernelizeTest, TpuReluExamplePrintsTpuCustomCall) {
  fs::path ex = testing::ExamplesDir() / "relu_tpu" / "tpu";
  fs::path dir = root_ / "relu";
  ASSERT_TRUE(
      testing::WriteVariants(dir, {{"tlaloc-tpu", {ex / "metadata.json", ex / "relu.mosaic"}}}, 1)
          .ok());
  auto module = std::make_shared<Module>("relu_example");
  nn::LayerTrace trace;
  FunctionBuilder fb(module.get(), "main");
  Tensor x = fb.AddArg(TensorType(ElementType::kF32, {8, 128}));
  Tensor y;
  {
    nn::LayerScope scope(&trace, &fb.ops(), "ReLU", "relu");
    y = Max(x, Zeros(fb.ops(), {8, 128}));
  }
  ASSERT_TRUE(fb.Return({y}).ok());
  KernelMapping mapping;
  mapping.Add("ReLU", Backend::kTpu, Mode::kInference, {{dir.string(), std::nullopt, ""}, "", {}});
  options_.target = *Target::Parse("tpu");
  auto k = Kernelizer::Create(mapping, options_);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  auto r = k->Apply(module, trace);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string text = PrintModule(*r->module);
  EXPECT_NE(text.find("stablehlo.custom_call @tpu_custom_call"), std::string::npos) << text;
  EXPECT_NE(text.find("stable_mosaic.version"), std::string::npos);
  EXPECT_EQ(text.find("stablehlo.maximum"), std::string::npos) << text;
}

// The kernel hub's CUDA variant (examples/kernels/rmsnorm/cuda, the hub's layout) compiles with
// nvcc for an H100 (sm_90) on a machine without a GPU: a compile, not a run. nvcc is on the CI
// machines (CUDA 13 in /usr/local/cuda), so under CI=true its absence fails.
TEST(KernelExamples, CudaRmsNormCompilesWithNvccForSm90) {
  std::string nvcc;
  for (const char* c : {"/usr/local/cuda/bin/nvcc", "nvcc"})
    if (std::system((std::string("command -v ") + c + " >/dev/null 2>&1").c_str()) == 0) {
      nvcc = c;
      break;
    }
  if (nvcc.empty())
    TL_ORACLE_MISSING(
        "nvcc (the CUDA toolkit) is not installed: neither /usr/local/cuda/bin/nvcc "
        "nor nvcc on PATH");
  fs::path out = KernelTempDir("nvcc") / "librmsnorm_cuda.so";
  fs::path src = testing::ExamplesDir() / "rmsnorm" / "cuda" / "rmsnorm_cuda.cu";
  auto r = RunCommand({nvcc, "-shared", "-Xcompiler", "-fPIC", "-O2", "-arch=sm_90", "-o",
                       out.string(), src.string()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(fs::exists(out));
  // Its fatbinary holds sm_90 code: nvcc records each cubin's target options in it ("-arch sm_90";
  // cuobjdump is not part of the CI machines' toolkit).
  std::ifstream lib(out, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(lib)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("-arch sm_90 "), std::string::npos) << out << " holds no sm_90 cubin";
  fs::remove_all(out.parent_path());
}

}  // namespace
}  // namespace tlaloc::kernels
