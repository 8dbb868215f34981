// Every model family Tlaloc runs: one line each. (An explicit list rather than static
// registration objects, which a static library's linker would drop.)
#include "models/families.h"

#include "models/llama/llama_family.h"
#include "models/qwen3/qwen3_family.h"

namespace tlaloc::models {

void RegisterFamilies(std::vector<ModelFamily>& registry) {
  qwen3::Register(registry);  // qwen3 and qwen3_moe
  llama::Register(registry);
}

}  // namespace tlaloc::models
