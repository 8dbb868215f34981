// Tool-call markers in a model's reply: see tlaloc/serve/tool_calls.h.
#include "tlaloc/serve/tool_calls.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <random>

namespace tlaloc::serve {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view LStrip(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

std::string_view RStrip(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// A block's body as a call: a JSON object with a string "name" and optional "arguments" (an
// object, kept as compact JSON text; a string is taken as already-encoded JSON text).
std::optional<ParsedToolCall> ParseBlock(std::string_view body) {
  auto j = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr,
                                         /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return std::nullopt;
  ParsedToolCall call;
  call.id = NewToolCallId();
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end() || args->is_null())
    call.arguments = "{}";
  else if (args->is_string())
    call.arguments = args->get<std::string>();
  else
    call.arguments = args->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return call;
}

// The length of the longest end of `s` that is a proper start of `marker`.
size_t PartialMarker(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

}  // namespace

std::string NewToolCallId() {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kChars) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kChars[pick(rng)];
  return id;
}

ToolCallParse ParseToolCalls(std::string_view text) {
  ToolCallParse out;
  std::string content;
  size_t pos = 0;
  bool after_block = false;
  for (;;) {
    const size_t open = text.find(kToolCallOpen, pos);
    std::string_view segment = text.substr(pos, open == std::string_view::npos ? open : open - pos);
    if (after_block) segment = LStrip(segment);
    if (open != std::string_view::npos) segment = RStrip(segment);
    content += segment;
    if (open == std::string_view::npos) break;
    const size_t body = open + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    auto call =
        ParseBlock(text.substr(body, close == std::string_view::npos ? close : close - body));
    if (!call) return ToolCallParse{std::string(text), {}};
    out.calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;
    pos = close + kToolCallClose.size();
    after_block = true;
  }
  if (out.calls.empty()) return ToolCallParse{std::string(text), {}};
  out.content = std::move(content);
  return out;
}

std::vector<ToolCallStreamer::Item> ToolCallStreamer::Feed(std::string_view delta) {
  pending_.append(delta);
  std::vector<Item> out;
  Drain(out, /*at_end=*/false);
  return out;
}

std::vector<ToolCallStreamer::Item> ToolCallStreamer::Finish() {
  std::vector<Item> out;
  Drain(out, /*at_end=*/true);
  return out;
}

void ToolCallStreamer::Drain(std::vector<Item>& out, bool at_end) {
  auto text = [&](std::string_view t) {
    if (t.empty()) return;
    if (!out.empty() && !out.back().is_call)
      out.back().text.append(t);
    else
      out.push_back(Item{std::string(t), {}, false});
  };
  for (;;) {
    if (!in_block_) {
      if (after_block_) {
        pending_.erase(0, pending_.size() - LStrip(pending_).size());
        if (pending_.empty()) return;
        after_block_ = false;
      }
      const size_t open = pending_.find(kToolCallOpen);
      if (open != std::string::npos) {
        const std::string_view before = RStrip(std::string_view(pending_).substr(0, open));
        text(before);
        ws_before_ = pending_.substr(before.size(), open - before.size());
        pending_.erase(0, open + kToolCallOpen.size());
        in_block_ = true;
        continue;
      }
      // Hold back what may start a marker, and the whitespace before it (dropped if a call
      // follows).
      size_t keep = 0;
      if (!at_end) {
        keep = PartialMarker(pending_, kToolCallOpen);
        const std::string_view rest = std::string_view(pending_).substr(0, pending_.size() - keep);
        keep += rest.size() - RStrip(rest).size();
      }
      text(std::string_view(pending_).substr(0, pending_.size() - keep));
      pending_.erase(0, pending_.size() - keep);
      return;
    }
    const size_t close = pending_.find(kToolCallClose);
    if (close == std::string::npos && !at_end) return;
    const std::string_view body = std::string_view(pending_).substr(0, close);
    if (auto call = ParseBlock(body)) {
      out.push_back(Item{"", std::move(*call), true});
      ++calls_sent_;
      after_block_ = true;
    } else {
      text(ws_before_);
      text(kToolCallOpen);
      text(body);
      if (close != std::string::npos) text(kToolCallClose);
    }
    ws_before_.clear();
    in_block_ = false;
    pending_.erase(0, close == std::string::npos ? pending_.size() : close + kToolCallClose.size());
    if (at_end && pending_.empty()) return;
  }
}

}  // namespace tlaloc::serve
