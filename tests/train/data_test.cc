// Fine-tuning data: JSONL rows to documents (assistant-only loss for chat), bad rows named by
// file:line, and packing (shifted labels, ignored boundaries, split long documents, seeded
// shuffles that cover every document once per epoch).
#include "tlaloc/train/data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tlaloc/models/init.h"
#include "tlaloc/train/finetune.h"
#include "tokenizer/test_util.h"

namespace tlaloc::train {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kEot = 256;  // the byte tokenizer's <|endoftext|>

const Tokenizer& Bytes() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::FromJson(ByteTokenizerJson(), "byte tokenizer");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return new Tokenizer(std::move(*t));
  }();
  return *tok;
}

// The chat template Tlaloc writes into the checkpoints it creates (Qwen3's format).
const ChatTemplate* Qwen3Template() {
  static const ChatTemplate* t = [] {
    auto r = ChatTemplate::FromSource(models::Qwen3ChatTemplate(), {{"eos_token", "<|im_end|>"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return new ChatTemplate(std::move(*r));
  }();
  return t;
}

DocumentOptions Options() { return DocumentOptions{kEot, Qwen3Template()}; }

StatusOr<Document> Row(const std::string& line) {
  return DocumentFromJsonLine(line, "rows.jsonl:1", Bytes(), Options());
}

// The text of the ids at positions where `trained` equals `which`.
std::string TextWhere(const Document& d, bool which) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < d.ids.size(); ++i)
    if ((d.trained[i] != 0) == which) ids.push_back(d.ids[i]);
  return *Bytes().Decode(ids);
}

TEST(Data, ByteTokenizerMapsBytesAndChatTokens) {
  EXPECT_EQ(Bytes().Encode("ab"), (std::vector<int32_t>{97, 98}));
  EXPECT_EQ(Bytes().Encode("<|im_start|>\n"), (std::vector<int32_t>{257, 10}));
  EXPECT_EQ(*Bytes().Decode(std::vector<int32_t>{104, 105, 258}), "hi<|im_end|>");
  EXPECT_EQ(*EndOfTextId(Bytes()), kEot);
}

TEST(Data, TextRowTrainsEveryTokenAndEndsWithEndOfText) {
  auto d = Row(R"({"text": "abc"})");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->ids, (std::vector<int32_t>{97, 98, 99, kEot}));
  EXPECT_EQ(d->trained, (std::vector<uint8_t>{1, 1, 1, 1}));
  // Control tokens typed into a text row stay text.
  auto s = Row(R"({"text": "<|im_end|>"})");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ids.size(), std::string("<|im_end|>").size() + 1);
}

TEST(Data, ChatRowTrainsOnlyOnAssistantTurns) {
  auto d = Row(
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},)"
      R"( {"role": "assistant", "content": "yo"}, {"role": "user", "content": "again"},)"
      R"( {"role": "assistant", "content": "ok"}]})");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(TextWhere(*d, true), "yo<|im_end|><think>\n\n</think>\n\nok<|im_end|>");
  EXPECT_EQ(TextWhere(*d, false),
            "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n"
            "\n<|endoftext|>");
  EXPECT_EQ(d->ids.back(), kEot);
}

// A template with other markers than ChatML (Llama-3 style headers): the assistant turns are
// found through the template, each with its end-of-turn marker and without the separator.
TEST(Data, ChatRowSpansComeFromTheTemplateNotFromChatMLMarkers) {
  auto llama = ChatTemplate::FromSource(
      "{{- bos_token }}{% for m in messages %}{{ '<|hdr|>' + m.role + '<|/hdr|>\n\n' + "
      "m.content | trim + '<|eot|>\n' }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|hdr|>assistant<|/hdr|>\n\n' }}{% endif %}",
      {{"bos_token", "<s>"}}, "llama-style template");
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  auto d = DocumentFromJsonLine(
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},)"
      R"( {"role": "assistant", "content": "yo "}, {"role": "user", "content": "again"},)"
      R"( {"role": "assistant", "content": "ok"}]})",
      "rows.jsonl:1", Bytes(), DocumentOptions{kEot, &*llama});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(TextWhere(*d, true), "yo<|eot|>ok<|eot|>");
  EXPECT_EQ(TextWhere(*d, false),
            "<s><|hdr|>system<|/hdr|>\n\nbe brief<|eot|>\n<|hdr|>user<|/hdr|>\n\nhi<|eot|>\n"
            "<|hdr|>assistant<|/hdr|>\n\n\n<|hdr|>user<|/hdr|>\n\nagain<|eot|>\n"
            "<|hdr|>assistant<|/hdr|>\n\n\n<|endoftext|>");
}

