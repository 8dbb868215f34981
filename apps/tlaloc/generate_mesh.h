// `tlaloc generate --mesh model=N`: greedy generation with the weights split over N devices of
// the interpreter or of a PJRT target (tensor parallelism, generate/tensor_parallel.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tlaloc::cli {

struct MeshGenerateArgs {
  std::string model_dir;  // resolved checkpoint folder
  std::string mesh;
  std::string target;        // --target: "" or interp, or a PJRT target (one process only)
  std::string prompt, chat;  // one of them (the CLI read stdin into prompt otherwise)
  std::optional<int64_t> max_new_tokens;
  std::optional<double> temperature;
};

// Exit code: usage errors (a sampled request, a bad mesh) are kExitUsage.
int RunMeshGenerate(const MeshGenerateArgs& args);

}  // namespace tlaloc::cli
