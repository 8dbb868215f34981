#include "cli_options.h"

#include <cstdio>
#include <fstream>
#include <system_error>

#include "commands.h"
#include "tlaloc/io/hub_download.h"
#include "tlaloc/models/gguf_import.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc::cli {

namespace fs = std::filesystem;

namespace {
// --offline of the one command a process runs (AddModelOption binds it, ResolveModelFlag reads).
bool g_offline = false;
}  // namespace

void AddTargetOption(CLI::App* cmd, std::string* target) {
  cmd->add_option("--target", *target,
                  "where programs run: interp, cpu, xla-cpu, cuda, tpu or a PJRT plugin path "
                  "(default: $TLALOC_TARGET, else interp)");
  // Every command that builds programs takes --target, so the int8 form rides along with it.
  cmd->add_option_function<std::string>(
         "--int8-form",
         [](const std::string& value) {
           auto form = nn::ParseInt8Form(value, "--int8-form");
           if (!form.ok()) throw CLI::ValidationError("--int8-form", form.status().message());
           nn::SetInt8Form(*form);
         },
         "program form of int8 weight products: q8_0 (activations rounded to int8 per 32-block "
         "as llama.cpp's Q8_0, the composite tlaloc.int8_linear) or exact (dequantised weights, "
         "f32 products) (default: $TLALOC_INT8_ACTIVATIONS, else q8_0)")
      ->check(CLI::IsMember({"q8_0", "exact"}));
}

StatusOr<BackendChoice> BackendChoiceFromFlag(const std::string& target) {
  auto choice = target.empty() ? DefaultBackendChoice() : ParseBackendChoice(target);
  if (!choice.ok()) return choice.status().WithContext("--target");
  return choice;
}

StatusOr<std::optional<ElementType>> ParseDtypeFlag(const std::string& text,
                                                    const std::vector<ElementType>& allowed,
                                                    const std::string& flag) {
  if (text.empty()) return std::optional<ElementType>();
  struct Spelling {
    const char* short_name;
    const char* long_name;
    ElementType type;
  };
  static const Spelling kSpellings[] = {{"f32", "float32", ElementType::kF32},
                                        {"f16", "float16", ElementType::kF16},
                                        {"bf16", "bfloat16", ElementType::kBF16}};
  std::string expected;
  for (const Spelling& s : kSpellings) {
    bool ok = false;
    for (ElementType t : allowed) ok = ok || t == s.type;
    if (!ok) continue;
    if (text == s.short_name || text == s.long_name) return std::optional<ElementType>(s.type);
    expected += std::string(expected.empty() ? "" : ", ") + s.short_name;
  }
  return InvalidArgument(flag + " \"" + text + "\": expected one of " + expected);
}

void AddKvDtypeOption(CLI::App* cmd, std::string* kv_dtype) {
  cmd->add_option("--kv-dtype", *kv_dtype,
                  "KV cache type: the model's (default), or bf16 for an f32 model (half the "
                  "cache's memory and of what each decode step reads; queries, keys and values "
                  "rounded to bf16 in attention, as llama.cpp's default f16 cache rounds them)");
}

StatusOr<std::optional<ElementType>> ParseKvDtypeFlag(const std::string& text) {
  return ParseDtypeFlag(text, {ElementType::kF32, ElementType::kBF16}, "--kv-dtype");
}

Status ApplyKvDtype(std::optional<ElementType> kv_dtype, generate::Engine& engine) {
  if (!kv_dtype) return OkStatus();
  Status status = engine.SetKvDtype(*kv_dtype);
  if (!status.ok()) return status.WithContext("--kv-dtype");
  return OkStatus();
}

CLI::Option* AddModelOption(CLI::App* cmd, std::string* model) {
  cmd->add_flag("--offline", g_offline,
                "never download: ORG/NAME must already be in the Hugging Face cache (also "
                "HF_HUB_OFFLINE=1)");
  return cmd
      ->add_option("-m,--model", *model,
                   "the model: a Hugging Face checkpoint folder (config.json, *.safetensors, "
                   "tokenizer.json), a llama / qwen3 / qwen3moe GGUF file (imported into a cached "
                   "folder on first use: $TLALOC_GGUF_CACHE, else ~/.cache/tlaloc/gguf), or "
                   "ORG/NAME[@REVISION] from the Hugging Face cache, downloaded from the Hub "
                   "($HF_ENDPOINT, token $HF_TOKEN) when missing")
      ->required();
}

CLI::Option* AddThreadsOption(CLI::App* cmd, std::optional<int>* threads) {
  // Bounded so that a typo cannot ask for a million threads.
  return cmd
      ->add_option("-t,--threads", *threads,
                   "interpreter threads, 0 for one per core (default: $TLALOC_NUM_THREADS, else "
                   "one per core)")
      ->check(CLI::Range(0, 4096));
}

Status ApplyThreads(std::optional<int> threads) {
  if (!threads) return OkStatus();
  if (*threads < 0)
    return InvalidArgument("--threads " + std::to_string(*threads) +
                           ": expected 0 (one per core) or more");
  Status status = SetDefaultThreadPoolSize(*threads);
  if (!status.ok()) return status.WithContext("--threads");
  return OkStatus();
}

bool IsGgufFile(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  if (path.extension() == ".gguf") return true;
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

Status CheckModelFolder(const std::string& flag, const fs::path& path) {
  std::error_code ec;
  const std::string what = flag + " " + path.string();
  if (fs::is_directory(path, ec)) return OkStatus();
  if (!fs::exists(path, ec))
    return NotFound(what + " does not exist (expected a Hugging Face checkpoint folder)");
  if (IsGgufFile(path))
    return InvalidArgument(what +
                           " is a GGUF file; this command takes a Hugging Face checkpoint folder "
                           "(config.json, *.safetensors, tokenizer.json); generate, chat, serve "
                           "and bench run GGUF files with -m");
  return InvalidArgument(what +
                         " is not a folder: expected a Hugging Face checkpoint folder "
                         "(config.json, *.safetensors, tokenizer.json) or a GGUF file");
}

StatusOr<fs::path> ResolveModelFlag(const std::string& value) {
  io::HubDownloadOptions options;
  options.offline = g_offline;
  auto path = io::ResolveOrDownloadModel(value, options);
  if (!path.ok()) return path.status().WithContext("--model");
  if (IsGgufFile(*path)) {
    // Imported into a checkpoint folder in a cache on first use (models/gguf_import.h).
    auto folder = models::GgufModelFolder(*path, [&](const fs::path& dir) {
      std::fprintf(stderr, "tlaloc: importing %s into %s (first use; later runs reuse it)\n",
                   path->string().c_str(), dir.string().c_str());
    });
    if (!folder.ok()) return folder.status().WithContext("--model");
    return folder;
  }
  TL_RETURN_IF_ERROR(CheckModelFolder("--model", *path));
  return path;
}

int ExitCodeForFlagError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

}  // namespace tlaloc::cli
