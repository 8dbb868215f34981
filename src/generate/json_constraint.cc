// The JSON automaton, the vocabulary trie and the per-request constraint (json_constraint.h).
#include "tlaloc/generate/json_constraint.h"

#include <algorithm>
#include <cstring>

#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::generate {

namespace {

constexpr int64_t kFar = int64_t{1} << 40;
constexpr size_t kMaxAlternatives = 32;
constexpr int kMaxDigits = 15, kMaxExponentDigits = 2;

enum FrameKind : uint8_t { kValue, kObject, kArray, kString, kNumber, kLiteral };
enum ObjectPhase : uint8_t { kOpen, kKey, kAfterKey, kInValue, kAfterValue, kAfterComma };
enum ArrayPhase : uint8_t { kArrayOpen, kArrayInValue, kArrayAfterValue };
enum StringPhase : uint8_t { kText, kEscape, kHex };
enum NumberPhase : uint8_t { kBegin, kSign, kZero, kInt, kDot, kFrac, kE, kESign, kExp };
enum Flags : uint8_t { kSpaceOk = 1, kFreeKey = 2 };

bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }
bool IsHex(uint8_t b) { return IsDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// One byte of UTF-8 inside a string: false when it cannot come next.
bool Utf8Step(JsonFrame& f, uint8_t b) {
  if (f.utf8_need > 0) {
    if (b < f.utf8_lo || b > f.utf8_hi) return false;
    --f.utf8_need;
    f.utf8_lo = 0x80;
    f.utf8_hi = 0xBF;
    return true;
  }
  if (b < 0x80) return b >= 0x20;
  auto need = [&](uint8_t n, uint8_t lo, uint8_t hi) {
    f.utf8_need = n;
    f.utf8_lo = lo;
    f.utf8_hi = hi;
    return true;
  };
  if (b >= 0xC2 && b <= 0xDF) return need(1, 0x80, 0xBF);
  if (b == 0xE0) return need(2, 0xA0, 0xBF);
  if (b == 0xED) return need(2, 0x80, 0x9F);  // no surrogates
  if (b >= 0xE1 && b <= 0xEF) return need(2, 0x80, 0xBF);
  if (b == 0xF0) return need(3, 0x90, 0xBF);
  if (b >= 0xF1 && b <= 0xF3) return need(3, 0x80, 0xBF);
  if (b == 0xF4) return need(3, 0x80, 0x8F);
  return false;
}

JsonFrame Frame(uint8_t kind, int32_t node, uint8_t phase = 0, uint8_t flags = 0) {
  JsonFrame f;
  f.kind = kind;
  f.node = node;
  f.phase = phase;
  f.flags = flags;
  return f;
}

}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar)
    : grammar_(std::move(grammar)) {}

JsonState JsonMatcher::Start() const {
  JsonState s;
  s.frames.push_back(Frame(kValue, grammar_->root()));
  s.sizes.push_back(1);
  return s;
}

