// Parity with Hugging Face, run by tests/tokenizer/hf_encode.py in the checkout's venv:
//  - a deterministic corpus of >= 2,000 strings is encoded by `tokenizers` and by Tlaloc, and
//    every id sequence must be identical; each side decodes the ids to the same bytes, and
//    decode(encode(s)) == s for the well-formed NFC strings;
//  - conversations rendered by transformers' apply_chat_template (the Jinja chat template of
//    data/qwen3/tokenizer_config.json) must equal what Tlaloc's Jinja engine renders from the same
//    template byte for byte, and encode to the same ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "parity_corpus.h"
#include "test_util.h"
#include "tlaloc/tokenizer/chat.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

std::string Hex(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// A printable rendering of a string for failure messages.
std::string Escaped(std::string_view s) { return nlohmann::json(utf8::Repair(s)).dump(); }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch folder for one test, removed when it goes out of scope.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name)
      : path(fs::temp_directory_path() / ("tlaloc_" + name + "_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
};

// Runs hf_encode.py with `args` (already shell-quoted); its standard output, or a failure that
// shows the command and its standard error.
::testing::AssertionResult RunOracle(const fs::path& dir, const std::string& args,
                                     std::string* out) {
  const fs::path out_path = dir / "stdout.txt", err_path = dir / "stderr.txt";
  const std::string script = std::string(TLALOC_SOURCE_DIR) + "/tests/tokenizer/hf_encode.py";
  const std::string command = testing::OraclePython() + " '" + script + "' " + args + " > '" +
                              out_path.string() + "' 2> '" + err_path.string() + "'";
  if (std::system(command.c_str()) != 0)
    return ::testing::AssertionFailure() << command << " failed:\n" << ReadFile(err_path);
  *out = ReadFile(out_path);
  return ::testing::AssertionSuccess();
}

std::string Quoted(const fs::path& p) { return "'" + p.string() + "'"; }

TEST(ParityTest, IdsMatchHuggingFaceTokenizers) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  if (std::string why = testing::PythonMissing("tokenizers"); !why.empty()) TL_ORACLE_MISSING(why);

  const std::vector<std::string> corpus = testing::ParityCorpus(2000);
  ASSERT_GE(corpus.size(), 2000u);
  ScratchDir dir("parity");
  const fs::path corpus_path = dir.path / "corpus.txt";
  {
    std::ofstream out(corpus_path, std::ios::binary);
    for (const std::string& s : corpus) out << '=' << Hex(s) << '\n';
  }
  std::string printed;
  ASSERT_TRUE(RunOracle(
      dir.path, "corpus " + Quoted(testing::QwenTokenizerPath()) + " " + Quoted(corpus_path),
      &printed));
  std::vector<std::vector<int32_t>> hf_ids;
  std::vector<std::string> hf_decoded_hex;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    hf_ids.push_back(j.at("ids").get<std::vector<int32_t>>());
    hf_decoded_hex.push_back(j.at("decoded").get<std::string>());
  }
  ASSERT_EQ(hf_ids.size(), corpus.size()) << "the oracle printed the wrong number of lines";

  size_t mismatches = 0, decode_mismatches = 0, round_trips = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::vector<int32_t> ids = tok->Encode(corpus[i]);
    if (ids != hf_ids[i]) {
      if (++mismatches <= 10) {
        ADD_FAILURE() << "string " << i << " " << Escaped(corpus[i])
                      << "\n  Tlaloc:     " << nlohmann::json(ids).dump()
                      << "\n  tokenizers: " << nlohmann::json(hf_ids[i]).dump();
      }
    }
    // Tlaloc decodes the oracle's ids to the bytes the oracle decodes them to.
    auto decoded = tok->Decode(hf_ids[i]);
    ASSERT_TRUE(decoded.ok()) << "string " << i << ": " << decoded.status().ToString();
    if (Hex(*decoded) != hf_decoded_hex[i] && ++decode_mismatches <= 10) {
      ADD_FAILURE() << "decoding the ids of string " << i << " " << Escaped(corpus[i])
                    << "\n  Tlaloc:     " << Hex(*decoded)
                    << "\n  tokenizers: " << hf_decoded_hex[i];
    }
    if (utf8::IsValid(corpus[i]) && utf8::Nfc(corpus[i]) == corpus[i]) {
      ++round_trips;
      auto back = tok->Decode(ids);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(*back, corpus[i]) << "Tlaloc: decode(encode(s)) != s for string " << i;
      EXPECT_EQ(hf_decoded_hex[i], Hex(corpus[i]))
          << "tokenizers: decode(encode(s)) != s for string " << i;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "id mismatches of " << corpus.size() << " strings";
  EXPECT_EQ(decode_mismatches, 0u) << "decode mismatches of " << corpus.size() << " strings";
  EXPECT_GT(round_trips, corpus.size() / 2);
  std::printf("parity: %zu strings, %zu id mismatches, %zu decode mismatches, %zu round trips\n",
              corpus.size(), mismatches, decode_mismatches, round_trips);
}