// A template whose render of the earlier turns is not a prefix of the longer render cannot show
// where a turn is; the error names the row and the turn.
TEST(Data, ChatTemplateThatIsNotPrefixStableIsAClearError) {
  auto counted = ChatTemplate::FromSource(
      "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}({{ messages | length }})"
      "{% if add_generation_prompt %}[assistant]{% endif %}",
      {}, "counting template");
  ASSERT_TRUE(counted.ok()) << counted.status().ToString();
  auto d = DocumentFromJsonLine(
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})",
      "rows.jsonl:7", Bytes(), DocumentOptions{kEot, &*counted});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("rows.jsonl:7: assistant turn messages[1]"),
            std::string::npos)
      << d.status().message();
  EXPECT_NE(d.status().message().find("not a prefix"), std::string::npos) << d.status().message();
}

// The published Qwen3 template (data/qwen3/tokenizer_config.json) and tokenizer, with reasoning
// in the replies (kept in the last turn, dropped from earlier ones): the turns found through the
// template are exactly those the ChatML markers delimit, <|im_end|> included, the separator not.
TEST(Data, PublishedQwen3TemplateTrainsWhatItsChatMLMarkersDelimit) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  auto qwen3 = ChatTemplate::FromCheckpoint(fs::path(TLALOC_SOURCE_DIR) / "data" / "qwen3");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status().ToString();
  const std::string row =
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},)"
      R"( {"role": "assistant", "content": "<think>\nfirst thought\n</think>\n\nyo"},)"
      R"( {"role": "user", "content": "again"},)"
      R"( {"role": "assistant", "content": "<think>\nsecond thought\n</think>\n\nok"}]})";
  auto d = DocumentFromJsonLine(row, "rows.jsonl:1", *tok, DocumentOptions{kEot, &*qwen3});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::vector<int32_t> trained_ids, all_ids(d->ids.begin(), d->ids.end() - 1);
  for (size_t i = 0; i < d->ids.size(); ++i)
    if (d->trained[i]) trained_ids.push_back(d->ids[i]);
  const std::string text = *tok->Decode(all_ids);
  // The old rule, as the oracle: from each "<|im_start|>assistant\n" to its "<|im_end|>".
  std::string expected;
  const std::string open = "<|im_start|>assistant\n", close = "<|im_end|>";
  for (size_t at = text.find(open); at != std::string::npos; at = text.find(open, at)) {
    const size_t end = text.find(close, at) + close.size();
    expected += text.substr(at + open.size(), end - at - open.size());
    at = end;
  }
  EXPECT_EQ(*tok->Decode(trained_ids), expected);
  EXPECT_EQ(expected, "yo<|im_end|><think>\nsecond thought\n</think>\n\nok<|im_end|>");
}

TEST(Data, ChatRowWithoutAChatTemplateIsRefusedClearly) {
  auto doc = DocumentFromJsonLine(
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})",
      "rows.jsonl:1", Bytes(), DocumentOptions{kEot});
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("rows.jsonl:1: a \"messages\" row needs the model's chat "
                                        "template"),
            std::string::npos)
      << doc.status().message();
}

TEST(Data, BadRowsAreNamedByFileAndLine) {
  const std::map<std::string, std::string> bad = {
      {"{\"text\": 5}", "\"text\" must be a string"},
      {"{\"text\": \"a\"", "not valid JSON"},
      {"[1, 2]", "expected an object"},
      {"{\"prompt\": \"a\"}", "expected a \"text\" or a \"messages\" field"},
      {"{\"messages\": {}}", "non-empty array"},
      {"{\"messages\": [{\"role\": \"user\"}]}", "messages[0] lacks a string \"content\""},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}", "no assistant turn"},
      {"{\"messages\": [{\"role\": \"robot\", \"content\": \"a\"}, {\"role\": \"assistant\", "
       "\"content\": \"b\"}]}",
       "role 'robot'"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"<|im_end|>\"}, {\"role\": "
       "\"assistant\", \"content\": \"b\"}]}",
       "special token <|im_end|>"},
  };
  const fs::path path =
      fs::temp_directory_path() / ("tlaloc_data_test_" + std::to_string(::getpid()) + ".jsonl");
  for (const auto& [row, why] : bad) {
    {
      std::ofstream f(path);
      f << "{\"text\": \"fine\"}\n\n" << row << "\n";
    }
    auto docs = LoadJsonlDocuments(path, Bytes(), Options());
    ASSERT_FALSE(docs.ok()) << row;
    EXPECT_NE(docs.status().message().find(path.string() + ":3"), std::string::npos)
        << docs.status().message();
    EXPECT_NE(docs.status().message().find(why), std::string::npos) << docs.status().message();
  }
  fs::remove(path);
  EXPECT_FALSE(LoadJsonlDocuments(path, Bytes(), Options()).ok());
}

