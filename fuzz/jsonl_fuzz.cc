// libFuzzer target for fine-tuning data (train/data.h): the input is a JSONL file; every line
// goes through `DocumentFromJsonLine` with a small byte-level tokenizer that has the Qwen3
// control tokens. A line must give a document or an error Status. Documents must end with the
// end-of-text id, hold only vocabulary ids and one trained flag per id; packing them into rows
// must give inputs and labels from the vocabulary (or the ignore label).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/models/init.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/train/data.h"

namespace {

constexpr int32_t kEndOfText = 256, kVocab = 259;

[[noreturn]] void Fail(const char* what, std::string_view line) {
  std::fprintf(stderr, "jsonl_fuzz: %s\n%.*s\n", what, static_cast<int>(line.size()), line.data());
  std::abort();
}

const tlaloc::Tokenizer& SmallTokenizer() {
  static const tlaloc::Tokenizer* tok = [] {
    std::string vocab;
    for (int b = 0; b < 256; ++b) {
      std::string sym = tlaloc::ByteLevelSymbol(static_cast<uint8_t>(b));
      if (sym == "\"" || sym == "\\") sym = "\\" + sym;
      vocab += (b ? ",\"" : "\"") + sym + "\":" + std::to_string(b);
    }
    std::string json =
        "{\"added_tokens\":["
        "{\"id\":256,\"content\":\"<|endoftext|>\",\"special\":true},"
        "{\"id\":257,\"content\":\"<|im_start|>\",\"special\":true},"
        "{\"id\":258,\"content\":\"<|im_end|>\",\"special\":true}],"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
        "\"decoder\":{\"type\":\"ByteLevel\"},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{" +
        vocab + "},\"merges\":[]}}";
    auto t = tlaloc::Tokenizer::FromJson(json, "jsonl_fuzz");
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      std::abort();
    }
    return new tlaloc::Tokenizer(std::move(*t));
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tlaloc::Tokenizer& tok = SmallTokenizer();
  static const tlaloc::ChatTemplate chat = *tlaloc::ChatTemplate::FromSource(
      tlaloc::models::Qwen3ChatTemplate(), {{"eos_token", "<|im_end|>"}});
  tlaloc::train::DocumentOptions options;
  options.end_of_text_id = kEndOfText;
  options.chat_template = &chat;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<tlaloc::train::Document> docs;
  size_t start = 0;
  while (start < input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    std::string_view line = input.substr(start, end - start);
    start = end + 1;
    auto doc = tlaloc::train::DocumentFromJsonLine(line, "fuzz:1", tok, options);
    if (!doc.ok()) continue;
    if (doc->ids.empty() || doc->ids.size() != doc->trained.size())
      Fail("document ids and trained flags disagree", line);
    if (doc->ids.back() != kEndOfText) Fail("document does not end with end-of-text", line);
    for (int32_t id : doc->ids)
      if (id < 0 || id >= kVocab) Fail("document holds an id outside the vocabulary", line);
    docs.push_back(std::move(*doc));
  }
  if (docs.empty()) return 0;
  auto packer = tlaloc::train::Packer::Create(std::move(docs), 2, 8, size, kEndOfText);
  if (!packer.ok()) return 0;
  for (int step = 0; step < 3; ++step) {
    tlaloc::train::TokenBatch b = packer->Next();
    if (b.input_ids.size() != 16 || b.labels.size() != 16) Fail("batch of the wrong size", "");
    for (size_t i = 0; i < b.input_ids.size(); ++i) {
      if (b.input_ids[i] < 0 || b.input_ids[i] >= kVocab) Fail("input outside vocabulary", "");
      if (b.labels[i] != tlaloc::train::kIgnoreLabel && (b.labels[i] < 0 || b.labels[i] >= kVocab))
        Fail("label outside vocabulary", "");
    }
  }
  return 0;
}