JsonMatcher::Fed JsonMatcher::Feed(std::vector<JsonFrame>& stack, uint8_t b) const {
  const auto& nodes = grammar_->nodes();
  auto reachable = [&](int n) { return n >= 0 && nodes[n].min_len < kFar; };
  // The top frame is done: its parent (an object or array reading a value) moves on.
  auto pop = [&] {
    stack.pop_back();
    if (!stack.empty())
      stack.back().phase =
          stack.back().kind == kObject ? uint8_t{kAfterValue} : uint8_t{kArrayAfterValue};
  };
  while (true) {
    if (stack.empty()) return Fed::kDead;  // nothing may follow the value
    JsonFrame& f = stack.back();
    const JsonNode& node = nodes[f.node];
    switch (f.kind) {
      case kValue:
        if ((f.flags & kSpaceOk) && b == ' ') {
          f.flags = 0;
          return Fed::kOk;
        }
        switch (node.kind) {
          case JsonKind::kAnyOf:
            return Fed::kExpand;
          case JsonKind::kObject:
          case JsonKind::kArray: {
            const bool object = node.kind == JsonKind::kObject;
            if (b != (object ? '{' : '[') || stack.size() > kMaxJsonDepth) return Fed::kDead;
            f = Frame(object ? kObject : kArray, f.node);
            return Fed::kOk;
          }
          case JsonKind::kString:
            if (b != '"') return Fed::kDead;
            f = Frame(kString, f.node);
            return Fed::kOk;
          case JsonKind::kNumber:
          case JsonKind::kInteger:
            if (b != '-' && !IsDigit(b)) return Fed::kDead;
            f = Frame(kNumber, f.node, kBegin);
            continue;
          case JsonKind::kLiterals:
            f = Frame(kLiteral, f.node);
            f.hi = static_cast<int32_t>(node.literals.size());
            continue;
        }
        return Fed::kDead;
      case kObject: {
        auto more_members = [&] {
          if (node.additional >= 0) return true;
          for (size_t i = 0; i < node.names.size(); ++i)
            if (!(f.seen >> i & 1) && reachable(node.values[i])) return true;
          return false;
        };
        auto open_key = [&] {
          if (!more_members()) return Fed::kDead;
          f.phase = kKey;
          f.lo = 0;
          f.hi = static_cast<int32_t>(node.names.size());
          f.pos = 0;
          f.flags = node.names.empty() ? kFreeKey : 0;
          f.utf8_need = 0;
          return Fed::kOk;
        };
        const bool closable = (node.required & ~f.seen) == 0;
        switch (f.phase) {
          case kOpen:
            if (b == '"') return open_key();
            if (b == '}' && closable) {
              pop();
              return Fed::kOk;
            }
            return Fed::kDead;
          case kKey: {
            const bool free = f.flags & kFreeKey;
            if (b == '"') {
              if (f.utf8_need) return Fed::kDead;
              int prop = -1;
              if (!free && f.lo < f.hi && static_cast<int32_t>(node.names[f.lo].size()) == f.pos)
                prop = f.lo;
              if (prop >= 0 && ((f.seen >> prop & 1) || !reachable(node.values[prop])))
                return Fed::kDead;  // a duplicate key
              if (prop < 0 && node.additional < 0) return Fed::kDead;
              if (prop >= 0) f.seen |= uint64_t{1} << prop;
              f.prop = prop;
              f.phase = kAfterKey;
              return Fed::kOk;
            }
            if (b == '\\' && free) return Fed::kDead;
            if (!Utf8Step(f, b)) return Fed::kDead;
            if (free) return Fed::kOk;
            int32_t lo = f.lo, hi = f.hi;
            auto byte_at = [&](int32_t i) {
              const std::string& n = node.names[i];
              return static_cast<int32_t>(n.size()) > f.pos ? static_cast<uint8_t>(n[f.pos]) : -1;
            };
            while (lo < hi && byte_at(lo) != b) ++lo;
            hi = lo;
            while (hi < f.hi && byte_at(hi) == b) ++hi;
            bool unseen = false;
            for (int32_t i = lo; i < hi && !unseen; ++i)
              unseen = !(f.seen >> i & 1) && reachable(node.values[i]);
            if (unseen || (lo < hi && node.additional >= 0)) {
              f.lo = lo;
              f.hi = hi;
              ++f.pos;
              return Fed::kOk;
            }
            if (node.additional < 0 || b == '\\') return Fed::kDead;
            f.flags |= kFreeKey;
            return Fed::kOk;
          }
          case kAfterKey: {
            if (b != ':') return Fed::kDead;
            const int value = f.prop >= 0 ? node.values[f.prop] : node.additional;
            f.phase = kInValue;
            stack.push_back(Frame(kValue, value, 0, kSpaceOk));
            return Fed::kOk;
          }
          case kAfterValue:
            if (b == ',') {
              if (!more_members()) return Fed::kDead;
              f.phase = kAfterComma;
              f.flags = kSpaceOk;
              return Fed::kOk;
            }
            if (b == '}' && closable) {
              pop();
              return Fed::kOk;
            }
            return Fed::kDead;
          case kAfterComma:
            if (b == ' ' && (f.flags & kSpaceOk)) {
              f.flags = 0;
              return Fed::kOk;
            }
            if (b == '"') return open_key();
            return Fed::kDead;
          default:
            return Fed::kDead;
        }
      }
      case kArray:
        if (f.phase == kArrayOpen || f.phase == kArrayAfterValue) {
          if (b == ']') {
            pop();
            return Fed::kOk;
          }
          if (!reachable(node.items)) return Fed::kDead;
          if (f.phase == kArrayAfterValue) {
            if (b != ',') return Fed::kDead;
            f.phase = kArrayInValue;
            stack.push_back(Frame(kValue, node.items, 0, kSpaceOk));
            return Fed::kOk;
          }
          f.phase = kArrayInValue;
          stack.push_back(Frame(kValue, node.items));
          continue;  // the byte starts the first item
        }
        return Fed::kDead;
      case kString:
        if (f.phase == kEscape) {
          if (b == 'u') {
            f.phase = kHex;
            f.pos = 0;
            return Fed::kOk;
          }
          if (!std::strchr("\"\\/bfnrt", b) || b == 0) return Fed::kDead;
          f.phase = kText;
          return Fed::kOk;
        }
        if (f.phase == kHex) {
          // \uD800-\uDFFF (surrogates) are left out: a lone one is not text.
          if (!IsHex(b) || (f.pos == 0 && (b == 'd' || b == 'D'))) return Fed::kDead;
          if (++f.pos == 4) f.phase = kText;
          return Fed::kOk;
        }
        if (b == '"' || b == '\\') {
          if (f.utf8_need) return Fed::kDead;
          if (b == '\\') {
            f.phase = kEscape;
          } else {
            pop();
          }
          return Fed::kOk;
        }
        return Utf8Step(f, b) ? Fed::kOk : Fed::kDead;
      case kNumber: {
        const bool integer = node.kind == JsonKind::kInteger;
        auto fraction_or_exponent = [&]() -> int {
          if (integer) return -1;
          if (b == '.' && (f.phase == kZero || f.phase == kInt)) return kDot;
          if (b == 'e' || b == 'E') return kE;
          return -1;
        };
        switch (f.phase) {
          case kBegin:
          case kSign:
            if (f.phase == kBegin && b == '-') {
              f.phase = kSign;
              return Fed::kOk;
            }
            if (!IsDigit(b)) return Fed::kDead;
            f.phase = b == '0' ? kZero : kInt;
            f.pos = 1;
            return Fed::kOk;
          case kZero:
          case kInt:
          case kFrac:
          case kExp: {
            if (IsDigit(b) && f.phase != kZero) {
              if (++f.pos > (f.phase == kExp ? kMaxExponentDigits : kMaxDigits)) return Fed::kDead;
              return Fed::kOk;
            }
            if (f.phase != kExp) {
              const int next = fraction_or_exponent();
              if (next >= 0) {
                f.phase = static_cast<uint8_t>(next);
                f.pos = 0;
                return Fed::kOk;
              }
            }
            if (IsDigit(b)) return Fed::kDead;
            pop();
            continue;  // the byte belongs to what follows the number
          }
          case kDot:
            if (!IsDigit(b)) return Fed::kDead;
            f.phase = kFrac;
            f.pos = 1;
            return Fed::kOk;
          case kE:
          case kESign:
            if (f.phase == kE && (b == '+' || b == '-')) {
              f.phase = kESign;
              return Fed::kOk;
            }
            if (!IsDigit(b)) return Fed::kDead;
            f.phase = kExp;
            f.pos = 1;
            return Fed::kOk;
        }
        return Fed::kDead;
      }
      case kLiteral: {
        const auto& lits = node.literals;
        auto byte_at = [&](int32_t i) {
          return static_cast<int32_t>(lits[i].size()) > f.pos ? static_cast<uint8_t>(lits[i][f.pos])
                                                              : -1;
        };
        int32_t lo = f.lo;
        while (lo < f.hi && byte_at(lo) != b) ++lo;
        int32_t hi = lo;
        while (hi < f.hi && byte_at(hi) == b) ++hi;
        if (lo < hi) {
          f.lo = lo;
          f.hi = hi;
          ++f.pos;
          if (hi - lo == 1 && static_cast<int32_t>(lits[lo].size()) == f.pos) pop();
          return Fed::kOk;
        }
        if (static_cast<int32_t>(lits[f.lo].size()) != f.pos) return Fed::kDead;
        pop();
        continue;
      }
    }
    return Fed::kDead;
  }
}

