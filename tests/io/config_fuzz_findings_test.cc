// config.json inputs that model_config_fuzz found or that review found beside them
// (docs/RELIABILITY.md): each must be refused with a message naming the field, never crash,
// hang or overflow.
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/io/model_config.h"

namespace tlaloc::io {
namespace {

void ExpectRefused(const std::string& json, const std::string& needle) {
  auto config = ParseModelConfig(json, "found.json");
  ASSERT_FALSE(config.ok()) << json;
  EXPECT_NE(config.status().message().find(needle), std::string::npos)
      << config.status().ToString();
  EXPECT_NE(config.status().message().find("found.json"), std::string::npos)
      << config.status().ToString();
}

// json::value() threw nlohmann's type_error (an abort) for a rope_type that is not a string.
TEST(ConfigFuzzFindings, RopeTypeOfTheWrongTypeIsRefused) {
  ExpectRefused(R"({"model_type":"qwen3","rope_parameters":{"rope_type":1}})",
                "rope_parameters.rope_type must be a string");
}

// vocab_size x hidden_size overflowed int64: ParameterCount aborted in NumElements.
TEST(ConfigFuzzFindings, ParameterCountBeyondInt64IsRefused) {
  ExpectRefused(R"({"model_type":"qwen3","vocab_size":4611686018427387904,"hidden_size":4})",
                "parameters, more than Tlaloc supports");
}

// num_attention_heads x head_dim overflowed (signed overflow, undefined behaviour, in
// ExpectedTensors).
TEST(ConfigFuzzFindings, HeadsTimesHeadDimBeyondInt64IsRefused) {
  ExpectRefused(
      R"({"model_type":"qwen3","num_attention_heads":4611686018427387904,"num_key_value_heads":1})",
      "more than 2^63");
}

// 10^11 layers: deriving one layer type per layer ran out of memory (and time).
TEST(ConfigFuzzFindings, AbsurdLayerCountIsRefusedBeforeAnythingPerLayer) {
  ExpectRefused(R"({"model_type":"qwen3","num_hidden_layers":100000000000})",
                "num_hidden_layers 100000000000 is more than Tlaloc supports (65536)");
  ExpectRefused(R"({"model_type":"qwen3_moe","num_experts":100000000})",
                "num_experts 100000000 is more than Tlaloc supports");
}

}  // namespace
}  // namespace tlaloc::io