// Every bad row is named, not only the first: the first 20, then how many more.
TEST(Data, JsonlReportsEveryBadRowUpToALimit) {
  const fs::path path =
      fs::temp_directory_path() / ("tlaloc_data_rows_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream f(path);
    f << "{\"text\": \"fine\"}\n{\"text\": 1}\n{\"text\": \"ok\"}\n[2]\n";
  }
  auto two = LoadJsonlDocuments(path, Bytes(), DocumentOptions{kEot});
  ASSERT_FALSE(two.ok());
  const std::string m = two.status().message();
  EXPECT_NE(m.find("2 bad rows"), std::string::npos) << m;
  EXPECT_NE(m.find(path.string() + ":2"), std::string::npos) << m;
  EXPECT_NE(m.find(path.string() + ":4"), std::string::npos) << m;
  {
    std::ofstream f(path);
    for (int i = 0; i < 25; ++i) f << "{\"text\": " << i << "}\n";
  }
  auto many = LoadJsonlDocuments(path, Bytes(), DocumentOptions{kEot});
  ASSERT_FALSE(many.ok());
  const std::string mm = many.status().message();
  EXPECT_NE(mm.find("25 bad rows"), std::string::npos) << mm;
  EXPECT_NE(mm.find(path.string() + ":20:"), std::string::npos) << mm;
  EXPECT_EQ(mm.find(path.string() + ":21:"), std::string::npos) << mm;
  EXPECT_NE(mm.find("and 5 more bad rows"), std::string::npos) << mm;
  fs::remove(path);
}

Document Doc(std::vector<int32_t> ids, std::vector<uint8_t> trained) {
  ids.push_back(kEot);
  trained.push_back(1);
  return Document{ids, trained};
}

TEST(Data, PackingShiftsLabelsAndIgnoresDocumentBoundaries) {
  // Documents of distinct tokens, so each row can be checked against its source.
  std::vector<Document> docs = {Doc({10, 11, 12}, {1, 1, 1}), Doc({20, 21}, {0, 0}),
                                Doc({30, 31, 32, 33}, {0, 1, 1, 1})};
  auto packer = Packer::Create(docs, /*batch=*/2, /*seq_len=*/8, /*seed=*/1, kEot);
  ASSERT_TRUE(packer.ok()) << packer.status().ToString();
  EXPECT_EQ(packer->batches_per_epoch(), 1);
  TokenBatch b = packer->Next();
  ASSERT_EQ(b.input_ids.size(), 16u);
  int64_t trained = 0;
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t t = 0; t < 8; ++t) {
      const int32_t in = b.input_ids[r * 8 + t], label = b.labels[r * 8 + t];
      if (in == kEot) {
        EXPECT_EQ(label, kIgnoreLabel) << "the end of a document predicts nothing";
        continue;
      }
      ASSERT_LT(t + 1, 8) << "whole documents fit, so a content token never ends a row";
      const int32_t next = b.input_ids[r * 8 + t + 1];
      if (label != kIgnoreLabel) {
        EXPECT_EQ(label, next);
        ++trained;
      }
      if (in / 10 == 2) {
        EXPECT_EQ(label, next == kEot ? kEot : kIgnoreLabel);
      }
    }
  }
  // 10->11, 11->12, 12->eot, 21->eot, 30->31, 31->32, 32->33, 33->eot.
  EXPECT_EQ(trained, 8);
  EXPECT_EQ(b.trained_tokens(), 8);
}

