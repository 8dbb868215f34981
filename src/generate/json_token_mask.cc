// The vocabulary trie and JsonConstraint: the allowed-token mask of a step is a walk of the trie
// from the automaton's state, each edge one byte, pruned where the automaton dies.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "tlaloc/generate/json_constraint.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::generate {

namespace {

// Builds the node for the ids `order[a, b)` (sorted by bytes), which share `depth` bytes.
void BuildTrie(const std::vector<std::string>& bytes, const std::vector<int32_t>& order, size_t a,
               size_t b, size_t depth, std::vector<TokenTrie::Node>& nodes,
               std::vector<TokenTrie::Edge>& edges, std::vector<int32_t>& tokens, int32_t self) {
  nodes[self].token_begin = static_cast<int32_t>(tokens.size());
  while (a < b && bytes[order[a]].size() == depth) tokens.push_back(order[a++]);
  nodes[self].token_end = static_cast<int32_t>(tokens.size());
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t i = a; i < b;) {
    size_t j = i;
    while (j < b && bytes[order[j]][depth] == bytes[order[i]][depth]) ++j;
    groups.push_back({i, j});
    i = j;
  }
  const int32_t first = static_cast<int32_t>(edges.size());
  nodes[self].edge_begin = first;
  nodes[self].edge_end = first + static_cast<int32_t>(groups.size());
  edges.resize(edges.size() + groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const int32_t child = static_cast<int32_t>(nodes.size());
    nodes.emplace_back();
    edges[first + g] = {static_cast<uint8_t>(bytes[order[groups[g].first]][depth]), child};
    BuildTrie(bytes, order, groups[g].first, groups[g].second, depth + 1, nodes, edges, tokens,
              child);
  }
}

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& bytes, std::vector<int32_t> eos_ids)
    : eos_ids_(std::move(eos_ids)), bytes_(bytes) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes.size(); ++id)
    if (!bytes[id].empty() &&
        std::find(eos_ids_.begin(), eos_ids_.end(), static_cast<int32_t>(id)) == eos_ids_.end())
      order.push_back(static_cast<int32_t>(id));
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return bytes[x] < bytes[y] || (bytes[x] == bytes[y] && x < y);
  });
  nodes_.emplace_back();
  BuildTrie(bytes, order, 0, order.size(), 0, nodes_, edges_, tokens_, 0);
}

std::shared_ptr<const TokenTrie> TokenTrie::FromTokenizer(const Tokenizer& tokenizer,
                                                          std::vector<int32_t> eos_ids) {
  std::set<int32_t> added;
  for (const AddedToken& t : tokenizer.added_tokens()) added.insert(t.id);
  std::vector<std::string> bytes(tokenizer.vocab_size());
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (added.count(id) || tokenizer.IsSpecial(id)) continue;
    if (auto b = tokenizer.IdToBytes(id); b.ok()) bytes[id] = std::move(*b);
  }
  return std::make_shared<const TokenTrie>(bytes, std::move(eos_ids));
}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar,
                               std::shared_ptr<const TokenTrie> trie, int64_t max_tokens)
    : grammar_(grammar), matcher_(std::move(grammar)), trie_(std::move(trie)), max_tokens_(max_tokens) {
  state_ = matcher_.Start();
}