// Conversations of plain text turns (jinja_test.cc adds tools and tool calls).
std::vector<std::vector<ChatMessage>> Conversations() {
  const ChatMessage system{"system", "You are a helpful assistant. Be brief.", {}};
  return {
      {{"user", "Hi!", {}}},
      {system, {"user", "Hi, who are you?", {}}},
      {system},
      // Multi-turn: earlier assistant turns lose their <think> block.
      {system,
       {"user", "What is 2+2?", {}},
       {"assistant", "<think>\nSimple arithmetic.\n</think>\n\n4", {}},
       {"user", "And 3+3?", {}}},
      {{"user", "q1", {}},
       {"assistant", "<think>\nplan\n</think>\n\nanswer one", {}},
       {"user", "q2", {}},
       {"assistant", "<think>\nmore plans\n</think>\n\nanswer two", {}}},
      // The final assistant turn keeps a (possibly empty) think block.
      {{"user", "q", {}}, {"assistant", "plain answer", {}}},
      {{"user", "q", {}}, {"assistant", "plain answer", std::string("\nsteps\n")}},
      {{"user", "q", {}}, {"assistant", "\n\nleading newlines", std::string("")}},
      // Several </think>: content after the last, reasoning before the first.
      {{"user", "q", {}}, {"assistant", "<think>a</think>b</think>\nc", {}}},
      {{"user", "q", {}}, {"assistant", "an unclosed <think> stays content", {}}},
      // A later system message renders like a user turn; tool results join one user turn.
      {{"user", "u", {}}, {"system", "s2", {}}, {"tool", "r1", {}}, {"tool", "r2", {}}},
      // Multi-step tool use: turns after the last real user query keep their reasoning.
      {system,
       {"user", "Weather in Paris?", {}},
       {"assistant", "<think>\nI should look it up.\n</think>\n\nLooking it up.", {}},
       {"tool", "{\"temp\": 21}", {}},
       {"assistant", "<think>\n21 degrees.\n</think>\n\nIt is 21 °C.", {}}},
      // A user turn that wraps a tool response does not count as the last query.
      {{"user", "first", {}},
       {"assistant", "<think>\nx\n</think>\n\nfine", {}},
       {"user", "<tool_response>\nfrom the user\n</tool_response>", {}},
       {"assistant", "<think>\ny\n</think>\n\ndone", {}}},
      // Unicode, code and control-token text in the content.
      {{"system", "Réponds en français 🙂", {}},
       {"user", "中文と日本語, ```py\nprint('x')\n```, and <|endoftext|>?", {}},
       {"assistant", "<think>\nΣκέψη…\n</think>\n\nVoilà : ça marche.", {}}},
  };
}