void JsonMatcher::Advance(const JsonState& in, uint8_t b, JsonState& out) const {
  out.frames.clear();
  out.sizes.clear();
  size_t offset = 0, pending = 0;
  auto slot = [&]() -> std::vector<JsonFrame>& {
    if (work_.size() <= pending) work_.resize(pending + 1);
    return work_[pending++];
  };
  for (uint16_t n : in.sizes) {
    slot().assign(in.frames.begin() + offset, in.frames.begin() + offset + n);
    offset += n;
    while (pending > 0) {
      std::vector<JsonFrame>& stack = work_[--pending];
      const Fed fed = Feed(stack, b);
      if (fed == Fed::kExpand) {
        // The value starts here: one alternative per option, each fed the byte again.
        expand_.assign(stack.begin(), stack.end());
        const JsonNode& node = grammar_->nodes()[expand_.back().node];
        for (int option : node.options) {
          std::vector<JsonFrame>& copy = slot();
          copy.assign(expand_.begin(), expand_.end());
          copy.back() = Frame(kValue, option);
        }
        continue;
      }
      if (fed == Fed::kDead || out.sizes.size() >= kMaxAlternatives) continue;
      // Alternatives that reach the same stack are one.
      bool duplicate = false;
      size_t o = 0;
      for (uint16_t m : out.sizes) {
        if (m == stack.size() && std::equal(stack.begin(), stack.end(), out.frames.begin() + o))
          duplicate = true;
        o += m;
      }
      if (duplicate) continue;
      out.frames.insert(out.frames.end(), stack.begin(), stack.end());
      out.sizes.push_back(static_cast<uint16_t>(stack.size()));
    }
  }
}