void JsonConstraint::Walk(int32_t node, int depth, std::vector<uint8_t>& mask, int64_t limit,
                          int64_t now_cost, int64_t& max_cost) {
  const auto& nodes = trie_->nodes();
  const auto& edges = trie_->edges();
  const auto& tokens = trie_->tokens();
  if (static_cast<int>(scratch_.size()) <= depth + 1) scratch_.resize(depth + 2);
  for (int32_t e = nodes[node].edge_begin; e < nodes[node].edge_end; ++e) {
    matcher_.Advance(scratch_[depth], edges[e].byte, scratch_[depth + 1]);
    if (scratch_[depth + 1].dead()) continue;
    const TokenTrie::Node& child = nodes[edges[e].child];
    if (child.token_begin < child.token_end) {
      // Costs matter only with a budget: below it every token that parses is allowed.
      const int64_t cost = max_tokens_ > 0 ? matcher_.BytesToClose(scratch_[depth + 1]) : 0;
      max_cost = std::max(max_cost, cost);
      const bool fits = limit < 0 || cost <= limit || cost < now_cost;
      if (fits)
        for (int32_t t = child.token_begin; t < child.token_end; ++t) mask[tokens[t]] = 1;
    }
    Walk(edges[e].child, depth + 1, mask, limit, now_cost, max_cost);
  }
}

void JsonConstraint::AllowedMask(std::span<uint8_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  const int64_t vocab = trie_->vocab_size();
  // After the end token nothing more is allowed but another end token.
  const bool complete = matcher_.Complete(state_);
  // Tokens left after the next one; the end token needs one of them.
  const int64_t left = max_tokens_ > 0 ? max_tokens_ - accepted_ - 1 : -1;
  std::string key(reinterpret_cast<const char*>(state_.frames.data()),
                  state_.frames.size() * sizeof(JsonFrame));
  key.append(reinterpret_cast<const char*>(state_.sizes.data()),
             state_.sizes.size() * sizeof(uint16_t));
  const std::vector<uint8_t>* grammar_mask = nullptr;
  std::vector<uint8_t> budget_mask;
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    if (cache_.size() >= 32) cache_.clear();
    Cached entry;
    entry.mask.assign(vocab, 0);
    scratch_.resize(1);
    scratch_[0] = state_;
    Walk(0, 0, entry.mask, -1, 0, entry.max_cost);
    it = cache_.emplace(std::move(key), std::move(entry)).first;
    ++computed_;
  } else {
    ++cached_;
  }
  grammar_mask = &it->second.mask;
  if (left >= 0 && left - 1 < it->second.max_cost) {
    // Near the end of the budget: only tokens after which the value can still be closed (and the
    // end token written), or that bring its close nearer.
    budget_mask.assign(vocab, 0);
    scratch_.resize(1);
    scratch_[0] = state_;
    int64_t unused = 0;
    Walk(0, 0, budget_mask, left - 1, matcher_.BytesToClose(state_), unused);
    grammar_mask = &budget_mask;
    ++computed_;
  }
  const size_t n = std::min<size_t>(mask.size(), grammar_mask->size());
  std::copy_n(grammar_mask->begin(), n, mask.begin());
  if (complete)
    for (int32_t id : trie_->eos_ids())
      if (id >= 0 && static_cast<size_t>(id) < mask.size()) mask[id] = 1;
}

Status JsonConstraint::Accept(int32_t token) {
  const auto& eos = trie_->eos_ids();
  if (std::find(eos.begin(), eos.end(), token) != eos.end()) {
    if (!matcher_.Complete(state_))
      return InvalidArgument("structured output: the end token " + std::to_string(token) +
                             " came before the JSON value was complete");
    // Only end tokens may follow: an empty-stack state refuses every byte.
    state_.frames.clear();
    state_.sizes.assign(1, 0);
    ++accepted_;
    return OkStatus();
  }
  if (token < 0 || token >= trie_->vocab_size() || trie_->bytes(token).empty())
    return InvalidArgument("structured output: token " + std::to_string(token) +
                           " has no text the JSON grammar can take");
  JsonState next;
  for (char c : trie_->bytes(token)) {
    matcher_.Advance(state_, static_cast<uint8_t>(c), next);
    if (next.dead())
      return InvalidArgument("structured output: token " + std::to_string(token) + " (\"" +
                             trie_->bytes(token) + "\") cannot come next in the JSON value");
    std::swap(state_, next);
  }
  ++accepted_;
  return OkStatus();
}

}  // namespace tlaloc::generate
