// `tlaloc quantize IN_DIR OUT_DIR --dtype int8`: writes the int8 weight-only form of a Qwen3
// checkpoint folder (models/quantize.h; docs/performance.md "int8 weights"). Exit status 0 on
// success, 1 when the folder cannot be quantized (the message names the problem), 2 for an
// unsupported --dtype.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/models/quantize.h"

namespace tlaloc::cli {

namespace {

struct QuantizeArgs {
  std::string in, out, dtype = "int8";
};

int RunQuantize(const QuantizeArgs& a) {
  if (a.dtype != "int8") {
    std::fprintf(stderr, "tlaloc quantize: --dtype \"%s\" is not supported (expected int8)\n",
                 a.dtype.c_str());
    return kExitUsage;
  }
  auto summary = models::QuantizeCheckpoint(a.in, a.out);
  if (!summary.ok()) {
    std::fprintf(stderr, "tlaloc quantize: %s\n", summary.status().message().c_str());
    return kExitFailure;
  }
  std::fprintf(stderr,
               "tlaloc quantize: wrote %s (%lld int8 matrices with f16 scales per %lld inputs, "
               "%lld tensors kept; %.1f MB -> %.1f MB; largest weight error %.3g)\n",
               a.out.c_str(), static_cast<long long>(summary->quantized_tensors),
               static_cast<long long>(kQ8_0BlockElements),
               static_cast<long long>(summary->kept_tensors),
               static_cast<double>(summary->bytes_in) / 1e6,
               static_cast<double>(summary->bytes_out) / 1e6, summary->max_abs_error);
  return kExitOk;
}

}  // namespace

void RegisterQuantizeCommand(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand(
      "quantize", "Write a checkpoint folder with int8 weight matrices (f16 scales per " +
                      std::to_string(kQ8_0BlockElements) + " inputs, GGUF Q8_0's blocks)");
  cmd->add_option("IN_DIR", args->in, "Checkpoint folder (config.json, *.safetensors)")->required();
  cmd->add_option("OUT_DIR", args->out, "Folder to write (absent or empty)")->required();
  cmd->add_option("--dtype", args->dtype, "Weight type of the matrices: int8")
      ->capture_default_str();
  cmd->callback([args] { SetExitCode(RunQuantize(*args)); });
}

}  // namespace tlaloc::cli
