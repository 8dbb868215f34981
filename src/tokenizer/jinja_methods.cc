// Python's str, dict and list methods that chat templates call (s.split('</think>'),
// d.get(k), d.items(), ...) and the text helpers the filters share, with Python's behaviour.
#include <algorithm>
#include <set>

#include "jinja_internal.h"
#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc::jinja {

namespace {

bool InChars(char32_t c, const std::string* chars) {
  if (chars == nullptr) return IsPySpace(c);
  size_t i = 0;
  while (i < chars->size()) {
    if (utf8::Next(*chars, &i) == c) return true;
  }
  return false;
}

}  // namespace

const Value* Arg(const CallArgs& a, size_t i, std::string_view name) {
  for (const auto& [k, v] : a.kw) {
    if (k == name) return &v;
  }
  return i < a.pos.size() ? &a.pos[i] : nullptr;
}

Status NeedString(const Value& v, const std::string& what) {
  if (v.is_string()) return OkStatus();
  return InvalidArgument(what + " expects a string, found " + v.TypeName());
}

// Python's str.strip / lstrip / rstrip (chars == nullptr: whitespace).
std::string Strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto cps = CodePoints(s);
  size_t b = 0, e = cps.size();
  auto cp = [&](size_t i) {
    size_t k = 0;
    return utf8::Next(cps[i], &k);
  };
  while (left && b < e && InChars(cp(b), chars)) ++b;
  while (right && e > b && InChars(cp(e - 1), chars)) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

// Python's str.split(sep, maxsplit); sep == nullptr splits on whitespace runs.
List Split(const std::string& s, const std::string* sep, int64_t maxsplit) {
  List out;
  if (sep != nullptr) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, start);
      if (at == std::string::npos) break;
      out.push_back(Value::String(s.substr(start, at - start)));
      start = at + sep->size();
    }
    out.push_back(Value::String(s.substr(start)));
    return out;
  }
  size_t i = 0;
  while (i < s.size()) {
    size_t k = i;
    while (k < s.size()) {  // skip whitespace
      size_t n = k;
      if (!IsPySpace(utf8::Next(s, &n))) break;
      k = n;
    }
    i = k;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      std::string rest = s.substr(i);
      out.push_back(Value::String(Strip(rest, nullptr, false, true)));
      break;
    }
    size_t j = i;
    while (j < s.size()) {
      size_t n = j;
      if (IsPySpace(utf8::Next(s, &n))) break;
      j = n;
    }
    out.push_back(Value::String(s.substr(i, j - i)));
    i = j;
  }
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    auto cps = CodePoints(s);
    int64_t n = 0;
    for (auto c : cps) {
      if (count < 0 || n++ < count) out += to;
      out += c;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + to;
    start = at + from.size();
    ++n;
  }
  return out + s.substr(start);
}

std::string Capitalize(const std::string& s) {
  auto cps = CodePoints(s);
  if (cps.empty()) return "";
  std::string out = ToUpper(cps[0]);
  for (size_t i = 1; i < cps.size(); ++i) out += ToLower(cps[i]);
  return out;
}

bool IsAlpha(std::string_view c) {
  if (c.size() == 1) return std::isalpha(static_cast<unsigned char>(c[0]));
  return ToUpper(c) != ToLower(c);
}

// Python's str.title(): a letter after a non-letter is upper-cased, other letters lowered.
std::string PyTitle(const std::string& s) {
  std::string out;
  bool prev_letter = false;
  for (auto c : CodePoints(s)) {
    bool letter = IsAlpha(c);
    out += letter ? (prev_letter ? ToLower(c) : ToUpper(c)) : std::string(c);
    prev_letter = letter;
  }
  return out;
}

// jinja2's title filter: words start after whitespace, '-', '(', '{', '[' or '<'.
std::string JinjaTitle(const std::string& s) {
  std::string out;
  bool start = true;
  for (auto c : CodePoints(s)) {
    size_t k = 0;
    char32_t cp = utf8::Next(c, &k);
    bool sep = IsPySpace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    out += sep ? std::string(c) : (start ? ToUpper(c) : ToLower(c));
    start = sep;
  }
  return out;
}

// Attribute paths of selectattr/map/sort ("a.b", or an integer index).

StatusOr<List> AsList(const Value& v, const std::string& filter) {
  switch (v.kind()) {
    case Value::kUndefined:
      return List{};
    case Value::kList:
      return v.list();
    case Value::kDict: {
      List keys;
      for (const auto& kv : v.dict()) keys.push_back(Value::String(kv.first));
      return keys;
    }
    case Value::kString: {
      List out;
      for (auto c : CodePoints(v.str())) out.push_back(Value::String(std::string(c)));
      return out;
    }
    default:
      return InvalidArgument(filter + ": '" + v.TypeName() + "' object is not iterable");
  }
}

