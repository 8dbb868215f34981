// JSONL documents and the packer (see data.h).
#include "tlaloc/train/data.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tlaloc/tokenizer/chat.h"

namespace tlaloc::train {

namespace {

using json = nlohmann::json;

void Append(Document& doc, const std::vector<int32_t>& ids, bool trained) {
  doc.ids.insert(doc.ids.end(), ids.begin(), ids.end());
  doc.trained.insert(doc.trained.end(), ids.size(), trained ? 1 : 0);
}

StatusOr<std::vector<ChatMessage>> ParseMessages(const json& j, const std::string& where,
                                                 const Tokenizer& tokenizer) {
  if (!j.is_array() || j.empty())
    return InvalidArgument(where + ": \"messages\" must be a non-empty array");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& m = j[i];
    const std::string at = where + ": messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return InvalidArgument(at + " must be an object");
    for (const char* key : {"role", "content"}) {
      if (!m.contains(key) || !m[key].is_string())
        return InvalidArgument(at + " lacks a string \"" + key + "\"");
    }
    ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>(), {}};
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return InvalidArgument(at + ": role '" + msg.role +
                             "' is not one of system, user, assistant, tool");
    // The tokenizer's special tokens inside a message would make the turn boundaries ambiguous.
    for (const AddedToken& t : tokenizer.added_tokens()) {
      if (t.special && !t.content.empty() && msg.content.find(t.content) != std::string::npos)
        return InvalidArgument(at + ": content contains the special token " + t.content +
                               " (a chat control token)");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The byte ranges [begin, end) of the assistant turns in `text`, the whole conversation rendered
// without a generation prompt. They are found through the template itself, not by any model's
// markers: assistant turn i starts where the render of messages[:i] with the generation prompt
// ends (that render must be a prefix of `text`), and its text is what the render of
// messages[:i+1] adds to that prefix. A template may render a turn in the history more briefly
// than as the last turn (Qwen3 drops the reasoning of earlier turns), so in `text` the turn is
// the longest ending of that text found at its start. Whitespace after the turn's last byte
// separates turns and is not the model's output (generation stops at the end token), so it is
// not trained.
StatusOr<std::vector<std::pair<size_t, size_t>>> AssistantSpans(
    const std::vector<ChatMessage>& messages, std::string_view text, const std::string& where,
    const ChatTemplate& chat_template) {
  std::vector<std::pair<size_t, size_t>> spans;
  ChatOptions open, closed;
  open.add_generation_prompt = true;
  closed.add_generation_prompt = false;
  const std::span<const ChatMessage> all(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const std::string turn = where + ": assistant turn messages[" + std::to_string(i) + "]";
    StatusOr<std::string> before = chat_template.Render(all.first(i), open);
    if (!before.ok()) return before.status().WithContext(turn + ": rendering the turns before it");
    StatusOr<std::string> with = chat_template.Render(all.first(i + 1), closed);
    if (!with.ok()) return with.status().WithContext(turn + ": rendering the turns up to it");
    if (!with->starts_with(*before))
      return InvalidArgument(turn +
                             ": the chat template's render of the turns before it with the "
                             "generation prompt is not a prefix of its render with the turn, so "
                             "the turn's text cannot be told apart");
    if (!text.starts_with(*before))
      return InvalidArgument(turn +
                             ": the chat template renders the turns before it differently when "
                             "later turns follow, so the turn cannot be found in the conversation");
    const std::string_view reply = std::string_view(*with).substr(before->size());
    const size_t begin = before->size();
    size_t length = 0;
    for (size_t n = std::min(reply.size(), text.size() - begin); n > 0; --n) {
      if (text.substr(begin, n) == reply.substr(reply.size() - n)) {
        length = n;
        break;
      }
    }
    size_t end = begin + length;
    while (end > begin && IsSpace(text[end - 1])) --end;
    size_t reply_end = reply.size();
    while (reply_end > 0 && IsSpace(reply[reply_end - 1])) --reply_end;
    if (end == begin && reply_end > 0)
      return InvalidArgument(
          turn + ": the chat template renders the turn as \"" +
          std::string(reply.substr(0, reply_end)) +
          "\" when it is the last, and nothing of that where later turns follow");
    if (!spans.empty() && begin < spans.back().second)
      return InvalidArgument(turn + ": overlaps the assistant turn before it in the rendering");
    spans.emplace_back(begin, end);
  }
  return spans;
}

// Renders the conversation and tokenizes it piecewise, marking assistant turns as trained.
StatusOr<Document> ChatDocument(const std::vector<ChatMessage>& messages, const std::string& where,
                                const Tokenizer& tokenizer, const ChatTemplate* chat_template) {
  const bool any_assistant = std::any_of(
      messages.begin(), messages.end(), [](const ChatMessage& m) { return m.role == "assistant"; });
  if (!any_assistant)
    return InvalidArgument(where + ": \"messages\" has no assistant turn, so nothing to train on");
  if (chat_template == nullptr)
    return InvalidArgument(where +
                           ": a \"messages\" row needs the model's chat template, and none "
                           "was given (the model folder has none)");
  ChatOptions options;
  options.add_generation_prompt = false;
  StatusOr<std::string> rendered = chat_template->Render(messages, options);
  if (!rendered.ok()) return rendered.status().WithContext(where);
  const std::string_view text = *rendered;
  TL_ASSIGN_OR_RETURN(auto spans, AssistantSpans(messages, text, where, *chat_template));
  Document doc;
  size_t pos = 0;
  for (const auto& [begin, end] : spans) {
    if (begin > pos) Append(doc, tokenizer.Encode(text.substr(pos, begin - pos)), false);
    if (end > begin) Append(doc, tokenizer.Encode(text.substr(begin, end - begin)), true);
    pos = end;
  }
  if (pos < text.size()) Append(doc, tokenizer.Encode(text.substr(pos)), false);
  return doc;
}

}  // namespace

int64_t TokenBatch::trained_tokens() const {
  return std::count_if(labels.begin(), labels.end(), [](int32_t l) { return l != kIgnoreLabel; });
}

StatusOr<int32_t> EndOfTextId(const Tokenizer& tokenizer, std::string_view token) {
  if (auto id = tokenizer.TokenToId(token)) return *id;
  return NotFound("the tokenizer has no " + std::string(token) + " token to end documents with");
}

StatusOr<Document> DocumentFromJsonLine(std::string_view line, const std::string& where,
                                        const Tokenizer& tokenizer,
                                        const DocumentOptions& options) {
  json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (row.is_discarded()) return InvalidArgument(where + ": not valid JSON");
  if (!row.is_object())
    return InvalidArgument(where + ": expected an object with \"text\" or \"messages\"");
  Document doc;
  if (row.contains("text")) {
    if (!row["text"].is_string()) return InvalidArgument(where + ": \"text\" must be a string");
    const std::string text = row["text"].get<std::string>();
    if (text.empty()) return InvalidArgument(where + ": \"text\" is empty");
    EncodeOptions encode;
    encode.allow_special = false;  // a document's text is data, never control tokens
    Append(doc, tokenizer.Encode(text, encode), true);
  } else if (row.contains("messages")) {
    TL_ASSIGN_OR_RETURN(auto messages, ParseMessages(row["messages"], where, tokenizer));
    TL_ASSIGN_OR_RETURN(doc, ChatDocument(messages, where, tokenizer, options.chat_template));
  } else {
    return InvalidArgument(where + ": expected a \"text\" or a \"messages\" field");
  }
  // Text documents learn to end; chat documents end with their last turn's end token anyway.
  const bool train_end = row.contains("text");
  doc.ids.push_back(options.end_of_text_id);
  doc.trained.push_back(train_end ? 1 : 0);
  return doc;
}

StatusOr<std::vector<Document>> LoadJsonlDocuments(const std::filesystem::path& path,
                                                   const Tokenizer& tokenizer,
                                                   const DocumentOptions& options) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open data file " + path.string());
  std::vector<Document> docs;
  // Every bad row is reported (up to kShownErrors), so that one run finds them all rather than
  // one per run.
  constexpr int64_t kShownErrors = 20;
  std::string errors;
  int64_t bad_rows = 0;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    auto doc = DocumentFromJsonLine(line, path.string() + ":" + std::to_string(line_no), tokenizer,
                                    options);
    if (!doc.ok()) {
      if (++bad_rows <= kShownErrors) errors += "\n  " + doc.status().message();
      continue;
    }
    docs.push_back(std::move(*doc));
  }
  if (bad_rows > 0) {
    if (bad_rows > kShownErrors)
      errors += "\n  ... and " + std::to_string(bad_rows - kShownErrors) + " more bad rows";
    return InvalidArgument(path.string() + ": " + std::to_string(bad_rows) +
                           (bad_rows == 1 ? " bad row" : " bad rows") + errors);
  }
  if (docs.empty()) return InvalidArgument(path.string() + ": no rows (expected JSONL)");
  return docs;
}

