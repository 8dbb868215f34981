// `tlaloc init-model (--preset NAME | --config CONFIG.json) OUT_DIR [--seed S] [--dtype T]`:
// writes a randomly initialised checkpoint of any registered family in Hugging Face form, with
// the family's tokenizer files (models::ModelFamily::tokenizer_config_json, and
// builtin_tokenizer_json or the file its tokenizer_search finds): Qwen3's the real Qwen3
// tokenizer.json the repository carries in data/qwen3/ (installed as
// share/tlaloc/qwen3-tokenizer.json) and a tokenizer_config.json carrying the Qwen3 chat
// template; Llama's a built-in byte-level tokenizer.json with Llama 3's special tokens and a
// Llama 3-style tokenizer_config.json. --tokenizer replaces the tokenizer.json.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"

namespace tlaloc::cli {

namespace {

namespace fs = std::filesystem;

// Where the installed data folder sits relative to the prefix (CMake's CMAKE_INSTALL_DATADIR,
// usually "share") and the configured prefix's own copy; see apps/CMakeLists.txt.
#ifndef TLALOC_INSTALL_DATADIR
#define TLALOC_INSTALL_DATADIR "share"
#endif
#ifndef TLALOC_INSTALL_FULL_DATADIR
#define TLALOC_INSTALL_FULL_DATADIR ""
#endif

struct TokenizerFound {
  std::optional<fs::path> found;
  std::vector<std::string> looked;  // every place tried, for the error message
};

// The family's tokenizer.json (ModelFamily::tokenizer_search), first found of: the file its
// environment variable names; the checkout's copy (Qwen3's data/qwen3/) above the working
// directory or above the executable (a build folder sits inside the checkout); the copy
// installed with the binary (<prefix>/share, found from /proc/self/exe's ../share, so a
// relocated prefix works), then the configured prefix's.
TokenizerFound FindFamilyTokenizer(const models::ModelFamily::TokenizerSearch& where) {
  TokenizerFound search;
  const std::string env_var(where.env_var);
  const fs::path checkout_rel(where.checkout_path);
  const fs::path installed_rel(where.installed_path);
  std::error_code ec;
  auto try_path = [&](const fs::path& p, const std::string& why) {
    if (search.found) return;
    search.looked.push_back(p.string() + " (" + why + ")");
    if (fs::is_regular_file(p, ec)) search.found = p;
  };
  if (const char* env = env_var.empty() ? nullptr : std::getenv(env_var.c_str())) {
    try_path(env, "$" + env_var);
    // A variable that is set but wrong is reported rather than silently bypassed.
    if (!search.found) return search;
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::pair<fs::path, std::string>> starts = {
      {fs::current_path(ec), "working directory"}};
  if (!exe.empty()) starts.push_back({exe.parent_path(), "tlaloc binary"});
  for (const auto& [start, what] : starts) {
    if (start.empty() || checkout_rel.empty()) continue;
    bool any = false;
    for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
      if (fs::exists(dir / checkout_rel, ec)) {
        try_path(dir / checkout_rel, "checkout above the " + what);
        any = true;
        break;
      }
      if (dir == dir.parent_path()) break;
    }
    if (!any)
      search.looked.push_back(checkout_rel.string() + " in any folder above " + start.string() +
                              " (checkout above the " + what + ")");
  }
  if (installed_rel.empty()) return search;
  if (!exe.empty()) {
    const fs::path datadir = TLALOC_INSTALL_DATADIR;
    const fs::path data =
        datadir.is_absolute() ? datadir : exe.parent_path().parent_path() / datadir;
    try_path((data / installed_rel).lexically_normal(), "installed with the binary");
  }
  if (std::string_view(TLALOC_INSTALL_FULL_DATADIR).size() > 0)
    try_path(fs::path(TLALOC_INSTALL_FULL_DATADIR) / installed_rel,
             "the configured install prefix");
  return search;
}

struct InitArgs {
  std::string preset, config, out_dir, dtype, tokenizer;
  uint64_t seed = 0;
};

int RunInitModel(const InitArgs& a) {
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    std::fprintf(stderr, "tlaloc init-model: %s\n", msg.c_str());
    return code;
  };
  if (a.preset.empty() == a.config.empty())
    return fail("give exactly one of --preset or --config", kExitUsage);
  StatusOr<io::ModelConfig> config =
      a.preset.empty() ? io::LoadModelConfig(a.config) : models::PresetConfig(a.preset);
  // An unknown --preset is a usage error; a --config file that does not load is a failure.
  if (!config.ok())
    return fail(config.status().message(), a.preset.empty() ? kExitFailure : kExitUsage);
  models::InitOptions opts;
  opts.seed = a.seed;
  auto dtype = ParseDtypeFlag(a.dtype);
  if (!dtype.ok()) return fail(dtype.status().message(), kExitUsage);
  if (*dtype) {
    opts.dtype = **dtype;
  } else {
    opts.dtype = config->dtype.value_or(ElementType::kF32);
    if (opts.dtype != ElementType::kBF16 && opts.dtype != ElementType::kF16)
      opts.dtype = ElementType::kF32;
  }
  auto family = models::FamilyOf(*config);
  if (!family.ok()) return fail(family.status().message());
  if (!a.tokenizer.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(a.tokenizer, ec))
      return fail("--tokenizer " + a.tokenizer + ": no such file (expected a tokenizer.json)",
                  kExitUsage);
    opts.tokenizer_json = a.tokenizer;
  } else if (!(*family)->builtin_tokenizer_json) {  // else the family writes its own
    const models::ModelFamily::TokenizerSearch& where = (*family)->tokenizer_search;
    TokenizerFound search = FindFamilyTokenizer(where);
    if (!search.found) {
      std::string msg =
          "cannot find " +
          (where.what.empty()
               ? "a tokenizer.json for model_type " + std::string((*family)->model_type)
               : std::string(where.what)) +
          (search.looked.empty() ? std::string(" (the family names no place)") : "; looked in:");
      for (const std::string& place : search.looked) msg += "\n  " + place;
      return fail(msg + "\npass --tokenizer PATH" +
                  (where.env_var.empty() ? "" : " or set " + std::string(where.env_var)));
    }
    opts.tokenizer_json = *search.found;
  }
  Status s = models::WriteRandomCheckpoint(*config, a.out_dir, opts);
  if (!s.ok()) return fail(s.message());
  std::fprintf(stderr, "tlaloc init-model: wrote %s (%lld parameters, %s)\n", a.out_dir.c_str(),
               static_cast<long long>(models::ParameterCount(*config)),
               std::string(MlirName(opts.dtype)).c_str());
  // Which tokenizer files came with it: the family's, over the given or built-in tokenizer.json.
  std::fprintf(stderr, "tlaloc init-model: tokenizer: %s, %s\n",
               opts.tokenizer_json.empty() ? "the family's built-in tokenizer.json"
                                           : opts.tokenizer_json.c_str(),
               std::string((*family)->tokenizer_note).c_str());
  return kExitOk;
}

}  // namespace

void RegisterInitModelCommand(CLI::App& app) {
  auto args = std::make_shared<InitArgs>();
  auto* cmd = app.add_subcommand("init-model", "Write a randomly initialised model checkpoint");
  // The embedded presets (src/models/presets/*.json) and registered families, not a copy of them.
  std::string presets, families;
  for (const std::string& name : models::PresetNames())
    presets += (presets.empty() ? "" : ", ") + name;
  for (std::string_view type : models::KnownModelTypes())
    families += (families.empty() ? "" : ", ") + std::string(type);
  cmd->add_option("--preset", args->preset, "one of: " + presets);
  cmd->add_option("--config", args->config,
                  "a config.json to initialise (model_type " + families + ")");
  cmd->add_option("out_dir", args->out_dir, "output folder")->required();
  cmd->add_option("--seed", args->seed, "initialisation seed");
  cmd->add_option("--dtype", args->dtype, "stored type: f32 or bf16 (default: the config's)");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json to copy into the folder (default: the family's: Qwen3's "
                  "data/qwen3/tokenizer.json, Llama's built-in byte-level one)");
  cmd->callback([args] { SetExitCode(RunInitModel(*args)); });
}

}  // namespace tlaloc::cli
