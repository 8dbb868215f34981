// UTF-8 helpers shared by the tokenizer: validation, repair with U+FFFD, NFC.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tlaloc::utf8 {

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool IsValid(std::string_view s);

// Appends `in` to `out` with each maximal subpart of an ill-formed sequence replaced by U+FFFD
// (Unicode's recommended practice, the one the WHATWG decoder uses). When `final` is false, an
// incomplete but so far well-formed sequence at the end is left unconsumed. Returns the number of
// bytes consumed.
size_t AppendRepaired(std::string_view in, std::string* out, bool final = true);

// `in` with invalid sequences replaced by U+FFFD.
std::string Repair(std::string_view in);

// NFC of well-formed UTF-8 (utf8proc). Text below U+0300 is returned unchanged without a call.
std::string Nfc(std::string_view in);

// The UTF-8 encoding of code point `c` (utf8proc); `c` must be a Unicode scalar value.
std::string Encode(char32_t c);

// Decodes one code point of well-formed UTF-8 at `s[*pos]` and advances `*pos`.
char32_t Next(std::string_view s, size_t* pos);

// Unicode White_Space (what Rust's and Python's strip remove); used for added tokens' lstrip and
// rstrip.
bool IsWhiteSpace(char32_t c);

}  // namespace tlaloc::utf8
