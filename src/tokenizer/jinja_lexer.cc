// The Jinja lexer: template text and tags, with jinja2's whitespace rules as transformers sets
// them (trim_blocks: the newline after a block or comment tag goes; lstrip_blocks: spaces and
// tabs before a block or comment tag on its own line go; `-` strips all whitespace on that side,
// `+` keeps it), newlines normalised to \n and one trailing newline dropped.
#include <cctype>

#include "jinja_internal.h"

namespace tlaloc::jinja {

Status ErrorAt(Pos pos, const std::string& what) {
  return InvalidArgument("template line " + std::to_string(pos.line) + ", column " +
                         std::to_string(pos.col) + ": " + what);
}

namespace {

bool IsWs(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t start = FindTagStart(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      if (start == src_.size()) {
        Emit(Tok::kText, text, pos_);
        pos_ = start;
        break;
      }
      const char kind = src_[start + 1];  // '{', '%' or '#'
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && IsWs(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: only whitespace between the line's start and the tag.
        size_t nl = text.rfind('\n');
        size_t l = nl == std::string::npos ? 0 : nl + 1;
        if ((l > 0 || line_starting) && l < text.size()) {
          bool all_ws = true;
          for (size_t i = l; i < text.size(); ++i) all_ws = all_ws && IsWs(text[i]);
          if (all_ws) text.resize(l);
        }
      }
      Emit(Tok::kText, text, pos_);
      size_t body = start + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') {
        size_t end = src_.find("#}", body);
        if (end == std::string::npos) return ErrorAt(PosOf(start), "unclosed comment '{#'");
        pos_ = end + 2;
        line_starting = TrimAfter(end > body ? src_[end - 1] : '\0', true);
        continue;
      }
      if (kind == '%' && TryRaw(start, body, &line_starting)) continue;
      Emit(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", start);
      pos_ = body;
      TL_RETURN_IF_ERROR(LexTag(kind, start, &line_starting));
    }
    Emit(Tok::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  // After an end tag at pos_ (already past it): `-` strips whitespace, trim_blocks (for blocks
  // and comments) drops one newline. Returns whether the consumed text ended a line.
  bool TrimAfter(char sign, bool block) {
    bool newline = false;
    if (sign == '-') {
      while (pos_ < src_.size() && IsWs(src_[pos_])) newline = src_[pos_++] == '\n';
    } else if (sign != '+' && block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      newline = true;
    }
    return newline;
  }

  // {% raw %}...{% endraw %}: the text between is data.
  bool TryRaw(size_t start, size_t body, bool* line_starting) {
    size_t i = body;
    while (i < src_.size() && IsWs(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0 || (i + 3 < src_.size() && IsNameChar(src_[i + 3])))
      return false;
    i += 3;
    while (i < src_.size() && IsWs(src_[i])) ++i;
    char sign = '\0';
    if (i < src_.size() && src_[i] == '-') sign = src_[i++];
    if (src_.compare(i, 2, "%}") != 0) return false;
    pos_ = i + 2;
    TrimAfter(sign == '-' ? '-' : '+', true);  // raw's own end: only `-` strips
    // Find {%[-+]? endraw [-]?%}.
    for (size_t s = src_.find("{%", pos_); s != std::string::npos; s = src_.find("{%", s + 2)) {
      size_t j = s + 2;
      char open_sign = '\0';
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) open_sign = src_[j++];
      while (j < src_.size() && IsWs(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < src_.size() && IsWs(src_[j])) ++j;
      char close_sign = '\0';
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) close_sign = src_[j++];
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string data = src_.substr(pos_, s - pos_);
      if (open_sign == '-') {
        while (!data.empty() && IsWs(data.back())) data.pop_back();
      } else if (open_sign != '+') {
        size_t nl = data.rfind('\n');
        size_t l = nl == std::string::npos ? 0 : nl + 1;
        bool all_ws = l < data.size();
        for (size_t k = l; k < data.size(); ++k) all_ws = all_ws && IsWs(data[k]);
        if (all_ws && (l > 0 || pos_ == 0)) data.resize(l);
      }
      Emit(Tok::kText, data, pos_);
      pos_ = j + 2;
      *line_starting = TrimAfter(close_sign, true);
      return true;
    }
    pos_ = src_.size();
    Emit(Tok::kBlockBegin, "", start);  // the parser reports the unclosed raw block
    Emit(Tok::kName, "raw", start);
    Emit(Tok::kBlockEnd, "", start);
    return true;
  }

  Status LexTag(char kind, size_t start, bool* line_starting) {
    const char close = kind == '{' ? '}' : '%';
    int depth = 0;  // brackets: a `}}` inside a dict literal does not close the tag
    while (true) {
      while (pos_ < src_.size() && IsWs(src_[pos_])) ++pos_;
      if (pos_ >= src_.size())
        return ErrorAt(PosOf(start), std::string("unclosed tag: expected '") + close + "}'");
      char c = src_[pos_];
      // The end of the tag: [-+]?%} or -?}}.
      if (depth == 0 || close == '%') {
        size_t j = pos_;
        char sign = '\0';
        if ((c == '-' || (c == '+' && close == '%')) && j + 1 < src_.size()) sign = src_[j++];
        if (src_.compare(j, 2, std::string(1, close) + "}") == 0) {
          Emit(kind == '{' ? Tok::kVarEnd : Tok::kBlockEnd, "", pos_);
          pos_ = j + 2;
          *line_starting = TrimAfter(sign, close == '%');
          return OkStatus();
        }
      }
      if (IsNameStart(c)) {
        size_t s = pos_;
        while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
        Emit(Tok::kName, src_.substr(s, pos_ - s), s);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        TL_RETURN_IF_ERROR(LexNumber());
      } else if (c == '\'' || c == '"') {
        TL_RETURN_IF_ERROR(LexString());
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                     "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                     "]",  "{",  "}",  ",",  ".",  ":",  "|"};
        const char* found = nullptr;
        for (const char* op : kOps) {
          if (src_.compare(pos_, std::char_traits<char>::length(op), op) == 0) {
            found = op;
            break;
          }
        }
        if (found == nullptr)
          return ErrorAt(PosOf(pos_), std::string("unexpected character '") + c + "' in a tag");
        std::string op = found;
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        Emit(Tok::kOp, op, pos_);
        pos_ += op.size();
      }
    }
  }

  Status LexNumber() {
    size_t s = pos_;
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (pos_ < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
        if (src_[pos_] != '_') digits += src_[pos_];
        ++pos_;
      }
    };
    take_digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      digits += src_[pos_++];
      take_digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t j = pos_ + 1;
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
      if (j < src_.size() && std::isdigit(static_cast<unsigned char>(src_[j]))) {
        is_float = true;
        digits += src_.substr(pos_, j - pos_);
        pos_ = j;
        take_digits();
      }
    }
    Token t{is_float ? Tok::kFloat : Tok::kInt, src_.substr(s, pos_ - s)};
    Pos p = PosOf(s);
    t.line = p.line;
    t.col = p.col;
    try {
      if (is_float) {
        t.float_value = std::stod(digits);
      } else {
        t.int_value = std::stoll(digits);
      }
    } catch (...) {
      return ErrorAt(p, "number '" + t.text + "' is out of range");
    }
    tokens_.push_back(std::move(t));
    return OkStatus();
  }