nlohmann::json ToJson(const std::vector<ChatMessage>& messages) {
  nlohmann::json out = nlohmann::json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::json j = {{"role", m.role}, {"content", m.content}};
    if (m.reasoning_content) j["reasoning_content"] = *m.reasoning_content;
    out.push_back(j);
  }
  return out;
}

TEST(ParityTest, ChatRenderingMatchesTransformers) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  if (std::string why = testing::PythonMissing("tokenizers transformers"); !why.empty())
    TL_ORACLE_MISSING(why);
  const fs::path tokenizer_dir = fs::path(testing::QwenTokenizerPath()).parent_path();
  if (!fs::exists(tokenizer_dir / "tokenizer_config.json"))
    TL_ORACLE_MISSING(tokenizer_dir / "tokenizer_config.json"
                      << " (the chat template) is missing");

  auto chat_template = ChatTemplate::FromCheckpoint(tokenizer_dir);
  ASSERT_TRUE(chat_template.ok()) << chat_template.status().ToString();
  // Every conversation with add_generation_prompt on and off, enable_thinking absent, true, false.
  struct Case {
    size_t conversation;
    ChatOptions options;
  };
  const std::vector<std::vector<ChatMessage>> conversations = Conversations();
  std::vector<Case> cases;
  nlohmann::json request = nlohmann::json::array();
  for (size_t c = 0; c < conversations.size(); ++c) {
    for (bool prompt : {true, false}) {
      for (std::optional<bool> thinking :
           {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
        cases.push_back({c, ChatOptions{prompt, thinking}});
        nlohmann::json j = {{"messages", ToJson(conversations[c])},
                            {"add_generation_prompt", prompt}};
        if (thinking) j["enable_thinking"] = *thinking;
        request.push_back(j);
      }
    }
  }
  ScratchDir dir("chat_parity");
  const fs::path request_path = dir.path / "request.json";
  std::ofstream(request_path) << request.dump();
  std::string printed;
  ASSERT_TRUE(
      RunOracle(dir.path, "chat " + Quoted(tokenizer_dir) + " " + Quoted(request_path), &printed));
  const nlohmann::json rendered = nlohmann::json::parse(printed);
  ASSERT_EQ(rendered.size(), cases.size()) << "the oracle rendered the wrong number of cases";

  size_t text_mismatches = 0, id_mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [c, options] = cases[i];
    const std::string want = rendered[i].at("text").get<std::string>();
    const auto want_ids = rendered[i].at("ids").get<std::vector<int32_t>>();
    const std::string where =
        "conversation " + std::to_string(c) + ", add_generation_prompt " +
        (options.add_generation_prompt ? "true" : "false") + ", enable_thinking " +
        (options.enable_thinking ? (*options.enable_thinking ? "true" : "false") : "absent");
    auto got = chat_template->Render(conversations[c], options);
    ASSERT_TRUE(got.ok()) << where << ": " << got.status().ToString();
    if (*got != want) {
      ++text_mismatches;
      ADD_FAILURE() << where << "\n  Tlaloc:       " << Escaped(*got)
                    << "\n  transformers: " << Escaped(want);
      continue;
    }
    const std::vector<int32_t> ids = tok->Encode(*got);
    if (ids != want_ids) {
      ++id_mismatches;
      ADD_FAILURE() << where << ": ids of " << Escaped(want)
                    << "\n  Tlaloc:       " << nlohmann::json(ids).dump()
                    << "\n  transformers: " << nlohmann::json(want_ids).dump();
    }
    auto back = tok->Decode(ids);
    ASSERT_TRUE(back.ok()) << where << ": " << back.status().ToString();
    EXPECT_EQ(*back, want) << where << ": decode(encode(rendered)) != rendered";
  }
  std::printf("chat parity: %zu cases (%zu conversations), %zu text and %zu id mismatches\n",
              cases.size(), conversations.size(), text_mismatches, id_mismatches);
}

}  // namespace
}  // namespace tlaloc
