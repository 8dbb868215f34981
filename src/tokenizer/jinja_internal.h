// The Jinja engine's inside (see tlaloc/tokenizer/jinja.h): values, tokens, the syntax tree and
// the pieces the lexer, parser, evaluator and filters share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tlaloc/support/status.h"
#include "tlaloc/tokenizer/jinja.h"

namespace tlaloc::jinja {

// ---- Values: Python's objects as a template sees them.

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python's dict

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Renderer;
struct Callable {
  std::string name;
  std::function<StatusOr<Value>(Renderer&, CallArgs&)> fn;
};

class Value {
 public:
  enum Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;
  static Value Undefined(std::string name = "") {
    Value v;
    v.str_ = std::move(name);
    return v;
  }
  static Value None() { return Make(kNone); }
  static Value Bool(bool b) {
    Value v = Make(kBool);
    v.int_ = b;
    return v;
  }
  static Value Int(int64_t i) {
    Value v = Make(kInt);
    v.int_ = i;
    return v;
  }
  static Value Float(double f) {
    Value v = Make(kFloat);
    v.float_ = f;
    return v;
  }
  static Value String(std::string s) {
    Value v = Make(kString);
    v.str_ = std::move(s);
    return v;
  }
  static Value MakeList(List items = {}) {
    Value v = Make(kList);
    v.list_ = std::make_shared<List>(std::move(items));
    return v;
  }
  // A tuple: a list that prints as (a, b) and never equals a list, as in Python.
  static Value MakeTuple(List items) {
    Value v = MakeList(std::move(items));
    v.tuple_ = true;
    return v;
  }
  static Value MakeDict(Dict items = {}, bool is_namespace = false) {
    Value v = Make(kDict);
    v.dict_ = std::make_shared<Dict>(std::move(items));
    v.namespace_ = is_namespace;
    return v;
  }
  static Value MakeCallable(std::string name,
                            std::function<StatusOr<Value>(Renderer&, CallArgs&)> fn) {
    Value v = Make(kCallable);
    v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
    return v;
  }
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == kUndefined; }
  bool is_none() const { return kind_ == kNone; }
  bool is_string() const { return kind_ == kString; }
  bool is_list() const { return kind_ == kList; }
  bool is_dict() const { return kind_ == kDict; }
  bool is_namespace() const { return kind_ == kDict && namespace_; }
  bool is_tuple() const { return kind_ == kList && tuple_; }
  bool is_number() const { return kind_ == kInt || kind_ == kFloat || kind_ == kBool; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return str_; }  // a string, or an undefined's name
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }  // namespaces are the one mutable object
  const Callable& callable() const { return *fn_; }

  // Dict lookup; nullptr when absent.
  const Value* Find(std::string_view key) const;

  bool Truthy() const;
  // Python's str() (what {{ }} prints): None, True, 1.5, ['a', 1], {'k': 'v'}; undefined is "".
  // Stops early once past `limit` bytes (shared lists can nest exponentially).
  std::string ToString(size_t limit = SIZE_MAX) const;
  // Python's repr().
  std::string Repr(size_t limit = SIZE_MAX) const;
  // Python's type name, for error messages.
  std::string TypeName() const;

 private:
  void AppendRepr(std::string* out, size_t limit) const;
  static Value Make(Kind k) {
    Value v;
    v.kind_ = k;
    return v;
  }
  Kind kind_ = kUndefined;
  bool namespace_ = false;
  bool tuple_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

bool Equal(const Value& a, const Value& b);
// Python's <, or an error for unordered types.
StatusOr<bool> Less(const Value& a, const Value& b);
// Python's repr() of a float, e.g. 1.0, 0.1, 1e+16.
std::string FloatRepr(double d);
// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=...) with Python's separators.
StatusOr<std::string> ToJson(const Value& v, int indent, bool sort_keys,
                             const std::string& item_sep, const std::string& key_sep, size_t limit);

// UTF-8 helpers: strings index and measure by code point, as Python's str does.
std::vector<std::string_view> CodePoints(std::string_view s);
size_t CodePointCount(std::string_view s);
std::string ToUpper(std::string_view s);
std::string ToLower(std::string_view s);
bool IsPySpace(char32_t c);  // Python's str.isspace

// ---- Tokens.

enum class Tok : uint8_t {
  kText,        // template data
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,
  kInt,
  kFloat,
  kOp,  // an operator or punctuation, in text
  kEnd,
};

struct Token {
  Tok type;
  std::string text;  // data, name, operator, or a string literal's value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1, col = 1;
};

