// Structured output (OpenAI's response_format): a grammar of JSON values, compiled from "any JSON
// object" or from a JSON schema, matched byte by byte by a pushdown automaton, and a
// TokenConstraint that turns the automaton's state into the allowed-token mask of each step by
// walking a trie of the vocabulary's byte strings.
//
// The schema subset (anything else is refused by keyword): type (a name or a list of names:
// object, array, string, number, integer, boolean, null), properties, required,
// additionalProperties (a boolean or a schema), items, enum, const, anyOf, $ref to "#/$defs/..." or
// "#/definitions/..." (with $defs/definitions), and the annotations title, description, default,
// examples, $schema, $id, $comment, strict (ignored).
//
// The text is compact JSON with bounded whitespace: none, except at most one space after ':' and
// ','. Strings are valid UTF-8 without raw control characters; escapes are \" \\ \/ \b \f \n \r \t
// and \uXXXX (not surrogates); keys outside `properties` take no escapes. Numbers have at most 15
// integer digits, 15 fraction digits and 2 exponent digits. Nesting is capped at kMaxJsonDepth.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tlaloc/nn/token_constraint.h"
#include "tlaloc/support/status.h"

namespace tlaloc {
class Tokenizer;
}

namespace tlaloc::generate {

inline constexpr int kMaxJsonDepth = 32;

enum class JsonKind : uint8_t { kObject, kArray, kString, kNumber, kInteger, kLiterals, kAnyOf };

struct JsonNode {
  JsonKind kind = JsonKind::kAnyOf;
  // kObject: property names as JSON-escaped text without quotes (sorted), their value nodes,
  // the required ones (bit i: names[i]), and the node of other keys (-1: none allowed).
  std::vector<std::string> names;
  std::vector<int> values;
  uint64_t required = 0;
  int additional = -1;
  int items = -1;                     // kArray: the node of every item
  std::vector<std::string> literals;  // kLiterals: compact JSON texts (sorted, distinct)
  std::vector<int> options;           // kAnyOf: the alternatives
  int64_t min_len = 0;                // bytes of the shortest value
};

class JsonGrammar {
 public:
  // Any JSON object (response_format {"type": "json_object"}).
  static std::shared_ptr<const JsonGrammar> AnyObject();
  // A JSON schema of the subset above; errors name the keyword and where it is (a JSON pointer):
  // Unimplemented for a keyword outside the subset, InvalidArgument for a malformed schema.
  static StatusOr<std::shared_ptr<const JsonGrammar>> FromSchema(const nlohmann::json& schema);

  const std::vector<JsonNode>& nodes() const { return nodes_; }
  int root() const { return root_; }

 private:
  friend class SchemaCompiler;
  std::vector<JsonNode> nodes_;
  int root_ = 0;
};

// One frame of the automaton's stack (plain data: states are copied, compared and hashed bytewise).
struct JsonFrame {
  uint8_t kind = 0, phase = 0, flags = 0, utf8_need = 0;
  uint8_t utf8_lo = 0, utf8_hi = 0, pad0 = 0, pad1 = 0;
  int32_t node = 0;
  int32_t lo = 0, hi = 0, pos = 0;  // candidate range and byte position (literals, keys); digits
  int32_t prop = -1;                // object: the property whose value is read (-1: another key)
  uint64_t seen = 0;                // object: properties written
  bool operator==(const JsonFrame&) const = default;
};

// The automaton's state: the stacks of the alternatives still alive (anyOf forks them).
struct JsonState {
  std::vector<JsonFrame> frames;
  std::vector<uint16_t> sizes;  // frames of each alternative, in order
  bool dead() const { return sizes.empty(); }
};

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar);
  const JsonGrammar& grammar() const { return *grammar_; }

  JsonState Start() const;
  // `in` advanced by one byte into `out` (dead when the byte cannot come next).
  void Advance(const JsonState& in, uint8_t byte, JsonState& out) const;
  // Whether the text so far is a whole value of the grammar.
  bool Complete(const JsonState& s) const;
  // Bytes of the shortest text that completes the value (a large number when dead).
  int64_t BytesToClose(const JsonState& s) const;
  // Whether the whole of `text` is a value of the grammar.
  bool Matches(std::string_view text) const;

 private:
  enum class Fed { kOk, kDead, kExpand };
  Fed Feed(std::vector<JsonFrame>& stack, uint8_t b) const;
  int64_t StackCost(const JsonFrame* frames, size_t n) const;
  int64_t FrameCost(const JsonFrame& f) const;
  int64_t RequiredCost(const JsonNode& node, uint64_t seen, bool first) const;
  int64_t MemberCost(const JsonNode& node, int prop) const;

  std::shared_ptr<const JsonGrammar> grammar_;
  mutable std::vector<std::vector<JsonFrame>> work_;
  mutable std::vector<JsonFrame> expand_;
};

