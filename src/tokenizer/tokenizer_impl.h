// Internal state of a Tokenizer, shared by the loader (tokenizer_json.cc) and the encoder and
// decoder (tokenizer.cc).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "regex_splitter.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc {

struct Tokenizer::Impl {
  // ---- Model (BPE) ----
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  // Pair (left id, right id) -> merge, as an open-addressing table: BPE does one lookup per
  // adjacent pair, which made std::unordered_map's node chasing the cost of uncached encoding.
  class MergeTable {
   public:
    void Reserve(size_t n) {
      size_t cap = 16;
      while (cap < n * 2) cap *= 2;
      slots_.assign(cap, Slot{kEmpty, {0, 0}});
      mask_ = cap - 1;
    }
    // Call Reserve first. A pair listed twice keeps its later rank, as the `tokenizers` library
    // and transformers.js do (both build their rank maps by inserting front to back).
    void Insert(int32_t left, int32_t right, Merge m) {
      const uint64_t key = Key(left, right);
      for (size_t i = Hash(key);; i = (i + 1) & mask_) {
        if (slots_[i].key == kEmpty || slots_[i].key == key) {
          slots_[i] = {key, m};
          return;
        }
      }
    }
    const Merge* Find(int32_t left, int32_t right) const {
      if (slots_.empty()) return nullptr;
      const uint64_t key = Key(left, right);
      for (size_t i = Hash(key);; i = (i + 1) & mask_) {
        if (slots_[i].key == key) return &slots_[i].merge;
        if (slots_[i].key == kEmpty) return nullptr;
      }
    }

   private:
    static constexpr uint64_t kEmpty = ~0ull;  // ids are non-negative, so never a real key
    struct Slot {
      uint64_t key;
      Merge merge;
    };
    static uint64_t Key(int32_t l, int32_t r) {
      return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
    }
    size_t Hash(uint64_t key) const {
      return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0;
  };
  MergeTable merges;
  size_t num_merges = 0;
  std::unordered_map<std::string, int32_t> token_to_id;  // model vocab and added tokens
  std::vector<std::string> id_to_token;                  // "" for ids that do not exist
  std::vector<std::string> id_to_bytes;                  // what each id decodes to
  std::vector<uint8_t> id_kind;                          // 0 none, 1 model, 2 added, 3 special
  std::array<int32_t, 256> byte_ids{};                   // id of each single byte's symbol
  bool ignore_merges = false;

  // ---- Added tokens ----
  std::vector<AddedToken> added;
  // Indices into `added` by the content's first byte, longest content first.
  std::array<std::vector<uint32_t>, 256> added_by_first_byte;

  // ---- Normalizer and pre-tokenizer ----
  bool nfc = false;
  std::vector<std::unique_ptr<tokenizer_internal::RegexSplitter>> splitters;  // applied in order

  // ---- Pre-token cache ----
  // Transparent hashing lets lookups take the piece as a string_view without a copy.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>, PieceHash, std::equal_to<>> cache;
  size_t cache_capacity = 65536;

  // BPE of one pre-token's bytes, appended to `out`.
  void EncodeWord(std::string_view bytes, std::vector<int32_t>* out) const;
  void EncodeWordCached(std::string_view bytes, std::vector<int32_t>* out) const;
  // Normalizes, pre-tokenizes and BPE-encodes text between added tokens.
  void EncodeSection(std::string_view text, std::vector<int32_t>* out) const;
};

namespace tokenizer_internal {
// The GPT-2 byte -> code point table: printable bytes map to themselves, the rest to U+0100+.
const std::array<char32_t, 256>& ByteToCodePoint();
}  // namespace tokenizer_internal

}  // namespace tlaloc
