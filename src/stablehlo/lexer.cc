// Tokens, types, attributes and dense literals of the StableHLO text parser.
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "parser_internal.h"

namespace tlaloc::shlo {

namespace {

bool IsIdStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxElements = int64_t{1} << 48;

}  // namespace

Parser::Parser(std::string_view text, std::string_view source, const ParseOptions& options)
    : text_(text), source_(source), options_(options) {
  registry_ = options.registry ? options.registry : &OpRegistry::Global();
  Advance();
}

void Parser::SkipSpace(size_t& pos) const {
  while (pos < text_.size()) {
    char c = text_[pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos;
    } else if (c == '/' && pos + 1 < text_.size() && text_[pos + 1] == '/') {
      while (pos < text_.size() && text_[pos] != '\n') ++pos;
    } else {
      break;
    }
  }
}

Token Parser::Lex(size_t& pos) const {
  SkipSpace(pos);
  Token t;
  t.pos = pos;
  auto finish = [&](Tok kind, size_t end) {
    t.kind = kind;
    t.raw = text_.substr(t.pos, end - t.pos);
    pos = end;
    return t;
  };
  if (pos >= text_.size()) return finish(Tok::kEof, pos);
  const size_t n = text_.size();
  char c = text_[pos];
  size_t p = pos;
  if (IsIdStart(c)) {
    while (p < n && IsIdChar(text_[p])) ++p;
    t.text = std::string(text_.substr(pos, p - pos));
    return finish(Tok::kIdent, p);
  }
  if (IsDigit(c) || (c == '-' && p + 1 < n && IsDigit(text_[p + 1]))) {
    if (c == '-') ++p;
    if (text_[p] == '0' && p + 1 < n && text_[p + 1] == 'x') {
      p += 2;
      while (p < n && HexValue(text_[p]) >= 0) ++p;
      t.text = std::string(text_.substr(pos, p - pos));
      return finish(Tok::kInt, p);
    }
    while (p < n && IsDigit(text_[p])) ++p;
    Tok kind = Tok::kInt;
    if (p < n && text_[p] == '.') {
      kind = Tok::kFloat;
      ++p;
      while (p < n && IsDigit(text_[p])) ++p;
      if (p < n && (text_[p] == 'e' || text_[p] == 'E')) {
        size_t q = p + 1;
        if (q < n && (text_[q] == '+' || text_[q] == '-')) ++q;
        if (q < n && IsDigit(text_[q])) {
          while (q < n && IsDigit(text_[q])) ++q;
          p = q;
        }
      }
    }
    t.text = std::string(text_.substr(pos, p - pos));
    return finish(kind, p);
  }
  if (c == '"') {
    ++p;
    std::string s;
    while (p < n && text_[p] != '"') {
      if (text_[p] == '\n') break;
      if (text_[p] == '\\' && p + 1 < n) {
        char e = text_[p + 1];
        if (e == 'n')
          s += '\n', p += 2;
        else if (e == 't')
          s += '\t', p += 2;
        else if (e == '"' || e == '\\')
          s += e, p += 2;
        else if (p + 2 < n && HexValue(e) >= 0 && HexValue(text_[p + 2]) >= 0) {
          s += static_cast<char>(HexValue(e) * 16 + HexValue(text_[p + 2]));
          p += 3;
        } else {
          t.text = "an invalid escape in a string";
          return finish(Tok::kError, p + 1);
        }
      } else {
        s += text_[p++];
      }
    }
    if (p >= n || text_[p] != '"') {
      t.text = "an unterminated string";
      return finish(Tok::kError, p);
    }
    t.text = std::move(s);
    return finish(Tok::kString, p + 1);
  }
  if (c == '%' || c == '@' || c == '^' || c == '#' || c == '!') {
    ++p;
    if (c == '@' && p < n && text_[p] == '"') {
      size_t q = p;
      Token s = Lex(q);
      if (s.kind != Tok::kString) return s;
      t.text = s.text;
      return finish(Tok::kAt, q);
    }
    size_t start = p;
    while (p < n && (IsIdChar(text_[p]) || (c == '%' && text_[p] == '-'))) ++p;
    if (p == start) {
      t.text = std::string("a '") + c + "' without a name";
      return finish(Tok::kError, p);
    }
    t.text = std::string(text_.substr(start, p - start));
    if (c == '%' && p + 1 < n && text_[p] == '#' && IsDigit(text_[p + 1])) {
      size_t q = p + 1;
      int64_t num = 0;
      while (q < n && IsDigit(text_[q]) && num < (int64_t{1} << 40))
        num = num * 10 + (text_[q++] - '0');
      t.number = num;
      p = q;
    }
    Tok kind = c == '%'   ? Tok::kPercent
               : c == '@' ? Tok::kAt
               : c == '^' ? Tok::kCaret
               : c == '#' ? Tok::kHash
                          : Tok::kBang;
    return finish(kind, p);
  }
  if (c == '-' && p + 1 < n && text_[p + 1] == '>') {
    t.text = "->";
    return finish(Tok::kPunct, p + 2);
  }
  if (c == ':' && p + 1 < n && text_[p + 1] == ':') {
    t.text = "::";
    return finish(Tok::kPunct, p + 2);
  }
  if (std::strchr("()[]{}<>,:=?*+|-", c) != nullptr) {
    t.text = std::string(1, c);
    return finish(Tok::kPunct, p + 1);
  }
  t.text = std::string("an unexpected character '") + c + "'";
  return finish(Tok::kError, p + 1);
}

void Parser::Advance() { cur_ = Lex(next_); }

Status Parser::ErrorAt(size_t pos, std::string_view message) const {
  int line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return InvalidArgument(source_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " +
                         std::string(message));
}

Status Parser::Error(std::string_view message) const { return ErrorAt(cur_.pos, message); }

std::string Parser::Describe(const Token& t) const {
  if (t.kind == Tok::kEof) return "end of input";
  if (t.kind == Tok::kError) return t.text;
  std::string raw(t.raw.substr(0, 40));
  return "'" + raw + (t.raw.size() > 40 ? "...'" : "'");
}

Status Parser::Expected(std::string_view what) const {
  return Error("expected " + std::string(what) + ", found " + Describe(cur_));
}

bool Parser::Peek(std::string_view token) const {
  if (cur_.kind == Tok::kPunct || cur_.kind == Tok::kIdent) return cur_.text == token;
  return false;
}

Status Parser::ParseKeyword(std::string_view keyword) {
  if (cur_.kind == Tok::kIdent && cur_.text == keyword) {
    Advance();
    return OkStatus();
  }
  return Expected("'" + std::string(keyword) + "'");
}

bool Parser::ParseOptionalKeyword(std::string_view keyword) {
  if (cur_.kind == Tok::kIdent && cur_.text == keyword) {
    Advance();
    return true;
  }
  return false;
}

StatusOr<std::string> Parser::ParseIdentifier() {
  if (cur_.kind == Tok::kIdent) {
    std::string s = cur_.text;
    Advance();
    return s;
  }
  if (cur_.kind == Tok::kPercent && cur_.number < 0) {
    std::string s = "%" + cur_.text;
    Advance();
    return s;
  }
  return Expected("an identifier");
}

Status Parser::ParsePunct(std::string_view punct) {
  if (ParseOptionalPunct(punct)) return OkStatus();
  return Expected("'" + std::string(punct) + "'");
}

bool Parser::ParseOptionalPunct(std::string_view punct) {
  if ((cur_.kind == Tok::kPunct || (cur_.kind == Tok::kIdent && punct == "x")) &&
      cur_.text == punct) {
    Advance();
    return true;
  }
  return false;
}

StatusOr<int64_t> Parser::ParseInteger() {
  if (cur_.kind != Tok::kInt) return Expected("an integer");
  const std::string& s = cur_.text;
  bool neg = s[0] == '-';
  size_t start = neg ? 1 : 0;
  uint64_t v = 0;
  std::from_chars_result r;
  if (s.size() > start + 1 && s[start + 1] == 'x') {
    r = std::from_chars(s.data() + start + 2, s.data() + s.size(), v, 16);
  } else {
    r = std::from_chars(s.data() + start, s.data() + s.size(), v, 10);
  }
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() ||
      v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (neg ? 1 : 0))
    return Expected("an integer that fits in 64 bits");
  Advance();
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

StatusOr<std::vector<int64_t>> Parser::ParseIntList() {
  TL_RETURN_IF_ERROR(ParsePunct("["));
  std::vector<int64_t> out;
  if (ParseOptionalPunct("]")) return out;
  do {
    TL_ASSIGN_OR_RETURN(int64_t v, ParseInteger());
    out.push_back(v);
  } while (ParseOptionalPunct(","));
  TL_RETURN_IF_ERROR(ParsePunct("]"));
  return out;
}

StatusOr<TensorType> Parser::ParseTensorTypeBody() {
  // Types are scanned by character: "2x3xf32" is not a sequence of ordinary tokens.
  size_t p = next_;
  size_t start = cur_.pos;
  auto err = [&](std::string_view what) {
    std::string found = p < text_.size() ? "'" + std::string(1, text_[p]) + "'" : "end of input";
    return ErrorAt(p, "expected " + std::string(what) + " in a tensor type, found " + found);
  };
  if (p >= text_.size() || text_[p] != '<') return err("'<'");
  ++p;
  TensorType t;
  int64_t elements = 1;
  while (true) {
    if (p < text_.size() && text_[p] == '?')
      return ErrorAt(p, "dynamic dimensions ('?') are not supported");
    if (p >= text_.size() || !IsDigit(text_[p])) break;
    int64_t d = 0;
    while (p < text_.size() && IsDigit(text_[p])) {
      d = d * 10 + (text_[p++] - '0');
      if (d > kMaxDim) return ErrorAt(p, "tensor dimension too large");
    }
    if (p >= text_.size() || text_[p] != 'x') return err("'x' after a dimension");
    ++p;
    // Zero dims are skipped so that "0x2^40x2^40" cannot hide an overflowing product: the
    // count of a zero-size tensor is 0 but its strides multiply the other dims.
    if (d > 0 && elements > kMaxElements / d)
      return ErrorAt(p, "tensor type has too many elements");
    if (d > 0) elements *= d;
    t.dims.push_back(d);
    if (t.dims.size() > 64) return ErrorAt(p, "tensor rank above 64 is not supported");
  }
  size_t et_start = p;
  while (p < text_.size() && std::isalnum(static_cast<unsigned char>(text_[p]))) ++p;
  std::string_view name = text_.substr(et_start, p - et_start);
  auto et = ElementTypeFromMlirName(name);
  if (!et) {
    if (name.empty()) return err("an element type");
    return Status(
        StatusCode::kUnimplemented,
        ErrorAt(et_start, "unsupported element type '" + std::string(name) + "'").message());
  }
  t.element_type = *et;
  if (p < text_.size() && text_[p] == ',')
    return Status(StatusCode::kUnimplemented,
                  ErrorAt(p, "tensor encodings are not supported").message());
  if (p >= text_.size() || text_[p] != '>') return err("'>'");
  next_ = p + 1;
  Advance();
  (void)start;
  return t;
}

StatusOr<Type> Parser::ParseType() {
  DepthGuard guard(*this);
  if (guard.too_deep()) return Error("types nested too deeply");
  if (cur_.kind == Tok::kIdent && cur_.text == "tensor") {
    TL_ASSIGN_OR_RETURN(TensorType t, ParseTensorTypeBody());
    return Type(std::move(t));
  }
  if (cur_.kind == Tok::kBang && cur_.text == "stablehlo.token") {
    Advance();
    return Type::Token();
  }
  if (cur_.kind == Tok::kIdent && cur_.text == "tuple") {
    Advance();
    TL_RETURN_IF_ERROR(ParsePunct("<"));
    std::vector<Type> elems;
    if (!ParseOptionalPunct(">")) {
      do {
        TL_ASSIGN_OR_RETURN(Type e, ParseType());
        elems.push_back(std::move(e));
      } while (ParseOptionalPunct(","));
      TL_RETURN_IF_ERROR(ParsePunct(">"));
    }
    return Type::Tuple(std::move(elems));
  }
  if (cur_.kind == Tok::kIdent && ElementTypeFromMlirName(cur_.text))
    return Expected("a tensor type (scalars are tensor<" + cur_.text + ">)");
  if (cur_.kind == Tok::kIdent && cur_.text.rfind("complex", 0) == 0)
    return Status(StatusCode::kUnimplemented, Error("complex types are not supported").message());
  return Expected("a type");
}

Status Parser::ParseFunctionalType(std::vector<Type>& inputs, std::vector<Type>& outputs) {
  auto parse_list = [&](std::vector<Type>& out) -> Status {
    if (ParseOptionalPunct("(")) {
      if (ParseOptionalPunct(")")) return OkStatus();
      do {
        TL_ASSIGN_OR_RETURN(Type t, ParseType());
        out.push_back(std::move(t));
      } while (ParseOptionalPunct(","));
      return ParsePunct(")");
    }
    TL_ASSIGN_OR_RETURN(Type t, ParseType());
    out.push_back(std::move(t));
    return OkStatus();
  };
  inputs.clear();
  outputs.clear();
  TL_RETURN_IF_ERROR(parse_list(inputs));
  TL_RETURN_IF_ERROR(ParsePunct("->"));
  return parse_list(outputs);
}

Status Parser::SkipBalanced(char open, char close, std::string* out) {
  // cur_ is the opening punctuation; scans the raw text up to its partner.
  size_t start = cur_.pos;
  size_t p = start;
  int depth = 0;
  while (p < text_.size()) {
    char c = text_[p];
    if (c == '"') {
      ++p;
      while (p < text_.size() && text_[p] != '"') p += text_[p] == '\\' ? 2 : 1;
    } else if (c == open) {
      ++depth;
    } else if (c == close && !(close == '>' && p > 0 && text_[p - 1] == '-')) {
      if (--depth == 0) {
        if (out) *out += std::string(text_.substr(start, p + 1 - start));
        next_ = p + 1;
        Advance();
        return OkStatus();
      }
    }
    ++p;
  }
  return ErrorAt(start, std::string("expected a closing '") + close + "' for this '" + open + "'");
}

Status Parser::SkipLoc() {
  if (cur_.kind != Tok::kIdent || cur_.text != "loc") return OkStatus();
  Advance();
  if (!Peek("(")) return Expected("'(' after loc");
  return SkipBalanced('(', ')', nullptr);
}

StatusOr<AttrDict> Parser::ParseDictBody() {
  AttrDict dict;
  if (ParseOptionalPunct("}")) return dict;
  do {
    std::string key;
    if (cur_.kind == Tok::kIdent || cur_.kind == Tok::kString) {
      key = cur_.text;
      Advance();
    } else {
      return Expected("an attribute name");
    }
    if (ParseOptionalPunct("=")) {
      TL_ASSIGN_OR_RETURN(Attribute a, ParseAttribute());
      dict[key] = std::move(a);
    } else {
      dict[key] = Attribute::Unit();
    }
  } while (ParseOptionalPunct(","));
  TL_RETURN_IF_ERROR(ParsePunct("}"));
  return dict;
}

}  // namespace tlaloc::shlo
