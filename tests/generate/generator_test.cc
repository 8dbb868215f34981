// The decode loop on tiny random models: greedy text equals the reference model's greedy
// continuation, batches decode like single prompts, stop conditions, checkpoint loading and
// its errors.
#include "tlaloc/generate/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "models/qwen3_reference.h"
#include "tlaloc/generate/text_generation.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/init.h"
#include "tokenizer/test_util.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;
using testing::RandomModel;
using testing::RefForward;
using testing::RefModel;
using testing::TinyConfig;

std::unique_ptr<generate::Generator> MakeGenerator(const RefModel& m) {
  auto g = generate::Generator::Create(m.config, m.literals, ElementType::kF32);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(*g) : nullptr;
}

std::vector<int32_t> RefGreedy(const RefModel& m, std::vector<int32_t> seq, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    auto logits = RefForward(m, seq).back();
    int32_t id =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(id);
    seq.push_back(id);
  }
  return out;
}

fs::path TempDir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("tlaloc_gen_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Generator, GreedyBatchMatchesReferenceAndSinglePrompts) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 21);
  auto g = MakeGenerator(m);
  ASSERT_TRUE(g);
  std::vector<std::vector<int32_t>> prompts{{3, 14, 15, 92, 65}, {35, 89}, {79, 32, 38, 46}};
  generate::GenerateOptions opts;
  opts.max_new_tokens = 6;
  std::vector<std::vector<int32_t>> streamed(prompts.size());
  generate::GenerateTimings tm;
  auto res = g->Generate(
      prompts, opts, [&](size_t r, int32_t id) { streamed[r].push_back(id); }, &tm);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  for (size_t r = 0; r < prompts.size(); ++r) {
    const auto& got = (*res)[r];
    EXPECT_EQ(got.generated_ids, RefGreedy(m, prompts[r], 6)) << "row " << r;
    EXPECT_EQ(got.finish_reason, generate::FinishReason::kLength);
    EXPECT_EQ(streamed[r], got.generated_ids);
    auto single = g->Generate({prompts[r]}, opts);
    ASSERT_TRUE(single.ok()) << single.status().ToString();
    EXPECT_EQ((*single)[0].generated_ids, got.generated_ids) << "row " << r << " alone";
  }
  EXPECT_EQ(tm.prefill_tokens, 11);
  EXPECT_EQ(tm.decode_tokens, 15);
}

TEST(Generator, StopsAtEndTokenPerRow) {
  RefModel m = RandomModel(TinyConfig(true, 4, 2, 8), 23);
  auto g = MakeGenerator(m);
  ASSERT_TRUE(g);
  std::vector<std::vector<int32_t>> prompts{{5, 6, 7}, {60, 61}};
  auto ref0 = RefGreedy(m, prompts[0], 5), ref1 = RefGreedy(m, prompts[1], 5);
  generate::GenerateOptions opts;
  opts.max_new_tokens = 5;
  opts.eos_token_ids = {ref0[2]};  // row 0 ends at its third token
  auto res = g->Generate(prompts, opts);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ((*res)[0].finish_reason, generate::FinishReason::kStop);
  EXPECT_EQ((*res)[0].generated_ids, std::vector<int32_t>(ref0.begin(), ref0.begin() + 3));
  // Row 1 continues unless it produces the same id.
  auto it = std::find(ref1.begin(), ref1.end(), ref0[2]);
  std::vector<int32_t> expect1(ref1.begin(), it == ref1.end() ? ref1.end() : it + 1);
  EXPECT_EQ((*res)[1].generated_ids, expect1);
}

TEST(Generator, SeededSamplingIsReproducible) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 29);
  auto g = MakeGenerator(m);
  ASSERT_TRUE(g);
  generate::GenerateOptions opts;
  opts.max_new_tokens = 8;
  opts.sampling = nn::SamplingParams{1.2, 20, 0.95};
  opts.seed = 1234;
  auto a = g->Generate({{1, 2, 3}}, opts), b = g->Generate({{1, 2, 3}}, opts);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].generated_ids, (*b)[0].generated_ids);
  opts.seed = 99;
  auto c = g->Generate({{1, 2, 3}}, opts);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*a)[0].generated_ids, (*c)[0].generated_ids) << "another seed, another sample";
}