StatusOr<std::vector<Token>> Lex(std::string_view source);

// ---- Syntax tree.

struct Pos {
  int line = 1, col = 1;
};
Status ErrorAt(Pos pos, const std::string& what);

enum class ExprKind : uint8_t {
  kLiteral,  // literal
  kName,     // name
  kList,     // args
  kTuple,    // args
  kDict,     // args: key, value, key, value...
  kAttr,     // args[0].name
  kItem,     // args[0][args[1]]
  kSlice,    // args[0][args[1]:args[2]:args[3]] (null when left out)
  kCall,     // args[0](args[1:], kwargs)
  kFilter,   // args[0] | name(args[1:], kwargs)
  kTest,     // args[0] is [not] name(args[1:])
  kNeg,      // -args[0]
  kPos,      // +args[0]
  kNot,      // not args[0]
  kBinary,   // args[0] name args[1]: + - * / // % ** ~
  kAnd,
  kOr,
  kCompare,  // args[0] ops[0] args[1] ops[1] args[2]...
  kCond,     // args[0] if args[1] else args[2] (args[2] null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Expr {
  ExprKind kind;
  Pos pos;
  Value literal;
  std::string name;
  bool negated = false;  // `is not`
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

enum class NodeKind : uint8_t {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // if expr: body else: else_body
  kFor,       // for targets in expr [if cond]: body else: else_body
  kSet,       // set targets = expr, or set targets[0].attr = expr
  kSetBlock,  // set targets[0] %}body{% endset (optionally filtered by expr, a kFilter on null)
  kMacro,     // macro text(params): body
  kBreak,
  kContinue,
  kCallBlock,    // call expr %}body{% endcall : expr is called with caller() rendering body
  kFilterBlock,  // filter expr %}body{% endfilter
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
struct Node {
  NodeKind kind;
  Pos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults
  std::vector<NodePtr> body, else_body;
};

struct Program {
  std::vector<NodePtr> body;
};

StatusOr<std::shared_ptr<const Program>> ParseTokens(std::vector<Token> tokens);

// ---- Filters, tests and methods (jinja_filters.cc).

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);
StatusOr<Value> ApplyFilter(Renderer& r, const std::string& name, const Value& input,
                            CallArgs& args, Pos pos);
StatusOr<bool> ApplyTest(Renderer& r, const std::string& name, const Value& input, CallArgs& args,
                         Pos pos);
// `obj.name` when obj is a str, dict or list with a method of that name: a bound method.
std::optional<Value> BoundMethod(const Value& obj, const std::string& name);

// Helpers shared by the filters and methods (jinja_methods.cc).
const Value* Arg(const CallArgs& a, size_t i, std::string_view name);  // by position or name
Status NeedString(const Value& v, const std::string& what);
StatusOr<int64_t> IntArg(const Value* v, int64_t def, const std::string& what);
StatusOr<List> AsList(const Value& v, const std::string& filter);  // what list(v) gives
// Python's str.strip/lstrip/rstrip (chars == nullptr: whitespace), split, replace, capitalize,
// title; JinjaTitle is jinja2's title filter.
std::string Strip(const std::string& s, const std::string* chars, bool left, bool right);
List Split(const std::string& s, const std::string* sep, int64_t maxsplit);
std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count);
std::string Capitalize(const std::string& s);
std::string PyTitle(const std::string& s);
std::string JinjaTitle(const std::string& s);
bool IsAlpha(std::string_view c);

// The global `name` (range, namespace, dict, raise_exception, strftime_now), else undefined.
StatusOr<Value> GlobalValue(const std::string& name);

// ---- The evaluator (jinja_eval.cc), as far as filters need it.

class Renderer {
 public:
  Renderer(const JinjaLimits& limits) : limits_(limits) {}
  const JinjaLimits& limits() const { return limits_; }
  // Counts `n` loop iterations against the limit.
  Status CountIterations(int64_t n);
  Status CheckSize(size_t bytes) const;
  // Calls a callable value with args (macros, globals, bound methods).
  StatusOr<Value> Call(const Value& fn, CallArgs& args, Pos pos);
  Pos pos;                         // the node being evaluated, for errors raised deep inside
  std::vector<Value> namespaces_;  // every namespace() made, emptied after rendering

 private:
  friend class Evaluator;
  JinjaLimits limits_;
  int64_t iterations_ = 0;
  int depth_ = 0;
};

}  // namespace tlaloc::jinja
