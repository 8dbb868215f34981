// libFuzzer target for config.json and generation_config.json. The first input byte picks the
// file: even, the rest is a config.json (`ParseModelConfig`); odd, a generation_config.json
// (`ParseGenerationConfig`). Anything must parse or yield an error Status; what parses must pass
// validation, print, parse again to the same text, and (config.json) have a positive parameter
// count that equals the sum over its expected tensors.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/models/family.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "model_config_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void CheckModelConfig(std::string_view text) {
  auto config = tlaloc::io::ParseModelConfig(text, "fuzz");
  if (!config.ok()) return;
  if (auto valid = tlaloc::io::ValidateModelConfig(*config); !valid.ok())
    Fail("parsed config fails validation", valid.ToString());
  const std::string json = tlaloc::io::ModelConfigToJson(*config);
  auto again = tlaloc::io::ParseModelConfig(json, "round trip");
  if (!again.ok()) Fail("printed config does not parse", again.status().ToString() + "\n" + json);
  if (tlaloc::io::ModelConfigToJson(*again) != json) Fail("round trip changed the config", json);
  const int64_t params = tlaloc::io::CountParameters(*config).value_or(-1);
  if (params <= 0) Fail("parameter count is not positive", json);
  // Listing every tensor is linear in layers x experts; only for small models.
  double experts = 0;
  for (int64_t l = 0; l < config->num_hidden_layers; ++l)
    experts = std::max(experts, static_cast<double>(config->FeedForwardOf(l).experts));
  if (static_cast<double>(config->num_hidden_layers) * (experts + 1) > 4096) return;
  int64_t sum = 0;
  for (const auto& t : tlaloc::models::ExpectedTensors(*config)) {
    if (!tlaloc::ShapeFits(t.shape, 1)) Fail("expected tensor shape overflows", t.name);
    if (!t.optional) sum += tlaloc::NumElements(t.shape);
  }
  if (sum != params) Fail("parameter count differs from the tensors' sum", json);
}

void CheckGenerationConfig(std::string_view text) {
  auto config = tlaloc::io::ParseGenerationConfig(text, "fuzz");
  if (!config.ok()) return;
  const std::string json = tlaloc::io::GenerationConfigToJson(*config);
  auto again = tlaloc::io::ParseGenerationConfig(json, "round trip");
  if (!again.ok()) Fail("printed generation config does not parse", again.status().ToString());
  if (tlaloc::io::GenerationConfigToJson(*again) != json)
    Fail("round trip changed the generation config", json);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tlaloc::models::RegisterModelFamilies();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0)
    CheckModelConfig(text);
  else
    CheckGenerationConfig(text);
  return 0;
}