bool JsonMatcher::Complete(const JsonState& s) const {
  size_t offset = 0;
  for (uint16_t n : s.sizes) {
    if (n == 0) return true;
    if (n == 1) {
      const JsonFrame& f = s.frames[offset];
      if (f.kind == kNumber &&
          (f.phase == kZero || f.phase == kInt || f.phase == kFrac || f.phase == kExp))
        return true;
      if (f.kind == kLiteral &&
          static_cast<int32_t>(grammar_->nodes()[f.node].literals[f.lo].size()) == f.pos)
        return true;
    }
    offset += n;
  }
  return false;
}

int64_t JsonMatcher::MemberCost(const JsonNode& node, int prop) const {
  const auto& nodes = grammar_->nodes();
  if (prop < 0) return node.additional < 0 ? kFar : 3 + nodes[node.additional].min_len;
  return static_cast<int64_t>(node.names[prop].size()) + 3 + nodes[node.values[prop]].min_len;
}

int64_t JsonMatcher::RequiredCost(const JsonNode& node, uint64_t seen, bool first) const {
  int64_t cost = 0, count = 0;
  for (size_t i = 0; i < node.names.size(); ++i)
    if ((node.required >> i & 1) && !(seen >> i & 1)) {
      cost += MemberCost(node, static_cast<int>(i));
      ++count;
    }
  return cost + (count > 0 ? count - (first ? 1 : 0) : 0);
}

int64_t JsonMatcher::FrameCost(const JsonFrame& f) const {
  const auto& nodes = grammar_->nodes();
  const JsonNode& node = nodes[f.node];
  switch (f.kind) {
    case kValue:
      return node.min_len;
    case kArray:
      return 1;
    case kString:
      return f.utf8_need + (f.phase == kEscape ? 1 : f.phase == kHex ? 4 - f.pos : 0) + 1;
    case kNumber:
      return (f.phase == kZero || f.phase == kInt || f.phase == kFrac || f.phase == kExp) ? 0 : 1;
    case kLiteral: {
      int64_t best = kFar;
      for (int32_t i = f.lo; i < f.hi; ++i)
        best = std::min<int64_t>(best, static_cast<int64_t>(node.literals[i].size()) - f.pos);
      return best;
    }
    case kObject:
      switch (f.phase) {
        case kOpen:
          return RequiredCost(node, f.seen, true) + 1;
        case kAfterKey: {
          const int value = f.prop >= 0 ? node.values[f.prop] : node.additional;
          return 1 + nodes[value].min_len + RequiredCost(node, f.seen, false) + 1;
        }
        case kInValue:
        case kAfterValue:
          return RequiredCost(node, f.seen, false) + 1;
        case kAfterComma: {
          if ((node.required & ~f.seen) != 0) return RequiredCost(node, f.seen, true) + 1;
          int64_t best = MemberCost(node, -1);
          for (size_t i = 0; i < node.names.size(); ++i)
            if (!(f.seen >> i & 1)) best = std::min(best, MemberCost(node, static_cast<int>(i)));
          return best + 1;
        }
        case kKey: {
          const int64_t tail = f.utf8_need;
          const int64_t other = node.additional < 0 ? kFar
                                                    : 2 + nodes[node.additional].min_len +
                                                          RequiredCost(node, f.seen, false) + 1;
          if (f.flags & kFreeKey) return tail + other;
          int64_t best = kFar;
          bool exact = false;
          for (int32_t i = f.lo; i < f.hi; ++i) {
            const int64_t left = static_cast<int64_t>(node.names[i].size()) - f.pos;
            if (left == 0) exact = true;
            if (f.seen >> i & 1) continue;
            best = std::min(best, left + 3 + nodes[node.values[i]].min_len +
                                      RequiredCost(node, f.seen | uint64_t{1} << i, false));
          }
          // Another key (`other` counts its closing quote) closes now, or, when the text so far
          // names a property, one byte later.
          return tail + std::min(best, (exact ? 1 : 0) + other);
        }
      }
      return kFar;
  }
  return kFar;
}

int64_t JsonMatcher::BytesToClose(const JsonState& s) const {
  int64_t best = kFar;
  size_t offset = 0;
  for (uint16_t n : s.sizes) {
    int64_t cost = 0;
    for (size_t i = 0; i < n; ++i) cost += FrameCost(s.frames[offset + i]);
    best = std::min(best, cost);
    offset += n;
  }
  return best;
}

bool JsonMatcher::Matches(std::string_view text) const {
  JsonState s = Start(), next;
  for (char c : text) {
    Advance(s, static_cast<uint8_t>(c), next);
    if (next.dead()) return false;
    std::swap(s, next);
  }
  return Complete(s);
}

}  // namespace tlaloc::generate
