#include "tlaloc/tokenizer/utf8.h"

#include <utf8proc.h>

#include <cstdlib>

namespace tlaloc::utf8 {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the well-formed sequence starting with `lead`, and the allowed range of its second
// byte (Unicode Table 3-7); 0 for a byte that cannot start a sequence.
struct LeadInfo {
  int length;
  unsigned char lo, hi;
};

LeadInfo Lead(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Scans one sequence at s[i]: returns its length when well-formed; otherwise -(length of the
// maximal subpart), at least 1; or 0 when the input ends inside a well-formed prefix.
int Scan(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  LeadInfo info = Lead(b);
  if (info.length == 1) return 1;
  if (info.length == 0) return -1;
  for (int k = 1; k < info.length; ++k) {
    if (i + k >= s.size()) return 0;
    const auto c = static_cast<unsigned char>(s[i + k]);
    const unsigned char lo = k == 1 ? info.lo : 0x80, hi = k == 1 ? info.hi : 0xBF;
    if (c < lo || c > hi) return -k;
  }
  return info.length;
}

}  // namespace

bool IsValid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int n = Scan(s, i);
    if (n <= 0) return false;
    i += n;
  }
  return true;
}

size_t AppendRepaired(std::string_view in, std::string* out, bool final) {
  size_t i = 0, run = 0;  // [run, i) is valid and not yet copied
  while (i < in.size()) {
    if (static_cast<unsigned char>(in[i]) < 0x80) {
      ++i;
      continue;
    }
    int n = Scan(in, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out->append(in.substr(run, i - run));
    if (n == 0) {  // truncated at the end
      if (!final) return i;
      out->append(kReplacement);
      return in.size();
    }
    out->append(kReplacement);
    i += -n;
    run = i;
  }
  out->append(in.substr(run, i - run));
  return in.size();
}

std::string Repair(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  AppendRepaired(in, &out, /*final=*/true);
  return out;
}

std::string Encode(char32_t c) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string Nfc(std::string_view in) {
  // Every code point below U+0300 is NFC-stable and none of them composes with a neighbour, so
  // such text (ASCII, Latin-1) is already NFC; this skips utf8proc for most input.
  bool simple = true;
  for (char ch : in) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0xCC) {  // lead bytes of U+0300 and above
      simple = false;
      break;
    }
  }
  if (simple) return std::string(in);
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                   static_cast<utf8proc_ssize_t>(in.size()), &dst,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return std::string(in);  // only on malformed input, which callers repair first
  std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  std::free(dst);
  return out;
}

char32_t Next(std::string_view s, size_t* pos) {
  size_t i = *pos;
  const auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (i + len > s.size()) len = static_cast<int>(s.size() - i);
  char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *pos = i + len;
  return c;
}

bool IsWhiteSpace(char32_t c) {
  if (c >= 0x09 && c <= 0x0D) return true;
  switch (c) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

}  // namespace tlaloc::utf8
