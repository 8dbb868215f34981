// `tlaloc tokenize --tokenizer FILE [--ids | --decode] [--chat] TEXT`: encodes TEXT with a
// tokenizer.json and prints the ids with their token strings, or decodes space-separated ids.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string text;
  bool ids_only = false;
  bool decode = false;
  bool chat = false;
  bool no_think = false;
  bool no_special = false;
  std::string system;
};

int Fail(const std::string& message, int code = kExitFailure) {
  std::fprintf(stderr, "tlaloc tokenize: %s\n", message.c_str());
  return code;
}

// Parses "1 2 3" (commas and brackets allowed too, so a JSON array can be pasted).
StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::string cleaned = text;
  for (char& c : cleaned) {
    if (c == ',' || c == '[' || c == ']') c = ' ';
  }
  std::istringstream in(cleaned);
  std::vector<int32_t> ids;
  std::string word;
  for (size_t index = 0; in >> word; ++index) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(word.c_str(), &end, 10);
    if (end == word.c_str() || *end != '\0' || errno == ERANGE || v < 0 || v > INT32_MAX)
      return InvalidArgument("--decode: '" + word + "' (item " + std::to_string(index) +
                             ") is not a token id (expected a non-negative integer)");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

int RunTokenize(const TokenizeArgs& args) {
  std::string text = args.text;
  if (text == "-") {  // read TEXT from standard input
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  auto tok = Tokenizer::FromFile(args.tokenizer);
  if (!tok.ok()) return Fail(tok.status().ToString());

  if (args.decode) {
    auto ids = ParseIds(text);
    if (!ids.ok()) return Fail(ids.status().ToString(), kExitUsage);  // TEXT is not ids
    auto decoded = tok->Decode(*ids);
    if (!decoded.ok()) return Fail(decoded.status().ToString());
    std::fwrite(decoded->data(), 1, decoded->size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }

  if (args.chat) {
    std::vector<ChatMessage> messages;
    if (!args.system.empty()) messages.push_back({"system", args.system, {}});
    messages.push_back({"user", text, {}});
    ChatOptions options;
    if (args.no_think) options.enable_thinking = false;
    // The chat template of the checkpoint folder: --tokenizer itself when it is a folder, else
    // the folder holding the tokenizer.json (its tokenizer_config.json or chat_template.jinja).
    const std::filesystem::path tok_path = std::filesystem::absolute(args.tokenizer);
    auto chat_template = ChatTemplate::FromCheckpoint(
        std::filesystem::is_directory(tok_path) ? tok_path : tok_path.parent_path());
    if (!chat_template.ok()) return Fail(chat_template.status().ToString());
    auto rendered = chat_template->Render(messages, options);
    if (!rendered.ok()) return Fail(rendered.status().ToString());
    text = *rendered;
  }
  EncodeOptions options;
  options.allow_special = !args.no_special;
  std::vector<int32_t> ids;
  ids = tok->Encode(text, options);

  if (args.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return 0;
  }
  for (int32_t id : ids) {
    auto bytes = tok->IdToBytes(id);
    if (!bytes.ok()) return Fail(bytes.status().ToString());
    // JSON-quoted so whitespace and partial characters stay visible.
    std::string shown = nlohmann::json(utf8::Repair(*bytes)).dump();
    std::printf("%d\t%s%s\n", id, shown.c_str(), tok->IsSpecial(id) ? "\t(special)" : "");
  }
  std::printf("%zu tokens\n", ids.size());
  return 0;
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand(
      "tokenize",
      "Encode TEXT with a tokenizer.json (ids and tokens), or decode ids with --decode");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json, or a directory holding one")
      ->required();
  cmd->add_option("text", args->text, "The text to encode (or ids to decode); - reads stdin")
      ->required();
  auto* ids = cmd->add_flag("--ids", args->ids_only, "Print only the ids, space-separated");
  auto* decode =
      cmd->add_flag("--decode", args->decode, "TEXT is space-separated ids; print their text");
  ids->excludes(decode);
  auto* chat = cmd->add_flag(
      "--chat", args->chat,
      "Render TEXT as a user turn with the chat template of the tokenizer's folder first");
  chat->excludes(decode);
  cmd->add_option("--system", args->system, "With --chat: a system message")->needs(chat);
  cmd->add_flag("--no-think", args->no_think,
                "With --chat: end the prompt with an empty think block (enable_thinking=false)")
      ->needs(chat);
  cmd->add_flag("--no-special", args->no_special,
                "Encode special tokens written in TEXT as plain text")
      ->excludes(decode)
      ->excludes(chat);
  cmd->callback([args] { SetExitCode(RunTokenize(*args)); });
}

}  // namespace tlaloc::cli
