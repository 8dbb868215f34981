// Jinja filters and tests with jinja2's behaviour; `tojson` is transformers' json.dumps override.
#include <algorithm>
#include <cmath>
#include <set>

#include "jinja_internal.h"
#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc::jinja {

namespace {

// Attribute paths of selectattr/map/sort ("a.b", or an integer index).
Value Attribute(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_dict()) {
      const Value* x = cur.Find(part);
      cur = x ? *x : Value::Undefined("'dict object' has no attribute '" + part + "'");
    } else if (cur.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
                 return std::isdigit(static_cast<unsigned char>(c));
               })) {
      size_t i = std::stoul(part);
      cur = i < cur.list().size() ? cur.list()[i] : Value::Undefined();
    } else {
      return Value::Undefined("'" + cur.TypeName() + " object' has no attribute '" + part + "'");
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const std::set<std::string, std::less<>>& Filters() {
  static const std::set<std::string, std::less<>> k = {
      "tojson",  "trim",       "length",     "count",     "items",   "string", "upper",
      "lower",   "first",      "last",       "join",      "default", "d",      "replace",
      "list",    "selectattr", "rejectattr", "select",    "reject",  "map",    "int",
      "float",   "capitalize", "title",      "safe",      "e",       "escape", "forceescape",
      "abs",     "round",      "sum",        "min",       "max",     "unique", "sort",
      "reverse", "dictsort",   "indent",     "wordcount", "attr",    "batch",  "center"};
  return k;
}

const std::set<std::string, std::less<>>& Tests() {
  static const std::set<std::string, std::less<>> k = {
      "defined",     "undefined", "none",    "string",  "mapping", "iterable", "sequence",
      "number",      "integer",   "float",   "boolean", "true",    "false",    "callable",
      "equalto",     "eq",        "sameas",  "ne",      "lt",      "lessthan", "gt",
      "greaterthan", "le",        "ge",      "in",      "odd",     "even",     "divisibleby",
      "lower",       "upper",     "escaped", "filter",  "test"};
  return k;
}

}  // namespace

bool IsKnownFilter(std::string_view name) { return Filters().count(name) > 0; }
bool IsKnownTest(std::string_view name) { return Tests().count(name) > 0; }

StatusOr<bool> ApplyTest(Renderer& r, const std::string& name, const Value& v, CallArgs& a,
                         Pos pos) {
  const Value* x = Arg(a, 0, "value");
  auto need = [&]() -> Status {
    if (x == nullptr) return InvalidArgument("test '" + name + "' needs an argument");
    return OkStatus();
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == Value::kInt;
  if (name == "float") return v.kind() == Value::kFloat;
  if (name == "boolean") return v.kind() == Value::kBool;
  if (name == "true") return v.kind() == Value::kBool && v.as_bool();
  if (name == "false") return v.kind() == Value::kBool && !v.as_bool();
  // jinja2's Undefined has __call__ (which raises), so it counts as callable.
  if (name == "callable") return v.kind() == Value::kCallable || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "lower") return v.is_string() && ToLower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && ToUpper(v.str()) == v.str();
  if (name == "filter") return x && x->is_string() && IsKnownFilter(x->str());
  if (name == "test") return x && x->is_string() && IsKnownTest(x->str());
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_number())
      return InvalidArgument("test '" + name + "' expects a number, found " + v.TypeName());
    double d = 2;
    if (name == "divisibleby") {
      TL_RETURN_IF_ERROR(need());
      if (!x->is_number()) return InvalidArgument("divisibleby expects a number");
      d = x->as_double();
      if (d == 0) return InvalidArgument("integer division or modulo by zero");
    }
    if (v.kind() != Value::kFloat && (name != "divisibleby" || x->kind() != Value::kFloat)) {
      const auto di = static_cast<int64_t>(d);
      const int64_t m = di == -1 ? 0 : ((v.as_int() % di) + di) % di;  // Python's %
      return name == "odd" ? m == 1 : m == 0;
    }
    double m = std::fmod(v.as_double(), d);
    if (m != 0 && ((m < 0) != (d < 0))) m += d;
    return name == "odd" ? m == 1 : m == 0;
  }
  TL_RETURN_IF_ERROR(need());
  if (name == "equalto" || name == "eq") return Equal(v, *x);
  if (name == "ne") return !Equal(v, *x);
  if (name == "sameas") {
    if (v.kind() != x->kind()) return false;
    if (v.is_none() || v.kind() == Value::kBool) return Equal(v, *x);
    return Equal(v, *x) && (v.is_number() || v.is_string());
  }
  if (name == "in") {
    if (x->is_string()) return v.is_string() && x->str().find(v.str()) != std::string::npos;
    if (x->is_dict()) return v.is_string() && x->Find(v.str()) != nullptr;
    if (x->is_list()) {
      for (const Value& e : x->list()) {
        if (Equal(v, e)) return true;
      }
      return false;
    }
    return InvalidArgument("test 'in' expects a container, found " + x->TypeName());
  }
  if (name == "lt" || name == "lessthan") return Less(v, *x);
  if (name == "gt" || name == "greaterthan") return Less(*x, v);
  if (name == "le") {
    TL_ASSIGN_OR_RETURN(bool gt, Less(*x, v));
    return !gt;
  }
  if (name == "ge") {
    TL_ASSIGN_OR_RETURN(bool lt, Less(v, *x));
    return !lt;
  }
  (void)r;
  return ErrorAt(pos, "unknown test '" + name + "'");
}

