// `tlaloc export gguf DIR OUT.gguf [--dtype f32|f16|bf16] [--name NAME]`: writes a Qwen3
// checkpoint folder as a GGUF file for llama.cpp and Ollama. Exit status 0 on success, 1 when
// the folder cannot be exported (the message names the problem), 2 for a bad --dtype or one that
// conflicts with the folder (an int8 checkpoint is exported as it is).
#include <cstdio>
#include <memory>
#include <string>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/models/gguf_export.h"

namespace tlaloc::cli {

namespace {

struct ExportGgufArgs {
  std::string dir, out, dtype, name;
};

int RunExportGguf(const ExportGgufArgs& a) {
  models::GgufExportOptions options;
  options.name = a.name;
  auto dtype = ParseDtypeFlag(a.dtype, {ElementType::kF32, ElementType::kF16, ElementType::kBF16});
  if (!dtype.ok()) {
    std::fprintf(stderr, "tlaloc export gguf: %s\n", dtype.status().message().c_str());
    return kExitUsage;
  }
  if (*dtype) options.dtype = **dtype;
  // Conflicting options are a usage error (exit 2, as README says), found before any work.
  if (auto config = io::LoadModelConfig(a.dir);
      options.dtype && config.ok() && config->quantization) {
    std::fprintf(stderr,
                 "tlaloc export gguf: --dtype %s with an int8 checkpoint (%s): its matrices are "
                 "exported as Q8_0 as they are; leave --dtype out, or export the float "
                 "checkpoint it was made from\n",
                 a.dtype.c_str(), a.dir.c_str());
    return kExitUsage;
  }
  auto summary = models::ExportGguf(a.dir, a.out, options);
  if (!summary.ok()) {
    std::fprintf(stderr, "tlaloc export gguf: %s\n", summary.status().message().c_str());
    return kExitFailure;
  }
  std::fprintf(stderr,
               "tlaloc export gguf: wrote %s (%lld tensors, %.1f MB of weights, %lld tokens%s%s)\n",
               a.out.c_str(), static_cast<long long>(summary->tensors),
               static_cast<double>(summary->tensor_bytes) / 1e6,
               static_cast<long long>(summary->vocab_tokens),
               summary->tied_output ? ", head tied to the embedding" : "",
               summary->chat_template ? ", chat template" : "");
  return kExitOk;
}

}  // namespace

void RegisterExportCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a checkpoint in another tool's format");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ExportGgufArgs>();
  auto* gguf = cmd->add_subcommand(
      "gguf", "Write a Qwen3 checkpoint folder as a GGUF file (llama.cpp, Ollama)");
  gguf->add_option("DIR", args->dir,
                   "Checkpoint folder (config.json, *.safetensors, tokenizer.json)")
      ->required();
  gguf->add_option("OUT", args->out, "The .gguf file to write")->required();
  gguf->add_option("--dtype", args->dtype,
                   "Type of the weight matrices: f32, f16 or bf16 (default: as stored; 1-D norm "
                   "weights stay f32)");
  gguf->add_option("--name", args->name, "general.name (default: the folder's name)");
  gguf->callback([args] { SetExitCode(RunExportGguf(*args)); });
}

}  // namespace tlaloc::cli