StatusOr<Packer> Packer::Create(std::vector<Document> documents, int64_t batch, int64_t seq_len,
                                uint64_t seed, int32_t pad_id) {
  if (batch <= 0 || seq_len <= 1)
    return InvalidArgument("batch must be >= 1 and sequence length >= 2, got batch " +
                           std::to_string(batch) + " and sequence length " +
                           std::to_string(seq_len));
  if (documents.empty()) return InvalidArgument("no documents to pack");
  bool any_trained = false;
  for (const Document& d : documents) {
    if (d.ids.empty() || d.ids.size() != d.trained.size())
      return InvalidArgument("a document has no tokens or mismatched trained flags");
    // The first token of a document is never a label (nothing precedes it in the document).
    any_trained = any_trained || std::any_of(d.trained.begin() + 1, d.trained.end(),
                                             [](uint8_t t) { return t != 0; });
  }
  if (!any_trained) return InvalidArgument("no document has a trained token");
  Packer p;
  p.documents_ = std::move(documents);
  p.batch_ = batch;
  p.seq_len_ = seq_len;
  p.seed_ = seed;
  p.pad_id_ = pad_id;
  p.StartEpoch();
  // Count the rows of one epoch on a copy, so the stream itself is untouched.
  Packer probe = p;
  int64_t rows = 0;
  std::vector<int32_t> in(seq_len), lab(seq_len);
  while (probe.epoch_ == 0) {
    probe.FillRow(in.data(), lab.data());
    ++rows;
  }
  p.batches_per_epoch_ = std::max<int64_t>(1, (rows + batch - 1) / batch);
  return p;
}