TEST(Generator, DecodeStepsUpdateTheDonatedCachesInPlace) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 37);
  auto g = MakeGenerator(m);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->backend().name(), "interp");
  auto first = g->Prefill({{5, 6, 7, 8}}, 64, {}, 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(g->caches().size(), 2u * m.config.num_hidden_layers);
  std::vector<const void*> storage;
  for (const auto& c : g->caches()) {
    ASSERT_NE(c->host_data(), nullptr);
    storage.push_back(c->host_data());
  }
  std::vector<int32_t> tokens = first->tokens;
  for (int32_t pos = 4; pos < 8; ++pos) {
    auto next = g->DecodeStep(tokens, {pos}, {}, 0, static_cast<uint32_t>(pos));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    tokens = next->tokens;
    ASSERT_EQ(g->caches().size(), storage.size());
    for (size_t i = 0; i < storage.size(); ++i)
      EXPECT_EQ(g->caches()[i]->host_data(), storage[i])
          << "cache " << i << " was copied at position " << pos;
  }
  // Programs are cached by shape: one prefill, one decode step.
  EXPECT_EQ(g->num_compiled_programs(), 2u);
  // A position outside the cache is refused before anything runs.
  auto bad = g->DecodeStep(tokens, {64}, {}, 0, 9);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside the context"), std::string::npos);
}

TEST(Generator, PromptLongerThanContextIsAnError) {
  io::ModelConfig c = TinyConfig(false, 4, 2, 8);
  c.max_position_embeddings = 16;
  RefModel m = RandomModel(c, 1);
  auto g = MakeGenerator(m);
  ASSERT_TRUE(g);
  auto res = g->Generate({std::vector<int32_t>(20, 3)}, {});
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("longer than the model's context"), std::string::npos)
      << res.status().ToString();
}

TEST(Generator, LoadsCheckpointFolderAsStoredAndConverted) {
  io::ModelConfig c = TinyConfig(false, 4, 2, 8);
  fs::path dir = TempDir("load");
  models::InitOptions init;
  init.seed = 5;
  ASSERT_TRUE(models::WriteRandomCheckpoint(c, dir, init).ok());
  for (ElementType et : {ElementType::kF32, ElementType::kBF16}) {
    auto g = generate::Generator::Load(dir, et);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ((*g)->dtype(), et);
    generate::GenerateOptions opts;
    opts.max_new_tokens = 3;
    auto res = (*g)->Generate({{4, 5, 6}}, opts);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    EXPECT_EQ((*res)[0].generated_ids.size(), 3u);
  }
  fs::remove_all(dir);
}

TEST(Generator, LoadErrorsNameTheProblem) {
  io::ModelConfig c = TinyConfig(false, 4, 2, 8);
  fs::path dir = TempDir("errors");
  ASSERT_TRUE(io::WriteModelConfig(dir / "config.json", c).ok());
  auto expect_error = [&](const std::string& what) {
    auto g = generate::Generator::Load(dir);
    ASSERT_FALSE(g.ok()) << what;
    EXPECT_NE(g.status().message().find(what), std::string::npos) << g.status().ToString();
  };
  expect_error("has no weights");

  // A checkpoint missing one tensor, then one with a wrong shape.
  auto weights = models::RandomWeights(c, 1, ElementType::kF32);
  std::vector<io::NamedTensor> missing(weights.begin(), weights.end());
  missing.erase(missing.begin() + 3);
  const std::string dropped = weights[3].name;
  ASSERT_TRUE(io::WriteCheckpoint(dir, missing).ok());
  expect_error("missing tensor \"" + dropped + "\"");
  std::vector<io::NamedTensor> wrong(weights.begin(), weights.end());
  wrong[0].value = Literal(TensorType(ElementType::kF32, {c.vocab_size, c.hidden_size + 1}));
  ASSERT_TRUE(io::WriteCheckpoint(dir, wrong).ok());
  expect_error("has shape [96, 33], expected [96, 32]");

  {
    std::ofstream f(dir / "config.json");
    f << R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})";
  }
  auto g = generate::Generator::Load(dir);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("GPT2LMHeadModel"), std::string::npos)
      << g.status().ToString();
  fs::remove_all(dir);
  auto none = generate::Generator::Load(dir);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("does not exist"), std::string::npos);
}