namespace {

// select/reject/selectattr/rejectattr: keeps items whose test (or truthiness) is `keep`.
StatusOr<Value> Select(Renderer& r, const Value& in, CallArgs& a, bool by_attr, bool keep, Pos pos,
                       const std::string& filter) {
  TL_ASSIGN_OR_RETURN(List items, AsList(in, filter));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty() || !a.pos[0].is_string())
      return InvalidArgument(filter + " expects an attribute name");
    attr = a.pos[0].str();
    next = 1;
  }
  std::string test;
  if (a.pos.size() > next) {
    if (!a.pos[next].is_string()) return InvalidArgument(filter + " expects a test name");
    test = a.pos[next].str();
    if (!IsKnownTest(test)) return InvalidArgument("unknown test '" + test + "'");
  }
  CallArgs test_args;
  for (size_t i = next + 1; i < a.pos.size(); ++i) test_args.pos.push_back(a.pos[i]);
  List out;
  for (const Value& item : items) {
    Value v = by_attr ? Attribute(item, attr) : item;
    bool ok;
    if (test.empty()) {
      ok = v.Truthy();
    } else {
      TL_ASSIGN_OR_RETURN(ok, ApplyTest(r, test, v, test_args, pos));
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

StatusOr<Value> Sort(const Value& in, CallArgs& a, const std::string& filter) {
  TL_ASSIGN_OR_RETURN(List items, AsList(in, filter));
  const Value* rev = Arg(a, 0, "reverse");
  const Value* cs = Arg(a, 1, "case_sensitive");
  const Value* attr = Arg(a, 2, "attribute");
  const bool case_sensitive = cs && cs->Truthy();
  auto key = [&](const Value& v) {
    Value k = attr && attr->is_string() ? Attribute(v, attr->str()) : v;
    if (!case_sensitive && k.is_string()) return Value::String(ToLower(k.str()));
    return k;
  };
  Status err;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    auto lt = Less(key(x), key(y));
    if (!lt.ok()) {
      err = lt.status();
      return false;
    }
    return *lt;
  });
  TL_RETURN_IF_ERROR(err);
  if (rev && rev->Truthy()) std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

}  // namespace