void Packer::StartEpoch() {
  order_.resize(documents_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  // Fisher-Yates over mt19937_64 (whose output the standard fixes), so orders match everywhere.
  std::mt19937_64 rng(seed_ ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch_ + 1)));
  for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng() % i]);
  next_doc_ = 0;
  doc_offset_ = 0;
}

void Packer::FillRow(int32_t* inputs, int32_t* labels) {
  int64_t pos = 0;
  while (pos < seq_len_) {
    const Document& d = documents_[order_[next_doc_]];
    const int64_t size = static_cast<int64_t>(d.ids.size());
    const int64_t remaining = size - static_cast<int64_t>(doc_offset_);
    // A whole document that does not fit starts the next row instead of being cut.
    if (doc_offset_ == 0 && pos > 0 && remaining > seq_len_ - pos) break;
    const int64_t take = std::min(remaining, seq_len_ - pos);
    for (int64_t i = 0; i < take; ++i) {
      const int64_t t = static_cast<int64_t>(doc_offset_) + i;
      inputs[pos + i] = d.ids[t];
      labels[pos + i] = (t + 1 < size && d.trained[t + 1]) ? d.ids[t + 1] : kIgnoreLabel;
    }
    pos += take;
    doc_offset_ += take;
    if (static_cast<int64_t>(doc_offset_) == size) {
      doc_offset_ = 0;
      if (++next_doc_ == order_.size()) {
        ++epoch_;
        StartEpoch();
        break;  // an epoch's last row is not topped up with the next epoch's documents
      }
    }
  }
  for (; pos < seq_len_; ++pos) {
    inputs[pos] = pad_id_;
    labels[pos] = kIgnoreLabel;
  }
}

TokenBatch Packer::Next() {
  TokenBatch b;
  b.batch = batch_;
  b.seq_len = seq_len_;
  b.input_ids.resize(batch_ * seq_len_);
  b.labels.resize(batch_ * seq_len_);
  for (int64_t r = 0; r < batch_; ++r)
    FillRow(b.input_ids.data() + r * seq_len_, b.labels.data() + r * seq_len_);
  return b;
}

void Packer::Skip(int64_t n) {
  for (int64_t i = 0; i < n; ++i) Next();
}

}  // namespace tlaloc::train