TEST(Generator, Bf16LogitsTrackF32) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 31);
  std::vector<Literal> bf16;
  for (const auto& w : m.literals) bf16.push_back(ConvertElementType(w, ElementType::kBF16));
  auto g32 = MakeGenerator(m);
  auto g16 = generate::Generator::Create(m.config, bf16, ElementType::kBF16);
  ASSERT_TRUE(g32 && g16.ok()) << g16.status().ToString();
  std::vector<std::vector<int32_t>> p{{9, 8, 7, 6, 5}};
  auto a = g32->Prefill(p, 16, {}, 0);
  auto b = (*g16)->Prefill(p, 16, {}, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  auto x = a->logits.span<float>(), y = b->logits.span<float>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += x[i] * x[i];
  }
  // bf16 keeps 8 bits of mantissa: a few percent of relative error, not more.
  EXPECT_LT(std::sqrt(num / den), 0.05);
  EXPECT_GT(num, 0.0) << "bf16 should actually round something";
}

TEST(Presets, ShapesOfTheRealModel) {
  auto c = models::PresetConfig("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(models::ParameterCount(*c), 596049920);
  auto tiny = models::PresetConfig("tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_FALSE(tiny->tie_word_embeddings);
  EXPECT_EQ(tiny->vocab_size, 151936);
  auto bad = models::PresetConfig("gpt2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("qwen3-0.6b"), std::string::npos);
}

// The LM head's rows past a tokenizer's ids are never produced, greedy or sampled, while the
// logits the step returns stay unmasked (llama.cpp parity compares them).
TEST(Generator, SampleVocabKeepsIdsInsideTheTokenizer) {
  RefModel m = RandomModel(TinyConfig(false, 4, 2, 8), 31);
  auto g = MakeGenerator(m);
  ASSERT_TRUE(g);
  const std::vector<int32_t> prompt{7, 8, 9};
  const auto ref_logits = RefForward(m, prompt).back();
  const int32_t free_pick = static_cast<int32_t>(
      std::max_element(ref_logits.begin(), ref_logits.end()) - ref_logits.begin());
  ASSERT_GT(free_pick, 0) << "pick another seed: the unmasked argmax must not be id 0";
  // Forbid the unmasked choice and everything above it.
  g->set_sample_vocab(free_pick);
  const int32_t masked_pick = static_cast<int32_t>(
      std::max_element(ref_logits.begin(), ref_logits.begin() + free_pick) - ref_logits.begin());
  auto out = g->Prefill({prompt}, 64, nn::SamplingParams{}, 0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->tokens[0], masked_pick);
  auto logits = out->logits.span<float>();
  EXPECT_NEAR(logits[free_pick], ref_logits[free_pick], 1e-4) << "returned logits are unmasked";
  nn::SamplingParams hot;
  hot.temperature = 5.0;  // flat enough that unmasked draws would land above the limit often
  generate::GenerateOptions opts;
  opts.max_new_tokens = 8;
  opts.sampling = hot;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    opts.seed = seed;
    auto res = g->Generate({prompt}, opts);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    for (int32_t id : (*res)[0].generated_ids) EXPECT_LT(id, free_pick) << "seed " << seed;
  }
}

TEST(Generator, StopRequestAndContextLimitEndRows) {
  RefModel m = RandomModel(TinyConfig(true, 4, 2, 8), 33);
  auto g = MakeGenerator(m);
  ASSERT_TRUE(g);
  generate::GenerateOptions opts;
  opts.max_new_tokens = 20;
  size_t seen = 0;
  opts.stop_requested = [&](size_t) { return ++seen == 3; };
  auto stopped = g->Generate({{1, 2, 3}}, opts);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ((*stopped)[0].generated_ids.size(), 3u);
  EXPECT_EQ((*stopped)[0].finish_reason, generate::FinishReason::kStop);
  opts.stop_requested = nullptr;
  opts.max_context = 8;  // 3 prompt tokens leave room for 5
  auto limited = g->Generate({{1, 2, 3}}, opts);
  ASSERT_TRUE(limited.ok()) << limited.status().ToString();
  EXPECT_EQ((*limited)[0].generated_ids.size(), 5u);
  EXPECT_EQ((*limited)[0].finish_reason, generate::FinishReason::kLength);
  EXPECT_EQ(g->ContextLimit(opts), 8);
  opts.max_context = 0;
  EXPECT_EQ(g->ContextLimit(opts), m.config.max_position_embeddings);
  // A context past the trained length is honoured (RoPE extends there), not lowered to it.
  const int64_t trained = m.config.max_position_embeddings;
  opts.max_context = trained + 8;
  EXPECT_EQ(g->ContextLimit(opts), trained + 8);
  opts.max_new_tokens = trained + 5;  // 3 prompt tokens: the context's last position is reached
  auto past = g->Generate({{1, 2, 3}}, opts);
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  EXPECT_EQ(static_cast<int64_t>((*past)[0].generated_ids.size()), trained + 5);
  EXPECT_EQ((*past)[0].finish_reason, generate::FinishReason::kLength);
}

// A request with neither a budget nor a context may run to the context's end, whose KV cache is
// reserved up front: it gets kOpenEndedContext positions, not the model's whole trained length.
TEST(TextGeneration, OpenEndedRequestsGetTheDefaultContext) {
  io::ModelConfig config = TinyConfig(false, 4, 2, 8);
  config.vocab_size = 256;  // the byte tokenizer's ids
  config.max_position_embeddings = 3 * generate::kOpenEndedContext;
  RefModel m = RandomModel(config, 5);
  auto gen = generate::Generator::Create(m.config, m.literals, ElementType::kF32);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto tok = Tokenizer::FromJson(testing::SmallTokenizerJson({}).dump());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  generate::TextGenerator text(std::move(*gen), std::move(*tok), io::GenerationConfig{});
  generate::TextRequest r;
  r.prompt = "abc";
  auto open = text.Prepare(r);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_EQ(open->context, generate::kOpenEndedContext);
  EXPECT_EQ(open->max_new_tokens, generate::kOpenEndedContext - 3);
  r.max_context = 2 * generate::kOpenEndedContext;  // -c asks for more: honoured
  auto asked = text.Prepare(r);
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_EQ(asked->context, 2 * generate::kOpenEndedContext);
  r.max_context = 0;
  r.max_new_tokens = 8;  // a budget: the model's own context, as before
  auto budgeted = text.Prepare(r);
  ASSERT_TRUE(budgeted.ok()) << budgeted.status().ToString();
  EXPECT_EQ(budgeted->context, config.max_position_embeddings);
  EXPECT_EQ(budgeted->max_new_tokens, 8);
}

// The sampling controls: a request's values win; unset ones take generation_config.json's
// repetition_penalty always and its min_p when it samples (as transformers' generate); values out
// of range are refused naming the field.
TEST(TextGeneration, SamplingControlsMergeWithTheGenerationConfig) {
  io::ModelConfig config = TinyConfig(false, 4, 2, 8);
  config.vocab_size = 256;  // the byte tokenizer's ids
  RefModel m = RandomModel(config, 5);
  auto gen = generate::Generator::Create(m.config, m.literals, ElementType::kF32);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto tok = Tokenizer::FromJson(testing::SmallTokenizerJson({}).dump());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  io::GenerationConfig g;
  g.do_sample = true;
  g.temperature = 0.7;
  g.repetition_penalty = 1.1;
  g.min_p = 0.02;
  generate::TextGenerator text(std::move(*gen), std::move(*tok), g);
  generate::TextRequest r;
  auto p = text.Sampling(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->repetition_penalty, 1.1);
  EXPECT_EQ(p->min_p, 0.02);
  EXPECT_EQ(p->presence_penalty, 0.0);
  EXPECT_TRUE(p->logit_bias.empty());
  r.repetition_penalty = 1.0;
  r.min_p = 0.0;
  r.presence_penalty = -1.5;
  r.frequency_penalty = 0.25;
  r.logit_bias = {{65, -100.f}};
  p = text.Sampling(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->repetition_penalty, 1.0);
  EXPECT_EQ(p->min_p, 0.0);
  EXPECT_EQ(p->presence_penalty, -1.5);
  EXPECT_EQ(p->frequency_penalty, 0.25);
  EXPECT_EQ(p->logit_bias, r.logit_bias);
  EXPECT_TRUE(p->penalized());
  auto refused = [&](generate::TextRequest bad, const std::string& field) {
    auto s = text.Sampling(bad);
    ASSERT_FALSE(s.ok()) << field;
    EXPECT_EQ(s.status().message().rfind(field, 0), 0u) << s.status().message();
  };
  generate::TextRequest bad;
  bad.min_p = 1.5;
  refused(bad, "min_p");
  bad = {};
  bad.repetition_penalty = 0;
  refused(bad, "repetition_penalty");
  bad = {};
  bad.frequency_penalty = std::nan("");
  refused(bad, "frequency_penalty");
  bad = {};
  bad.logit_bias = {{256, 1.f}};  // past the byte tokenizer's 256 ids
  refused(bad, "logit_bias");
}

TEST(TextGeneration, ConversationsRenderWithTheChatTemplate) {
  io::ModelConfig config = TinyConfig(false, 4, 2, 8);
  config.vocab_size = 256;  // the byte tokenizer's ids
  RefModel m = RandomModel(config, 5);
  auto make = [&](StatusOr<ChatTemplate> chat) {
    auto gen = generate::Generator::Create(m.config, m.literals, ElementType::kF32);
    EXPECT_TRUE(gen.ok()) << gen.status().ToString();
    auto tok = Tokenizer::FromJson(testing::SmallTokenizerJson({}).dump());
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    return std::make_unique<generate::TextGenerator>(std::move(*gen), std::move(*tok),
                                                     io::GenerationConfig{}, std::move(chat));
  };
  generate::TextRequest r;
  r.messages = {{"user", "hi", {}}};
  r.enable_thinking = false;
  r.tools = nlohmann::ordered_json::parse(R"([{"name": "f"}, {"name": "g"}])");
  r.chat_template_kwargs = {{"mood", "calm"}};
  auto text = make(ChatTemplate::FromSource(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}|"
      "{{ tools | map(attribute='name') | join(',') }}|{{ mood }}|{{ enable_thinking }}|"
      "{{ add_generation_prompt }}",
      {{"bos_token", "<s>"}}));
  auto prep = text->Prepare(r);
  ASSERT_TRUE(prep.ok()) << prep.status().ToString();
  EXPECT_EQ(*text->tokenizer().Decode(prep->prompt_ids), "<s>user:hi|f,g|calm|False|True");
  // Without a template, a conversation is refused with the reason; a prompt still works.
  auto bare = make(Status(StatusCode::kNotFound, "/m has no chat template"));
  auto refused = bare->Prepare(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("/m has no chat template"), std::string::npos);
  generate::TextRequest p;
  p.prompt = "abc";
  EXPECT_TRUE(bare->Prepare(p).ok());
}

TEST(TextGeneration, StopPrefixHeldBack) {
  using generate::StopPrefixHeldBack;
  EXPECT_EQ(StopPrefixHeldBack("hello wor", {"world"}), 3u);
  EXPECT_EQ(StopPrefixHeldBack("hello", {"world"}), 0u);
  EXPECT_EQ(StopPrefixHeldBack("abcab", {"abc", "bx"}), 2u);  // "ab" starts "abc"
  EXPECT_EQ(StopPrefixHeldBack("xx\n", {"\n\n", "END"}), 1u);
  EXPECT_EQ(StopPrefixHeldBack("EN", {"END"}), 2u);
  EXPECT_EQ(StopPrefixHeldBack("anything", {}), 0u);
}

}  // namespace
}  // namespace tlaloc