StatusOr<Value> ApplyFilter(Renderer& r, const std::string& name, const Value& v, CallArgs& a,
                            Pos pos) {
  const size_t limit = static_cast<size_t>(r.limits().max_output_bytes);
  if (name == "default" || name == "d") {
    const Value* def = Arg(a, 0, "default_value");
    const Value* boolean = Arg(a, 1, "boolean");
    const bool use_default = v.is_undefined() || (boolean && boolean->Truthy() && !v.Truthy());
    if (!use_default) return v;
    return def ? *def : Value::String("");
  }
  if (name == "tojson") {
    const Value* indent = Arg(a, 0, "indent");
    const Value* seps = Arg(a, 99, "separators");
    const Value* sort = Arg(a, 99, "sort_keys");
    const Value* ascii = Arg(a, 99, "ensure_ascii");
    if (ascii && ascii->Truthy())
      return InvalidArgument("tojson: ensure_ascii=True is not supported");
    TL_ASSIGN_OR_RETURN(int64_t ind, IntArg(indent, -1, "tojson's indent"));
    if (ind > 1024) return InvalidArgument("tojson: indent above 1024");
    std::string item_sep = ind >= 0 ? "," : ", ", key_sep = ": ";
    if (seps && !seps->is_none()) {
      if (!seps->is_list() || seps->list().size() != 2 || !seps->list()[0].is_string() ||
          !seps->list()[1].is_string())
        return InvalidArgument("tojson: separators must be two strings");
      item_sep = seps->list()[0].str();
      key_sep = seps->list()[1].str();
    }
    TL_ASSIGN_OR_RETURN(std::string s, ToJson(v, static_cast<int>(ind < -1 ? -1 : ind),
                                              sort && sort->Truthy(), item_sep, key_sep, limit));
    TL_RETURN_IF_ERROR(r.CheckSize(s.size()));
    return Value::String(std::move(s));
  }
  if (name == "safe") return v;
  if (name == "string") return Value::String(v.ToString(limit));
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value::Int(0);
    if (v.is_string()) return Value::Int(static_cast<int64_t>(CodePointCount(v.str())));
    if (v.is_list()) return Value::Int(static_cast<int64_t>(v.list().size()));
    if (v.is_dict()) return Value::Int(static_cast<int64_t>(v.dict().size()));
    return InvalidArgument("object of type '" + v.TypeName() + "' has no len()");
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::MakeList();
    if (!v.is_dict()) return InvalidArgument("items expects a mapping, found " + v.TypeName());
    List out;
    for (const auto& [k, x] : v.dict()) out.push_back(Value::MakeTuple({Value::String(k), x}));
    return Value::MakeList(std::move(out));
  }
  if (name == "list") {
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    return Value::MakeList(std::move(items));
  }
  if (name == "first" || name == "last") {
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    if (items.empty()) return Value::Undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    const Value* sep = Arg(a, 0, "d");
    const Value* attr = Arg(a, 1, "attribute");
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i && sep) s += sep->ToString(limit);
      s +=
          (attr && attr->is_string() ? Attribute(items[i], attr->str()) : items[i]).ToString(limit);
      TL_RETURN_IF_ERROR(r.CheckSize(s.size()));
    }
    return Value::String(std::move(s));
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject")
    return Select(r, v, a, name.find("attr") != std::string::npos, name[0] == 's', pos, name);
  if (name == "map") {
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    const Value* attr = Arg(a, 99, "attribute");
    List out;
    if (attr) {
      if (!attr->is_string()) return InvalidArgument("map: attribute must be a string");
      const Value* def = Arg(a, 99, "default");
      for (const Value& item : items) {
        Value x = Attribute(item, attr->str());
        out.push_back(x.is_undefined() && def ? *def : x);
      }
      return Value::MakeList(std::move(out));
    }
    if (a.pos.empty() || !a.pos[0].is_string())
      return InvalidArgument("map expects a filter name or attribute=");
    const std::string filter = a.pos[0].str();
    if (!IsKnownFilter(filter)) return InvalidArgument("unknown filter '" + filter + "'");
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (const Value& item : items) {
      TL_ASSIGN_OR_RETURN(Value x, ApplyFilter(r, filter, item, rest, pos));
      out.push_back(std::move(x));
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "int") {
    TL_ASSIGN_OR_RETURN(int64_t def, IntArg(Arg(a, 0, "default"), 0, "int's default"));
    if (v.kind() == Value::kInt || v.kind() == Value::kBool) return Value::Int(v.as_int());
    if (v.kind() == Value::kFloat) {
      double d = v.as_double();
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return Value::Int(def);
      return Value::Int(static_cast<int64_t>(d));
    }
    if (v.is_string()) {
      std::string s = Strip(v.str(), nullptr, true, true);
      try {
        size_t used = 0;
        long long x = std::stoll(s, &used, 10);
        if (used == s.size()) return Value::Int(x);
        double d = std::stod(s, &used);
        if (used == s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18)
          return Value::Int(static_cast<int64_t>(d));
      } catch (...) {
      }
    }
    return Value::Int(def);
  }
  if (name == "float") {
    if (v.is_number()) return Value::Float(v.as_double());
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = Strip(v.str(), nullptr, true, true);
        double d = std::stod(s, &used);
        if (used == s.size()) return Value::Float(d);
      } catch (...) {
      }
    }
    const Value* def = Arg(a, 0, "default");
    return def ? *def : Value::Float(0.0);
  }
  if (name == "abs") {
    if (v.kind() == Value::kFloat) return Value::Float(std::fabs(v.as_double()));
    if (v.is_number() && v.as_int() != INT64_MIN) return Value::Int(std::llabs(v.as_int()));
    return InvalidArgument("bad operand type for abs(): '" + v.TypeName() + "'");
  }
  if (name == "round") {
    if (!v.is_number()) return InvalidArgument("round expects a number, found " + v.TypeName());
    TL_ASSIGN_OR_RETURN(int64_t prec, IntArg(Arg(a, 0, "precision"), 0, "round's precision"));
    const Value* method = Arg(a, 1, "method");
    std::string m = method && method->is_string() ? method->str() : "common";
    double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(prec, -300, 300)));
    double x = v.as_double() * scale;
    // Python's round() takes ties to even.
    x = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value::Float(x / scale);
  }
  if (name == "sum") {
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    const Value* attr = Arg(a, 0, "attribute");
    const Value* start = Arg(a, 1, "start");
    Value acc = start ? *start : Value::Int(0);
    for (const Value& item : items) {
      Value x = attr && attr->is_string() ? Attribute(item, attr->str()) : item;
      if (!acc.is_number() || !x.is_number()) return InvalidArgument("sum expects numbers");
      acc = acc.kind() == Value::kFloat || x.kind() == Value::kFloat
                ? Value::Float(acc.as_double() + x.as_double())
                : Value::Int(acc.as_int() + x.as_int());
    }
    return acc;
  }
  if (name == "min" || name == "max") {
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    if (items.empty()) return Value::Undefined("No " + name + " item, sequence was empty.");
    Value best = items[0];
    for (const Value& x : items) {
      TL_ASSIGN_OR_RETURN(bool lt, name == "min" ? Less(x, best) : Less(best, x));
      if (lt) best = x;
    }
    return best;
  }
  if (name == "unique") {
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    const Value* cs = Arg(a, 0, "case_sensitive");
    const Value* attr = Arg(a, 1, "attribute");
    // jinja2 compares strings case-insensitively unless case_sensitive=True.
    auto key = [&](const Value& x) {
      Value k = attr && attr->is_string() ? Attribute(x, attr->str()) : x;
      if (!(cs && cs->Truthy()) && k.is_string()) return Value::String(ToLower(k.str()));
      return k;
    };
    List out, keys;
    for (const Value& x : items) {
      Value k = key(x);
      bool seen = false;
      for (const Value& y : keys) seen = seen || Equal(k, y);
      if (seen) continue;
      keys.push_back(k);
      out.push_back(x);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "sort") return Sort(v, a, name);
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = CodePoints(v.str());
      std::string s;
      for (size_t i = cps.size(); i-- > 0;) s += cps[i];
      return Value::String(std::move(s));
    }
    TL_ASSIGN_OR_RETURN(List items, AsList(v, name));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) return InvalidArgument("dictsort expects a mapping, found " + v.TypeName());
    Dict d = v.dict();
    std::stable_sort(d.begin(), d.end(), [](const auto& x, const auto& y) {
      return ToLower(x.first) < ToLower(y.first);
    });
    List out;
    for (auto& [k, x] : d) out.push_back(Value::MakeTuple({Value::String(k), x}));
    return Value::MakeList(std::move(out));
  }
  if (name == "attr") {
    const Value* n = Arg(a, 0, "name");
    if (!n || !n->is_string()) return InvalidArgument("attr expects a name");
    if (v.is_dict() && !v.is_namespace()) return Value::Undefined();  // attributes, not items
    const Value* x = v.Find(n->str());
    return x ? *x : Value::Undefined();
  }
  // The rest work on text (str() of the value).
  const std::string s = v.ToString(limit);
  if (name == "trim") {
    const Value* chars = Arg(a, 0, "chars");
    std::string cs = chars && chars->is_string() ? chars->str() : "";
    return Value::String(Strip(s, chars && chars->is_string() ? &cs : nullptr, true, true));
  }
  if (name == "upper") return Value::String(ToUpper(s));
  if (name == "lower") return Value::String(ToLower(s));
  if (name == "capitalize") return Value::String(Capitalize(s));
  if (name == "title") return Value::String(JinjaTitle(s));
  if (name == "e" || name == "escape" || name == "forceescape") return Value::String(Escape(s));
  if (name == "wordcount") return Value::Int(static_cast<int64_t>(Split(s, nullptr, -1).size()));
  if (name == "replace") {
    const Value* from = Arg(a, 0, "old");
    const Value* to = Arg(a, 1, "new");
    if (!from || !to) return InvalidArgument("replace expects old and new strings");
    TL_ASSIGN_OR_RETURN(int64_t count, IntArg(Arg(a, 2, "count"), -1, "replace's count"));
    std::string out = Replace(s, from->ToString(limit), to->ToString(limit), count);
    TL_RETURN_IF_ERROR(r.CheckSize(out.size()));
    return Value::String(std::move(out));
  }
  if (name == "indent") {
    const Value* width = Arg(a, 0, "width");
    const Value* first = Arg(a, 1, "first");
    const Value* blank = Arg(a, 2, "blank");
    std::string pad;
    if (width && width->is_string()) {
      pad = width->str();
    } else {
      TL_ASSIGN_OR_RETURN(int64_t w, IntArg(width, 4, "indent's width"));
      if (w > 1024) return InvalidArgument("indent: width above 1024");
      pad = std::string(static_cast<size_t>(std::max<int64_t>(0, w)), ' ');
    }
    static const std::string kNewline = "\n";
    List lines = Split(s, &kNewline, -1);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].str();
      if (i) out += "\n";
      bool indent =
          i == 0 ? (first && first->Truthy()) : (!line.empty() || (blank && blank->Truthy()));
      if (indent) out += pad;
      out += line;
      TL_RETURN_IF_ERROR(r.CheckSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "center") {
    TL_ASSIGN_OR_RETURN(int64_t w, IntArg(Arg(a, 0, "width"), 80, "center's width"));
    int64_t n = static_cast<int64_t>(CodePointCount(s));
    if (w > 4096) return InvalidArgument("center: width above 4096");
    if (w <= n) return Value::String(s);
    int64_t left = (w - n) / 2 + ((w - n) & w & 1);
    return Value::String(std::string(left, ' ') + s + std::string(w - n - left, ' '));
  }
  if (name == "batch") return InvalidArgument("the 'batch' filter is not supported");
  return ErrorAt(pos, "unknown filter '" + name + "'");
}

}  // namespace tlaloc::jinja
