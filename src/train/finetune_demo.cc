// The demonstration's byte tokenizer, model config and generated tasks (see finetune.h).
#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "tlaloc/models/init.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/train/finetune.h"

namespace tlaloc::train {

namespace {

using json = nlohmann::json;

json AddedToken(int id, const char* content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// Questions of the letter tasks have one fixed length: the answer's characters then sit at a
// fixed distance from their sources, which a two-layer model picks up within a few hundred
// steps (with 3 to 5 letters it had learnt only the lengths after 500).
constexpr int kLetters = 4;

std::string RandomLetters(std::mt19937_64& rng) {
  std::string s;
  for (int i = 0; i < kLetters; ++i) s += static_cast<char>('a' + rng() % 26);
  return s;
}

}  // namespace

std::string ByteTokenizerJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelSymbol(static_cast<uint8_t>(b))] = b;
  json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", false},
                     {"use_regex", false}};
  json j = {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens",
             json::array({AddedToken(256, "<|endoftext|>"), AddedToken(257, "<|im_start|>"),
                          AddedToken(258, "<|im_end|>")})},
            {"normalizer", nullptr},
            {"pre_tokenizer", byte_level},
            {"post_processor", nullptr},
            {"decoder", byte_level},
            {"model",
             {{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", false},
              {"byte_fallback", false},
              {"ignore_merges", false},
              {"vocab", vocab},
              {"merges", json::array()}}}};
  return j.dump();
}

io::ModelConfig DemoModelConfig() {
  io::ModelConfig c = *models::PresetConfig("tiny");
  c.vocab_size = 259;
  c.bos_token_id = 256;
  c.eos_token_ids = {258};
  c.pad_token_id = 256;
  c.max_position_embeddings = 512;
  return c;
}

StatusOr<DemoTask> MakeDemoTask(const std::string& name, int64_t train_size, int64_t held_out,
                                uint64_t seed) {
  if (train_size <= 0 || held_out <= 0) return InvalidArgument("demo task sizes must be positive");
  std::mt19937_64 rng(seed);
  std::function<DemoExample()> draw;
  DemoTask task;
  if (name == "reverse") {
    task.description = "reverse four lower-case letters";
    draw = [&rng] {
      std::string q = RandomLetters(rng);
      return DemoExample{q, std::string(q.rbegin(), q.rend())};
    };
  } else if (name == "upper") {
    task.description = "upper-case four lower-case letters";
    draw = [&rng] {
      std::string q = RandomLetters(rng);
      std::string a = q;
      for (char& c : a) c = static_cast<char>(c - 'a' + 'A');
      return DemoExample{q, a};
    };
  } else if (name == "add") {
    task.description = "add two numbers below 50";
    draw = [&rng] {
      const int a = static_cast<int>(rng() % 50), b = static_cast<int>(rng() % 50);
      return DemoExample{std::to_string(a) + "+" + std::to_string(b), std::to_string(a + b)};
    };
  } else {
    return InvalidArgument("unknown demo task \"" + name + "\" (expected upper, reverse or add)");
  }
  // Held-out questions first, so training never sees them.
  std::set<std::string> held;
  for (int64_t tries = 0; static_cast<int64_t>(task.held_out.size()) < held_out; ++tries) {
    if (tries > 100 * held_out) return InvalidArgument("the task has too few distinct questions");
    DemoExample e = draw();
    if (held.insert(e.question).second) task.held_out.push_back(e);
  }
  for (int64_t tries = 0; static_cast<int64_t>(task.train.size()) < train_size; ++tries) {
    if (tries > 100 * train_size) return InvalidArgument("the task has too few distinct questions");
    DemoExample e = draw();
    if (!held.count(e.question)) task.train.push_back(e);
  }
  return task;
}

std::string ChatJsonl(const std::vector<DemoExample>& examples) {
  std::string out;
  for (const DemoExample& e : examples) {
    json row = {{"messages", json::array({{{"role", "user"}, {"content", e.question}},
                                          {{"role", "assistant"}, {"content", e.answer}}})}};
    out += row.dump() + "\n";
  }
  return out;
}

}  // namespace tlaloc::train