// The vocabulary's byte strings as a trie (shared by every constrained request of a model).
// Special and added tokens are left out (their text is never part of a value); end tokens are
// kept apart.
class TokenTrie {
 public:
  // `bytes[id]`: the id's bytes (empty: never allowed).
  TokenTrie(const std::vector<std::string>& bytes, std::vector<int32_t> eos_ids);
  static std::shared_ptr<const TokenTrie> FromTokenizer(const Tokenizer& tokenizer,
                                                        std::vector<int32_t> eos_ids);

  struct Edge {
    uint8_t byte;
    int32_t child;
  };
  struct Node {
    int32_t edge_begin = 0, edge_end = 0;    // into edges()
    int32_t token_begin = 0, token_end = 0;  // ids spelled by the path to this node
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  const std::string& bytes(int32_t id) const { return bytes_.at(id); }
  int64_t vocab_size() const { return static_cast<int64_t>(bytes_.size()); }

 private:
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_, eos_ids_;
  std::vector<std::string> bytes_;
};

// The constraint of one request: the reply is a value of `grammar` followed by an end token.
// `max_tokens` (0: none) is the reply's budget: once the tokens left get close to the bytes still
// needed to close the value, only tokens that leave room to close it (and then the end token) are
// allowed, so a reply cut by the budget still parses.
class JsonConstraint : public nn::TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 int64_t max_tokens = 0);
  void AllowedMask(std::span<uint8_t> mask) override;
  Status Accept(int32_t token) override;
  int64_t accepted() const override { return accepted_; }
  bool Complete() const override { return matcher_.Complete(state_); }
  std::shared_ptr<nn::TokenConstraint> Restarted() const override {
    return std::make_shared<JsonConstraint>(grammar_, trie_, max_tokens_);
  }

  // Masks computed and masks served from the cache (a reply inside a long string keeps one
  // state), for the benchmark and tests.
  int64_t masks_computed() const { return computed_; }
  int64_t masks_cached() const { return cached_; }

 private:
  void Walk(int32_t node, int depth, std::vector<uint8_t>& mask, int64_t limit, int64_t now_cost,
            int64_t& max_cost);

  std::shared_ptr<const JsonGrammar> grammar_;
  JsonMatcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  int64_t max_tokens_ = 0, accepted_ = 0, computed_ = 0, cached_ = 0;
  JsonState state_;
  std::vector<JsonState> scratch_;  // one state per trie depth
  // Grammar-only masks by state, with the largest BytesToClose among the tokens they allow
  // (below the budget they are what the budget gives too).
  struct Cached {
    std::vector<uint8_t> mask;
    int64_t max_cost = 0;
  };
  std::unordered_map<std::string, Cached> cache_;
};

// The grammar of a response_format object ({"type": "text" | "json_object" | "json_schema",
// "json_schema": {"name", "schema", "strict"}}); null for "text". Errors name the field.
StatusOr<std::shared_ptr<const JsonGrammar>> GrammarOfResponseFormat(
    const nlohmann::json& response_format);

}  // namespace tlaloc::generate