StatusOr<int64_t> IntArg(const Value* v, int64_t def, const std::string& what) {
  if (v == nullptr || v->is_none()) return def;
  if (v->kind() != Value::kInt && v->kind() != Value::kBool)
    return InvalidArgument(what + " expects an integer, found " + v->TypeName());
  return v->as_int();
}

namespace {

StatusOr<Value> StringMethod(Renderer& r, const std::string& s, const std::string& m, CallArgs& a) {
  const size_t limit = static_cast<size_t>(r.limits().max_output_bytes);
  const Value* x = Arg(a, 0, "");
  if (m == "upper") return Value::String(ToUpper(s));
  if (m == "lower") return Value::String(ToLower(s));
  if (m == "title") return Value::String(PyTitle(s));
  if (m == "capitalize") return Value::String(Capitalize(s));
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    if (x && !x->is_none()) TL_RETURN_IF_ERROR(NeedString(*x, m));
    const std::string* chars = x && x->is_string() ? &x->str() : nullptr;
    return Value::String(Strip(s, chars, m != "rstrip", m != "lstrip"));
  }
  if (m == "startswith" || m == "endswith") {
    if (!x) return InvalidArgument(m + " expects an argument");
    List options = x->is_list() ? x->list() : List{*x};
    for (const Value& o : options) {
      TL_RETURN_IF_ERROR(NeedString(o, m));
      const std::string& p = o.str();
      bool hit = m == "startswith"
                     ? s.compare(0, p.size(), p) == 0
                     : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (m == "split" || m == "rsplit") {
    const Value* sep = Arg(a, 0, "sep");
    TL_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(Arg(a, 1, "maxsplit"), -1, m + "'s maxsplit"));
    if (sep && !sep->is_none()) {
      TL_RETURN_IF_ERROR(NeedString(*sep, m));
      if (sep->str().empty()) return InvalidArgument("empty separator");
    }
    const std::string* sp = sep && sep->is_string() ? &sep->str() : nullptr;
    if (m == "rsplit" && maxsplit >= 0) {
      if (sp == nullptr) return InvalidArgument("rsplit with maxsplit needs a separator here");
      List parts;
      size_t end = s.size();
      while (static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t at = end >= sp->size() ? s.rfind(*sp, end - sp->size()) : std::string::npos;
        if (at == std::string::npos) break;
        parts.insert(parts.begin(),
                     Value::String(s.substr(at + sp->size(), end - at - sp->size())));
        end = at;
      }
      parts.insert(parts.begin(), Value::String(s.substr(0, end)));
      return Value::MakeList(std::move(parts));
    }
    return Value::MakeList(Split(s, sp, maxsplit));
  }
  if (m == "splitlines") {
    static const std::string kNewline = "\n";
    List lines = s.empty() ? List{} : Split(s, &kNewline, -1);
    if (!s.empty() && s.back() == '\n') lines.pop_back();
    return Value::MakeList(std::move(lines));
  }
  if (m == "replace") {
    const Value* to = Arg(a, 1, "new");
    if (!x || !to) return InvalidArgument("replace expects old and new");
    TL_RETURN_IF_ERROR(NeedString(*x, m));
    TL_RETURN_IF_ERROR(NeedString(*to, m));
    TL_ASSIGN_OR_RETURN(int64_t count, IntArg(Arg(a, 2, "count"), -1, "replace's count"));
    std::string out = Replace(s, x->str(), to->str(), count);
    TL_RETURN_IF_ERROR(r.CheckSize(out.size()));
    return Value::String(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "count" || m == "index") {
    if (!x) return InvalidArgument(m + " expects an argument");
    TL_RETURN_IF_ERROR(NeedString(*x, m));
    if (m == "count") {
      if (x->str().empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(x->str()); at != std::string::npos;
           at = s.find(x->str(), at + x->str().size()))
        ++n;
      return Value::Int(n);
    }
    size_t at = m == "rfind" ? s.rfind(x->str()) : s.find(x->str());
    if (at == std::string::npos) {
      if (m == "index") return InvalidArgument("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(CodePointCount(s.substr(0, at))));
  }
  if (m == "join") {
    if (!x) return InvalidArgument("join expects an iterable");
    TL_ASSIGN_OR_RETURN(List items, AsList(*x, "join"));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      TL_RETURN_IF_ERROR(NeedString(items[i], "join"));
      if (i) out += s;
      out += items[i].str();
      TL_RETURN_IF_ERROR(r.CheckSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (m == "isdigit" || m == "isalpha" || m == "isspace" || m == "isalnum") {
    if (s.empty()) return Value::Bool(false);
    for (auto c : CodePoints(s)) {
      size_t k = 0;
      char32_t cp = utf8::Next(c, &k);
      bool digit = cp >= '0' && cp <= '9';
      bool ok = m == "isdigit"   ? digit
                : m == "isalpha" ? IsAlpha(c)
                : m == "isspace" ? IsPySpace(cp)
                                 : (digit || IsAlpha(c));
      if (!ok) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  if (m == "islower") return Value::Bool(ToLower(s) == s && ToUpper(s) != s);
  if (m == "isupper") return Value::Bool(ToUpper(s) == s && ToLower(s) != s);
  if (m == "format") {
    // str.format with {} / {0} / {name} fields (no format specs).
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') {
        out += '{';
        ++i;
      } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
        out += '}';
        ++i;
      } else if (s[i] == '{') {
        size_t end = s.find('}', i);
        if (end == std::string::npos) return InvalidArgument("format: unmatched '{'");
        std::string field = s.substr(i + 1, end - i - 1);
        if (field.find_first_of(":!") != std::string::npos)
          return InvalidArgument("format: format specs are not supported");
        const Value* v = nullptr;
        if (field.empty()) {
          v = auto_index < a.pos.size() ? &a.pos[auto_index++] : nullptr;
        } else if (std::all_of(field.begin(), field.end(), [](char c) {
                     return std::isdigit(static_cast<unsigned char>(c));
                   })) {
          size_t k = std::stoul(field);
          v = k < a.pos.size() ? &a.pos[k] : nullptr;
        } else {
          v = Arg(a, SIZE_MAX, field);
        }
        if (v == nullptr) return InvalidArgument("format: no argument for {" + field + "}");
        out += v->ToString(limit);
        TL_RETURN_IF_ERROR(r.CheckSize(out.size()));
        i = end;
      } else {
        out += s[i];
      }
    }
    return Value::String(std::move(out));
  }
  return InvalidArgument("'str' object has no method '" + m + "'");
}

const std::set<std::string, std::less<>>& StringMethods() {
  static const std::set<std::string, std::less<>> k = {
      "upper",      "lower",    "title",   "capitalize", "strip",      "lstrip",  "rstrip",
      "startswith", "endswith", "split",   "rsplit",     "splitlines", "replace", "find",
      "rfind",      "count",    "index",   "join",       "isdigit",    "isalpha", "isspace",
      "isalnum",    "islower",  "isupper", "format"};
  return k;
}

}  // namespace

std::optional<Value> BoundMethod(const Value& obj, const std::string& name) {
  if (obj.is_string() && StringMethods().count(name)) {
    return Value::MakeCallable("str." + name, [obj, name](Renderer& r, CallArgs& a) {
      return StringMethod(r, obj.str(), name, a);
    });
  }
  if (obj.is_dict() && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return Value::MakeCallable(
        "dict." + name, [obj, name](Renderer&, CallArgs& a) -> StatusOr<Value> {
          if (name == "get") {
            const Value* key = Arg(a, 0, "key");
            if (!key) return InvalidArgument("get expects a key");
            const Value* found = key->is_string() ? obj.Find(key->str()) : nullptr;
            if (found) return *found;
            const Value* def = Arg(a, 1, "default");
            return def ? *def : Value::None();
          }
          List out;
          for (const auto& [k, v] : obj.dict()) {
            if (name == "items") out.push_back(Value::MakeTuple({Value::String(k), v}));
            if (name == "keys") out.push_back(Value::String(k));
            if (name == "values") out.push_back(v);
          }
          return Value::MakeList(std::move(out));
        });
  }
  if (obj.is_list() && (name == "count" || name == "index")) {
    return Value::MakeCallable("list." + name,
                               [obj, name](Renderer&, CallArgs& a) -> StatusOr<Value> {
                                 if (a.pos.empty())
                                   return InvalidArgument(name + " expects an argument");
                                 int64_t n = 0;
                                 for (size_t i = 0; i < obj.list().size(); ++i) {
                                   if (!Equal(obj.list()[i], a.pos[0])) continue;
                                   if (name == "index") return Value::Int(static_cast<int64_t>(i));
                                   ++n;
                                 }
                                 if (name == "index")
                                   return InvalidArgument(a.pos[0].Repr() + " is not in list");
                                 return Value::Int(n);
                               });
  }
  return std::nullopt;
}
}  // namespace tlaloc::jinja