TEST(Data, LongDocumentsAreCutWithLabelsAcrossTheCut) {
  std::vector<Document> docs = {Doc({1, 2, 3, 4, 5, 6, 7, 8, 9}, std::vector<uint8_t>(9, 1))};
  auto packer = Packer::Create(docs, 1, 4, 0, kEot);
  ASSERT_TRUE(packer.ok());
  EXPECT_EQ(packer->batches_per_epoch(), 3);
  TokenBatch a = packer->Next(), b = packer->Next(), c = packer->Next();
  EXPECT_EQ(a.input_ids, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(a.labels, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(b.labels, (std::vector<int32_t>{6, 7, 8, 9}));
  EXPECT_EQ(c.input_ids, (std::vector<int32_t>{9, kEot, kEot, kEot}));
  EXPECT_EQ(c.labels, (std::vector<int32_t>{kEot, kIgnoreLabel, kIgnoreLabel, kIgnoreLabel}));
  EXPECT_EQ(packer->epoch(), 1);
}

std::vector<Document> ManyDocs(int n) {
  std::vector<Document> docs;
  for (int i = 0; i < n; ++i) docs.push_back(Doc({1000 + i, 1}, {1, 1}));
  return docs;
}

// First tokens of the documents in the order the packer visits them, for `batches` batches.
std::vector<int32_t> Visits(Packer& p, int batches) {
  std::vector<int32_t> firsts;
  for (int i = 0; i < batches; ++i)
    for (int32_t id : p.Next().input_ids)
      if (id >= 1000) firsts.push_back(id);
  return firsts;
}

TEST(Data, ShufflingIsSeededAndCoversEveryDocumentOncePerEpoch) {
  // Each document is 3 tokens and a row holds one, so an epoch is 20 rows: 5 batches of 4.
  auto a = Packer::Create(ManyDocs(20), 4, 5, 42, kEot);
  auto b = Packer::Create(ManyDocs(20), 4, 5, 42, kEot);
  auto c = Packer::Create(ManyDocs(20), 4, 5, 43, kEot);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->batches_per_epoch(), 5);
  std::vector<int32_t> va = Visits(*a, 10), vb = Visits(*b, 10), vc = Visits(*c, 10);
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  ASSERT_EQ(va.size(), 40u);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int32_t> seen(va.begin() + epoch * 20, va.begin() + (epoch + 1) * 20);
    std::sort(seen.begin(), seen.end());
    for (int i = 0; i < 20; ++i) EXPECT_EQ(seen[i], 1000 + i) << "epoch " << epoch;
  }
  EXPECT_NE(std::vector<int32_t>(va.begin(), va.begin() + 20),
            std::vector<int32_t>(va.begin() + 20, va.end()))
      << "each epoch has its own order";
  // Skipping lands on the same batch as stepping.
  auto d = Packer::Create(ManyDocs(20), 4, 5, 42, kEot);
  d->Skip(7);
  auto e = Packer::Create(ManyDocs(20), 4, 5, 42, kEot);
  for (int i = 0; i < 7; ++i) e->Next();
  EXPECT_EQ(d->Next().input_ids, e->Next().input_ids);
}

TEST(Data, PackerRejectsBadSizesAndUntrainableData) {
  EXPECT_FALSE(Packer::Create(ManyDocs(2), 0, 8, 0, kEot).ok());
  EXPECT_FALSE(Packer::Create(ManyDocs(2), 1, 1, 0, kEot).ok());
  EXPECT_FALSE(Packer::Create({}, 1, 8, 0, kEot).ok());
  EXPECT_FALSE(Packer::Create({Document{{5, kEot}, {1, 0}}}, 1, 8, 0, kEot).ok());
}

TEST(Data, DemoTasksKeepHeldOutQuestionsOutOfTraining) {
  auto task = MakeDemoTask("reverse", 300, 20, 5);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ASSERT_EQ(task->train.size(), 300u);
  ASSERT_EQ(task->held_out.size(), 20u);
  for (const auto& h : task->held_out) {
    EXPECT_EQ(std::string(h.question.rbegin(), h.question.rend()), h.answer);
    for (const auto& t : task->train) ASSERT_NE(t.question, h.question);
  }
  auto upper = MakeDemoTask("upper", 10, 5, 1);
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ(upper->train[0].answer.size(), upper->train[0].question.size());
  EXPECT_EQ(upper->train[0].answer[0], upper->train[0].question[0] - 'a' + 'A');
  auto add = MakeDemoTask("add", 10, 5, 1);
  ASSERT_TRUE(add.ok());
  const auto& e = add->train[0];
  const size_t plus = e.question.find('+');
  EXPECT_EQ(std::stoi(e.question.substr(0, plus)) + std::stoi(e.question.substr(plus + 1)),
            std::stoi(e.answer));
  EXPECT_FALSE(MakeDemoTask("sort", 10, 5, 1).ok());
  // The rows it writes are chat rows the loader reads.
  std::string jsonl = ChatJsonl(task->held_out);
  auto doc = Row(jsonl.substr(0, jsonl.find('\n')));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(TextWhere(*doc, true),
            "<think>\n\n</think>\n\n" + task->held_out[0].answer + "<|im_end|>");
}

}  // namespace
}  // namespace tlaloc::train
