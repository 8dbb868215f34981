// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json (the format of the `tokenizers`
// library), as Qwen2/Qwen3, GPT-2 and Llama-3 style models ship it.
//
// Encoding: text -> (invalid UTF-8 replaced) -> split on added tokens (leftmost, longest) ->
// normalizer (NFC) -> pre-tokenizer regex splits -> bytes mapped to the GPT-2 byte alphabet ->
// BPE merges by rank -> ids. Decoding maps ids back to bytes; added tokens decode to their
// content.
//
// Invalid UTF-8 rule: before anything else, each maximal subpart of an ill-formed sequence is
// replaced by U+FFFD (the Unicode "best practice" that the WHATWG decoder, Node's Buffer and
// TextDecoder follow), so "a\xE4\xB8b" encodes as "a\uFFFDb" and "\xED\xA0\x80" (an encoded
// surrogate) as three U+FFFD. This is exactly what the JavaScript oracle sees when it reads the
// same bytes, which keeps the two encoders in step on arbitrary input.
//
// Regex semantics are PCRE2's with UTF and UCP: \s is Unicode White_Space, as in the Rust
// `tokenizers` library. The JavaScript oracle (transformers.js) differs in one known place:
// ECMAScript's \s also matches U+FEFF (BOM / zero-width no-break space), so a U+FEFF inside a
// run of whitespace splits differently there. Everything else in the parity corpus agrees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;       // absorbs whitespace on its left
  bool rstrip = false;       // absorbs whitespace on its right
  bool single_word = false;  // matches only when not inside a word
  bool normalized = false;   // read but not used: added tokens match on the raw text
};

struct EncodeOptions {
  // When false, special added tokens (<|im_start|> ...) in the text are encoded as ordinary text,
  // so user-supplied content cannot inject control tokens. Non-special added tokens always match.
  bool allow_special = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;
  // Ids past the vocabulary (a model's embedding often has more rows than its tokenizer has
  // ids) decode as nothing, as transformers does, instead of being an error. Negative ids are
  // always an error.
  bool skip_unknown_ids = false;
};

class Tokenizer {
 public:
  // Reads tokenizer.json (or the tokenizer.json inside a directory).
  static StatusOr<Tokenizer> FromFile(const std::string& path);
  // Parses tokenizer.json text; `source` names it in error messages.
  static StatusOr<Tokenizer> FromJson(std::string_view json_text,
                                      const std::string& source = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Never fails: invalid UTF-8 is replaced (see the rule above). Thread-safe.
  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Ids back to text; byte sequences that are not valid UTF-8 (for example a prefix of ids that
  // cuts a character) decode with U+FFFD as in Encode's rule. Unknown ids are an error.
  StatusOr<std::string> Decode(std::span<const int32_t> ids,
                               const DecodeOptions& options = {}) const;
  // The raw bytes of the ids (no UTF-8 repair).
  StatusOr<std::string> DecodeBytes(std::span<const int32_t> ids,
                                    const DecodeOptions& options = {}) const;

  // Vocabulary (model vocab plus added tokens).
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The token's string as stored in tokenizer.json (byte-level alphabet, e.g. "Ġthe").
  StatusOr<std::string> IdToToken(int32_t id) const;
  // The bytes the id decodes to.
  StatusOr<std::string> IdToBytes(int32_t id) const;
  // One past the largest id (model vocab and added tokens).
  int32_t vocab_size() const;
  size_t num_merges() const;
  const std::vector<AddedToken>& added_tokens() const;
  bool IsSpecial(int32_t id) const;

  // The pre-token -> ids cache: entries kept at most (0 disables it; default 65536). Not to be
  // called while another thread is encoding with this tokenizer.
  void SetCacheCapacity(size_t entries);

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into text, emitting only complete UTF-8: bytes of a character split
// across tokens are held until the character is complete. The concatenation of all Push results
// and Finish equals Tokenizer::Decode of all ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(&tokenizer), options_(options) {}
  // The text that became complete with this id (possibly empty).
  StatusOr<std::string> Push(int32_t id);
  // Whatever is still held, with an incomplete character replaced by U+FFFD.
  std::string Finish();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;
};

// The byte-level (GPT-2) alphabet's symbol for byte `b`, as UTF-8: how a tokenizer.json
// vocabulary spells that byte (printable bytes stand for themselves, the others for code points
// from U+0100 up).
std::string ByteLevelSymbol(uint8_t b);

}  // namespace tlaloc
