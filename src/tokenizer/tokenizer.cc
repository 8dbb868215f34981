// Encoding and decoding for byte-level BPE (see tokenizer.h for the pipeline).
#include "tlaloc/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "tlaloc/tokenizer/utf8.h"
#include "tokenizer_impl.h"

namespace tlaloc {

namespace {

// Longest pieces worth caching: long pieces rarely repeat, and bounding them bounds the memory.
constexpr size_t kMaxCachedPieceBytes = 256;

// "Word" characters for single_word added tokens: letters, digits, marks and '_' of ASCII, plus
// anything non-ASCII that is not whitespace (a coarse but conservative reading of \w).
bool IsWordByteAt(std::string_view text, size_t pos) {
  auto c = static_cast<unsigned char>(text[pos]);
  if (c < 0x80) return std::isalnum(c) || c == '_';
  return true;
}

struct Piece {
  std::string_view text;
  const AddedToken* added;  // null for ordinary text
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// BPE on one pre-token: a doubly linked list of symbols and a min-heap of candidate merges keyed
// by (rank, position), so each merge costs O(log n) and ties go to the leftmost pair, the order
// the `tokenizers` library and transformers.js both use.
void Tokenizer::Impl::EncodeWord(std::string_view bytes, std::vector<int32_t>* out) const {
  const size_t n = bytes.size();
  if (n == 0) return;
  if (ignore_merges) {
    std::string mapped;
    const auto& alphabet = tokenizer_internal::ByteToCodePoint();
    for (char c : bytes) mapped += utf8::Encode(alphabet[static_cast<uint8_t>(c)]);
    auto it = token_to_id.find(mapped);
    if (it != token_to_id.end() && id_kind[it->second] == 1) {
      out->push_back(it->second);
      return;
    }
  }
  if (n == 1) {
    out->push_back(byte_ids[static_cast<uint8_t>(bytes[0])]);
    return;
  }
  struct Symbol {
    int32_t id, prev, next;
  };
  struct Candidate {
    int32_t rank, pos, left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Symbol> sym(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {byte_ids[static_cast<uint8_t>(bytes[i])], static_cast<int32_t>(i) - 1,
              i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  std::vector<Candidate> heap;
  heap.reserve(n);
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = sym[left].next;
    if (right < 0) return;
    const Merge* m = merges.Find(sym[left].id, sym[right].id);
    if (m == nullptr) return;
    heap.push_back({m->rank, left, sym[left].id, sym[right].id, m->new_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Candidate c = heap.back();
    heap.pop_back();
    // Stale entries: a symbol's string only grows at a fixed start, so equal ids mean the pair
    // is exactly the one this entry was made for.
    Symbol& left = sym[c.pos];
    if (left.id != c.left || left.next < 0 || sym[left.next].id != c.right) continue;
    int32_t right = left.next;
    left.id = c.merged;
    left.next = sym[right].next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    sym[right].id = -1;
    consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

void Tokenizer::Impl::EncodeWordCached(std::string_view bytes, std::vector<int32_t>* out) const {
  if (cache_capacity == 0 || bytes.size() > kMaxCachedPieceBytes || bytes.size() <= 1) {
    EncodeWord(bytes, out);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(bytes);
    if (it != cache.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out->size();
  EncodeWord(bytes, out);
  std::lock_guard<std::mutex> lock(cache_mutex);
  // Dropping everything when full is crude but keeps the cache bounded without LRU bookkeeping
  // on every hit; the working set of a text refills it quickly.
  if (cache.size() >= cache_capacity) cache.clear();
  cache.emplace(std::string(bytes), std::vector<int32_t>(out->begin() + start, out->end()));
}

void Tokenizer::Impl::EncodeSection(std::string_view text, std::vector<int32_t>* out) const {
  std::string normalized;
  if (nfc) {
    normalized = utf8::Nfc(text);
    text = normalized;
  }
  std::vector<std::string_view> pieces{text}, next;
  for (const auto& splitter : splitters) {
    next.clear();
    for (std::string_view p : pieces) splitter->Split(p, &next);
    pieces.swap(next);
  }
  for (std::string_view p : pieces) EncodeWordCached(p, out);
}

// ---------------------------------------------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::string repaired;
  if (!utf8::IsValid(text)) {
    repaired = utf8::Repair(text);
    text = repaired;
  }
  // Split on added tokens first (leftmost, then longest match), so normalization and the
  // pre-tokenizer never see them.
  std::vector<Piece> pieces;
  size_t gap = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& candidates = impl_->added_by_first_byte[static_cast<unsigned char>(text[i])];
    const AddedToken* match = nullptr;
    for (uint32_t index : candidates) {
      const AddedToken& t = impl_->added[index];
      if (t.special && !options.allow_special) continue;
      if (text.size() - i < t.content.size() ||
          std::memcmp(text.data() + i, t.content.data(), t.content.size()) != 0)
        continue;
      if (t.single_word &&
          ((i > 0 && IsWordByteAt(text, i - 1)) ||
           (i + t.content.size() < text.size() && IsWordByteAt(text, i + t.content.size()))))
        continue;
      match = &t;
      break;
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (i > gap) pieces.push_back({text.substr(gap, i - gap), nullptr});
    pieces.push_back({text.substr(i, match->content.size()), match});
    i += match->content.size();
    gap = i;
  }
  if (gap < text.size()) pieces.push_back({text.substr(gap), nullptr});

  // lstrip / rstrip: the added token swallows whitespace next to it.
  for (size_t k = 0; k < pieces.size(); ++k) {
    const AddedToken* added = pieces[k].added;
    if (added == nullptr) continue;
    if (added->lstrip && k > 0 && pieces[k - 1].added == nullptr) {
      std::string_view& prev = pieces[k - 1].text;
      // Trim trailing White_Space code points.
      size_t end = prev.size();
      while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(prev[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!utf8::IsWhiteSpace(utf8::Next(prev, &pos))) break;
        end = start;
      }
      prev = prev.substr(0, end);
    }
    if (added->rstrip && k + 1 < pieces.size() && pieces[k + 1].added == nullptr) {
      std::string_view& next = pieces[k + 1].text;
      size_t pos = 0;
      while (pos < next.size()) {
        size_t p = pos;
        if (!utf8::IsWhiteSpace(utf8::Next(next, &p))) break;
        pos = p;
      }
      next = next.substr(pos);
    }
  }

  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Piece& p : pieces) {
    if (p.added != nullptr) {
      ids.push_back(p.added->id);
    } else if (!p.text.empty()) {
      impl_->EncodeSection(p.text, &ids);
    }
  }
  return ids;
}

StatusOr<std::string> Tokenizer::DecodeBytes(std::span<const int32_t> ids,
                                             const DecodeOptions& options) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (options.skip_unknown_ids && id >= 0 &&
        (static_cast<size_t>(id) >= impl_->id_kind.size() || impl_->id_kind[id] == 0))
      continue;
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_kind.size() || impl_->id_kind[id] == 0)
      return InvalidArgument("decode: id " + std::to_string(id) + " at position " +
                             std::to_string(i) + " is not in the vocabulary (ids 0.." +
                             std::to_string(vocab_size() - 1) + ")");
    if (options.skip_special_tokens && impl_->id_kind[id] == 3) continue;
    out += impl_->id_to_bytes[id];
  }
  return out;
}

StatusOr<std::string> Tokenizer::Decode(std::span<const int32_t> ids,
                                        const DecodeOptions& options) const {
  TL_ASSIGN_OR_RETURN(std::string bytes, DecodeBytes(ids, options));
  if (utf8::IsValid(bytes)) return bytes;
  return utf8::Repair(bytes);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = impl_->token_to_id.find(std::string(token));
  if (it == impl_->token_to_id.end()) return std::nullopt;
  return it->second;
}

StatusOr<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_kind.size() || impl_->id_kind[id] == 0)
    return InvalidArgument("id " + std::to_string(id) + " is not in the vocabulary");
  return impl_->id_to_token[id];
}

StatusOr<std::string> Tokenizer::IdToBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_kind.size() || impl_->id_kind[id] == 0)
    return InvalidArgument("id " + std::to_string(id) + " is not in the vocabulary");
  return impl_->id_to_bytes[id];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_kind.size()); }
size_t Tokenizer::num_merges() const { return impl_->num_merges; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_kind.size() && impl_->id_kind[id] == 3;
}

void Tokenizer::SetCacheCapacity(size_t entries) {
  std::lock_guard<std::mutex> lock(impl_->cache_mutex);
  impl_->cache_capacity = entries;
  impl_->cache.clear();
}

// ---------------------------------------------------------------------------------------------

StatusOr<std::string> StreamDecoder::Push(int32_t id) {
  TL_ASSIGN_OR_RETURN(std::string bytes,
                      tokenizer_->DecodeBytes(std::span<const int32_t>(&id, 1), options_));
  pending_ += bytes;
  std::string out;
  size_t used = utf8::AppendRepaired(pending_, &out, /*final=*/false);
  pending_.erase(0, used);
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out;
  utf8::AppendRepaired(pending_, &out, /*final=*/true);
  pending_.clear();
  return out;
}

}  // namespace tlaloc