  // A string literal with Python's escapes (\n \t \\ \' \" \xNN \uNNNN \UNNNNNNNN).
  Status LexString() {
    const size_t s = pos_;
    const char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) return ErrorAt(PosOf(s), "unterminated string literal");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\' || pos_ >= src_.size()) {
        value += c;
        continue;
      }
      char e = src_[pos_++];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '0':
          value += '\0';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size())
            return ErrorAt(PosOf(pos_ - 2), "truncated \\" + std::string(1, e) + " escape");
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            char h = src_[pos_ + k];
            if (!std::isxdigit(static_cast<unsigned char>(h)))
              return ErrorAt(PosOf(pos_ - 2), "bad \\" + std::string(1, e) + " escape");
            cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(h))
                                ? h - '0'
                                : (std::tolower(h) - 'a' + 10));
          }
          pos_ += n;
          if (cp > 0x10FFFF) return ErrorAt(PosOf(pos_ - n - 2), "escape beyond U+10FFFF");
          AppendUtf8(cp, &value);
          break;
        }
        default:
          value += '\\';
          value += e;
      }
    }
    Emit(Tok::kString, value, s);
    return OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  Pos PosOf(size_t offset) {
    // Lines are counted incrementally: offsets only grow while lexing, except for errors.
    if (offset < line_offset_) {
      line_offset_ = 0;
      line_ = 1;
      line_start_ = 0;
    }
    for (; line_offset_ < offset && line_offset_ < src_.size(); ++line_offset_) {
      if (src_[line_offset_] == '\n') {
        ++line_;
        line_start_ = line_offset_ + 1;
      }
    }
    return Pos{line_, static_cast<int>(offset - line_start_) + 1};
  }

  void Emit(Tok type, std::string text, size_t offset) {
    if (type == Tok::kText && text.empty()) return;
    Token t{type, std::move(text)};
    Pos p = PosOf(offset);
    t.line = p.line;
    t.col = p.col;
    tokens_.push_back(std::move(t));
  }

  std::string src_;
  size_t pos_ = 0;
  size_t line_offset_ = 0, line_start_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

StatusOr<std::vector<Token>> Lex(std::string_view source) {
  // Newlines become \n, and one trailing newline is dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).Run();
}

}  // namespace tlaloc::jinja
