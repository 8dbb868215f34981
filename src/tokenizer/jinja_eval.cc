// The Jinja evaluator: runs the syntax tree over a context with jinja2's semantics (Python's
// operators and truthiness, scoping where a for loop's or macro's assignments stay inside it,
// namespaces as the one mutable object), under the limits of JinjaLimits.
#include <cmath>

#include "jinja_internal.h"

namespace tlaloc::jinja {

namespace {

// An error from a helper, given the position of the expression that called it (kept when the
// message already names a template line).
Status At(Pos pos, const Status& s) {
  if (s.ok() || s.message().rfind("template line ", 0) == 0) return s;
  return ErrorAt(pos, s.message());
}

struct Frame {
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Lookup(const std::string& name) const {
    for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
      for (const auto& [k, v] : f->vars) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};
using FramePtr = std::shared_ptr<Frame>;

bool IsHole(const Expr& e) { return e.kind == ExprKind::kLiteral && e.name == "<hole>"; }

}  // namespace

Status Renderer::CountIterations(int64_t n) {
  iterations_ += n;
  if (n < 0 || iterations_ > limits_.max_loop_iterations)
    return ResourceExhausted("more than " + std::to_string(limits_.max_loop_iterations) +
                             " loop iterations (JinjaLimits::max_loop_iterations)");
  return OkStatus();
}

Status Renderer::CheckSize(size_t bytes) const {
  if (bytes > static_cast<size_t>(limits_.max_output_bytes))
    return ResourceExhausted("text longer than " + std::to_string(limits_.max_output_bytes) +
                             " bytes (JinjaLimits::max_output_bytes)");
  return OkStatus();
}

StatusOr<Value> Renderer::Call(const Value& fn, CallArgs& args, Pos at) {
  if (fn.kind() != Value::kCallable) {
    if (fn.is_undefined())
      return ErrorAt(at, fn.str().empty() ? "call of an undefined value" : fn.str());
    return ErrorAt(at, "'" + fn.TypeName() + "' object is not callable");
  }
  if (depth_ >= limits_.max_call_depth)
    return ErrorAt(at, "calls nested deeper than " + std::to_string(limits_.max_call_depth) +
                           " (JinjaLimits::max_call_depth)");
  ++depth_;
  Pos saved = pos;
  pos = at;
  StatusOr<Value> r = fn.callable().fn(*this, args);
  pos = saved;
  --depth_;
  if (!r.ok()) return At(at, r.status());
  return r;
}

class Evaluator {
 public:
  explicit Evaluator(Renderer& r) : r_(r) {}

  enum class Flow { kNormal, kBreak, kContinue };

  Status Exec(const std::vector<NodePtr>& body, const FramePtr& f, std::string* out) {
    for (const NodePtr& n : body) {
      TL_RETURN_IF_ERROR(ExecNode(*n, f, out));
      TL_RETURN_IF_ERROR(At(n->pos, r_.CheckSize(out->size())));
      if (flow_ != Flow::kNormal) return OkStatus();
    }
    return OkStatus();
  }

  StatusOr<Value> Eval(const Expr& e, const FramePtr& f);

  Value hole_;  // the input of a filter block or a filtered set block

 private:
  size_t Limit() const { return static_cast<size_t>(r_.limits().max_output_bytes); }

  Status ExecNode(const Node& n, const FramePtr& f, std::string* out) {
    switch (n.kind) {
      case NodeKind::kText:
        *out += n.text;
        return OkStatus();
      case NodeKind::kOutput: {
        TL_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, f));
        *out += v.ToString(Limit());
        return OkStatus();
      }
      case NodeKind::kIf: {
        TL_ASSIGN_OR_RETURN(Value c, Eval(*n.expr, f));
        return Exec(c.Truthy() ? n.body : n.else_body, f, out);
      }
      case NodeKind::kFor:
        return ExecFor(n, f, out);
      case NodeKind::kSet: {
        TL_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, f));
        return Assign(n, f, std::move(v));
      }
      case NodeKind::kSetBlock: {
        std::string text;
        TL_RETURN_IF_ERROR(Exec(n.body, f, &text));
        Value v = Value::String(std::move(text));
        if (n.expr) {
          TL_ASSIGN_OR_RETURN(v, EvalWithHole(*n.expr, f, std::move(v)));
        }
        f->Set(n.targets[0], std::move(v));
        return OkStatus();
      }
      case NodeKind::kFilterBlock: {
        std::string text;
        TL_RETURN_IF_ERROR(Exec(n.body, f, &text));
        TL_ASSIGN_OR_RETURN(Value v, EvalWithHole(*n.expr, f, Value::String(std::move(text))));
        *out += v.ToString(Limit());
        return OkStatus();
      }
      case NodeKind::kMacro:
        f->Set(n.text, MakeMacro(n, f, n.text));
        return OkStatus();
      case NodeKind::kCallBlock: {
        const Expr& call = *n.expr;
        TL_ASSIGN_OR_RETURN(Value callee, Eval(*call.args[0], f));
        CallArgs args;
        TL_RETURN_IF_ERROR(EvalArgs(call, 1, f, &args));
        args.kw.emplace_back("caller", MakeMacro(n, f, "caller"));
        TL_ASSIGN_OR_RETURN(Value v, r_.Call(callee, args, call.pos));
        *out += v.ToString(Limit());
        return OkStatus();
      }
      case NodeKind::kBreak:
        flow_ = Flow::kBreak;
        return OkStatus();
      case NodeKind::kContinue:
        flow_ = Flow::kContinue;
        return OkStatus();
    }
    return ErrorAt(n.pos, "unknown statement");
  }

  StatusOr<Value> EvalWithHole(const Expr& e, const FramePtr& f, Value v) {
    Value saved = hole_;
    hole_ = std::move(v);
    auto r = Eval(e, f);
    hole_ = saved;
    return r;
  }

  static Status Unpack(const std::vector<std::string>& targets, const Value& v, Pos pos, Frame* f) {
    if (targets.size() == 1) {
      f->Set(targets[0], v);
      return OkStatus();
    }
    if (!v.is_list())
      return ErrorAt(pos, "cannot unpack a " + v.TypeName() + " into " +
                              std::to_string(targets.size()) + " names");
    if (v.list().size() != targets.size())
      return ErrorAt(pos, "cannot unpack " + std::to_string(v.list().size()) + " values into " +
                              std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) f->Set(targets[i], v.list()[i]);
    return OkStatus();
  }

  Status Assign(const Node& n, const FramePtr& f, Value v) {
    if (!n.attr.empty()) {
      const Value* ns = f->Lookup(n.targets[0]);
      if (ns == nullptr || !ns->is_namespace())
        return ErrorAt(n.pos, "cannot assign attribute '" + n.attr + "' on '" + n.targets[0] +
                                  "', which is not a namespace()");
      for (auto& [k, old] : ns->mutable_dict()) {
        if (k == n.attr) {
          old = std::move(v);
          return OkStatus();
        }
      }
      ns->mutable_dict().emplace_back(n.attr, std::move(v));
      return OkStatus();
    }
    return Unpack(n.targets, v, n.pos, f.get());
  }

  // What `for` iterates: a list's items, a dict's keys, a string's characters.
  StatusOr<List> Iterate(const Value& v, Pos pos) {
    auto items = AsList(v, "for");  // the same items as list(v)
    if (!items.ok()) return ErrorAt(pos, "'" + v.TypeName() + "' object is not iterable");
    return items;
  }

  Status ExecFor(const Node& n, const FramePtr& f, std::string* out) {
    TL_ASSIGN_OR_RETURN(Value seq, Eval(*n.expr, f));
    TL_ASSIGN_OR_RETURN(List items, Iterate(seq, n.expr->pos));
    if (n.cond) {
      List kept;
      for (const Value& item : items) {
        TL_RETURN_IF_ERROR(At(n.pos, r_.CountIterations(1)));
        auto scope = std::make_shared<Frame>(Frame{f, {}});
        TL_RETURN_IF_ERROR(Unpack(n.targets, item, n.pos, scope.get()));
        TL_ASSIGN_OR_RETURN(Value c, Eval(*n.cond, scope));
        if (c.Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(n.else_body, f, out);
    const auto len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      TL_RETURN_IF_ERROR(At(n.pos, r_.CountIterations(1)));
      auto scope = std::make_shared<Frame>(Frame{f, {}});
      TL_RETURN_IF_ERROR(Unpack(n.targets, items[i], n.pos, scope.get()));
      Dict loop = {{"index", Value::Int(i + 1)},      {"index0", Value::Int(i)},
                   {"revindex", Value::Int(len - i)}, {"revindex0", Value::Int(len - i - 1)},
                   {"first", Value::Bool(i == 0)},    {"last", Value::Bool(i == len - 1)},
                   {"length", Value::Int(len)},       {"depth", Value::Int(1)},
                   {"depth0", Value::Int(0)}};
      if (i > 0) loop.emplace_back("previtem", items[i - 1]);
      if (i + 1 < len) loop.emplace_back("nextitem", items[i + 1]);
      loop.emplace_back("cycle", Value::MakeCallable("cycle", [i](Renderer&, CallArgs& a) {
                          if (a.pos.empty())
                            return StatusOr<Value>(InvalidArgument("no items for cycling given"));
                          return StatusOr<Value>(a.pos[i % a.pos.size()]);
                        }));
      scope->Set("loop", Value::MakeDict(std::move(loop)));
      TL_RETURN_IF_ERROR(Exec(n.body, scope, out));
      if (flow_ == Flow::kBreak) {
        flow_ = Flow::kNormal;
        break;
      }
      flow_ = Flow::kNormal;
    }
    return OkStatus();
  }

  Value MakeMacro(const Node& n, const FramePtr& defined_in, const std::string& name) {
    const Node* node = &n;
    // The evaluator keeps the defining frame alive; the macro, which that frame may hold, only
    // points at it (a shared pointer back would be a cycle that is never freed).
    macro_frames_.push_back(defined_in);
    std::weak_ptr<Frame> weak = defined_in;
    return Value::MakeCallable(name, [this, node, weak](Renderer&, CallArgs& a) -> StatusOr<Value> {
      auto scope = std::make_shared<Frame>(Frame{weak.lock(), {}});
      const auto& params = node->params;
      List varargs;
      for (size_t i = 0; i < a.pos.size(); ++i) {
        if (i < params.size()) {
          scope->Set(params[i].first, a.pos[i]);
        } else {
          varargs.push_back(a.pos[i]);
        }
      }
      Dict kwargs;
      for (auto& [k, v] : a.kw) {
        bool is_param = k == "caller";
        for (const auto& p : params) is_param = is_param || p.first == k;
        if (is_param) {
          scope->Set(k, v);
        } else {
          kwargs.emplace_back(k, v);
        }
      }
      for (size_t i = 0; i < params.size(); ++i) {
        bool given = i < a.pos.size();
        for (const auto& kv : a.kw) given = given || kv.first == params[i].first;
        if (given) continue;
        if (params[i].second) {
          TL_ASSIGN_OR_RETURN(Value d, Eval(*params[i].second, scope));
          scope->Set(params[i].first, std::move(d));
        } else {
          scope->Set(params[i].first, Value::Undefined("'" + params[i].first + "' is undefined"));
        }
      }
      scope->Set("varargs", Value::MakeList(std::move(varargs)));
      scope->Set("kwargs", Value::MakeDict(std::move(kwargs)));
      std::string text;
      Flow saved = flow_;
      flow_ = Flow::kNormal;
      Status s = Exec(node->body, scope, &text);
      flow_ = saved;
      TL_RETURN_IF_ERROR(s);
      return Value::String(std::move(text));
    });
  }

  Status EvalArgs(const Expr& e, size_t first, const FramePtr& f, CallArgs* args) {
    for (size_t i = first; i < e.args.size(); ++i) {
      TL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], f));
      args->pos.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      TL_ASSIGN_OR_RETURN(Value v, Eval(*x, f));
      args->kw.emplace_back(k, std::move(v));
    }
    return OkStatus();
  }

  StatusOr<Value> GetAttr(const Value& obj, const std::string& name, Pos pos);
  StatusOr<Value> GetItem(const Value& obj, const Value& key, Pos pos);
  StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop,
                           const Value& step, Pos pos);
  StatusOr<Value> Binary(const std::string& op, const Value& a, const Value& b, Pos pos);
  StatusOr<bool> Compare(const std::string& op, const Value& a, const Value& b, Pos pos);

  Renderer& r_;
  Flow flow_ = Flow::kNormal;
  std::vector<FramePtr> macro_frames_;
};

namespace {

Status UndefinedError(const Value& v, Pos pos) {
  return ErrorAt(pos, v.str().empty() ? "undefined value used" : v.str());
}

bool ToIndex(const Value& v, int64_t* out) {
  if (v.kind() != Value::kInt && v.kind() != Value::kBool) return false;
  *out = v.as_int();
  return true;
}

// Python's slice.indices(): the positions a[start:stop:step] takes from a sequence of length n.
StatusOr<std::vector<int64_t>> SliceIndices(int64_t n, const Value& start, const Value& stop,
                                            const Value& step) {
  int64_t st = 1;
  if (!step.is_none() && !step.is_undefined() && !ToIndex(step, &st))
    return InvalidArgument("slice indices must be integers or None");
  if (st == 0) return InvalidArgument("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t def, int64_t* out) -> bool {
    if (v.is_none() || v.is_undefined()) {
      *out = def;
      return true;
    }
    int64_t x;
    if (!ToIndex(v, &x)) return false;
    if (x < 0) x += n;
    if (st > 0) {
      *out = std::clamp<int64_t>(x, 0, n);
    } else {
      *out = std::clamp<int64_t>(x, -1, n - 1);
    }
    return true;
  };
  int64_t a, b;
  if (!clamp(start, st > 0 ? 0 : n - 1, &a) || !clamp(stop, st > 0 ? n : -1, &b))
    return InvalidArgument("slice indices must be integers or None");
  std::vector<int64_t> idx;
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) idx.push_back(i);
  return idx;
}

}  // namespace

StatusOr<Value> Evaluator::GetAttr(const Value& obj, const std::string& name, Pos pos) {
  if (obj.is_undefined()) return UndefinedError(obj, pos);
  if (obj.is_dict()) {
    if (!obj.is_namespace()) {
      if (auto m = BoundMethod(obj, name)) return *m;
    }
    if (const Value* v = obj.Find(name)) return *v;
    return Value::Undefined("'dict object' has no attribute '" + name + "'");
  }
  if (auto m = BoundMethod(obj, name)) return *m;
  return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + name + "'");
}

StatusOr<Value> Evaluator::GetItem(const Value& obj, const Value& key, Pos pos) {
  if (obj.is_undefined()) return UndefinedError(obj, pos);
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.Find(key.str())) return *v;
    if (!obj.is_namespace()) {
      if (auto m = BoundMethod(obj, key.str())) return *m;
    }
    return Value::Undefined("'dict object' has no attribute '" + key.str() + "'");
  }
  int64_t i;
  if (obj.is_list() && ToIndex(key, &i)) {
    const auto n = static_cast<int64_t>(obj.list().size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return obj.list()[i];
    return Value::Undefined("'list object' has no element " + std::to_string(key.as_int()));
  }
  if (obj.is_string() && ToIndex(key, &i)) {
    auto cps = CodePoints(obj.str());
    const auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return Value::String(std::string(cps[i]));
    return Value::Undefined("'str object' has no element " + std::to_string(key.as_int()));
  }
  if (key.is_string()) return GetAttr(obj, key.str(), pos);
  return Value::Undefined("'" + obj.TypeName() + " object' has no element " + key.Repr());
}

StatusOr<Value> Evaluator::GetSlice(const Value& obj, const Value& start, const Value& stop,
                                    const Value& step, Pos pos) {
  if (obj.is_undefined()) return UndefinedError(obj, pos);
  if (obj.is_list()) {
    TL_ASSIGN_OR_RETURN(auto idx,
                        SliceIndices(static_cast<int64_t>(obj.list().size()), start, stop, step));
    List out;
    for (int64_t i : idx) out.push_back(obj.list()[i]);
    return Value::MakeList(std::move(out));
  }
  if (obj.is_string()) {
    auto cps = CodePoints(obj.str());
    TL_ASSIGN_OR_RETURN(auto idx,
                        SliceIndices(static_cast<int64_t>(cps.size()), start, stop, step));
    std::string out;
    for (int64_t i : idx) out += cps[i];
    return Value::String(std::move(out));
  }
  return Value::Undefined("'" + obj.TypeName() + " object' cannot be sliced");
}

StatusOr<Value> Evaluator::Eval(const Expr& e, const FramePtr& f) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return IsHole(e) ? hole_ : e.literal;
    case ExprKind::kName: {
      if (const Value* v = f->Lookup(e.name)) return *v;
      return GlobalValue(e.name);
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      for (const auto& a : e.args) {
        TL_ASSIGN_OR_RETURN(Value v, Eval(*a, f));
        items.push_back(std::move(v));
      }
      return e.kind == ExprKind::kTuple ? Value::MakeTuple(std::move(items))
                                        : Value::MakeList(std::move(items));
    }
    case ExprKind::kDict: {
      Dict items;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        TL_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], f));
        if (!k.is_string())
          return ErrorAt(e.args[i]->pos, "dict keys must be strings here, found " + k.TypeName());
        TL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], f));
        bool replaced = false;
        for (auto& kv : items) {
          if (kv.first == k.str()) {
            kv.second = v;
            replaced = true;
          }
        }
        if (!replaced) items.emplace_back(k.str(), std::move(v));
      }
      return Value::MakeDict(std::move(items));
    }
    case ExprKind::kAttr: {
      TL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], f));
      return GetAttr(obj, e.name, e.pos);
    }
    case ExprKind::kItem: {
      TL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], f));
      TL_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], f));
      return GetItem(obj, key, e.pos);
    }
    case ExprKind::kSlice: {
      TL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], f));
      Value parts[3] = {Value::None(), Value::None(), Value::None()};
      for (int i = 0; i < 3; ++i) {
        if (e.args[i + 1]) {
          TL_ASSIGN_OR_RETURN(parts[i], Eval(*e.args[i + 1], f));
        }
      }
      auto r = GetSlice(obj, parts[0], parts[1], parts[2], e.pos);
      if (!r.ok()) return At(e.pos, r.status());
      return r;
    }
    case ExprKind::kCall: {
      TL_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0], f));
      CallArgs args;
      TL_RETURN_IF_ERROR(EvalArgs(e, 1, f, &args));
      return r_.Call(callee, args, e.pos);
    }
    case ExprKind::kFilter: {
      TL_ASSIGN_OR_RETURN(Value in, Eval(*e.args[0], f));
      CallArgs args;
      TL_RETURN_IF_ERROR(EvalArgs(e, 1, f, &args));
      r_.pos = e.pos;
      auto r = ApplyFilter(r_, e.name, in, args, e.pos);
      if (!r.ok()) return At(e.pos, r.status());
      return r;
    }
    case ExprKind::kTest: {
      TL_ASSIGN_OR_RETURN(Value in, Eval(*e.args[0], f));
      CallArgs args;
      TL_RETURN_IF_ERROR(EvalArgs(e, 1, f, &args));
      auto r = ApplyTest(r_, e.name, in, args, e.pos);
      if (!r.ok()) return At(e.pos, r.status());
      return Value::Bool(*r != e.negated);
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      TL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], f));
      if (v.is_undefined()) return UndefinedError(v, e.pos);
      if (!v.is_number())
        return ErrorAt(e.pos, "bad operand type for unary " +
                                  std::string(e.kind == ExprKind::kNeg ? "-" : "+") + ": '" +
                                  v.TypeName() + "'");
      if (e.kind == ExprKind::kPos) return v.kind() == Value::kBool ? Value::Int(v.as_int()) : v;
      if (v.kind() == Value::kFloat) return Value::Float(-v.as_double());
      if (v.as_int() == INT64_MIN) return ErrorAt(e.pos, "integer overflow");
      return Value::Int(-v.as_int());
    }
    case ExprKind::kNot: {
      TL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], f));
      return Value::Bool(!v.Truthy());
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      TL_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], f));
      if (a.Truthy() == (e.kind == ExprKind::kOr)) return a;
      return Eval(*e.args[1], f);
    }
    case ExprKind::kBinary: {
      TL_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], f));
      TL_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], f));
      auto r = Binary(e.name, a, b, e.pos);
      if (!r.ok()) return At(e.pos, r.status());
      return r;
    }
    case ExprKind::kCompare: {
      TL_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], f));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        TL_ASSIGN_OR_RETURN(Value b, Eval(*e.args[i + 1], f));
        auto r = Compare(e.ops[i], a, b, e.pos);
        if (!r.ok()) return At(e.pos, r.status());
        if (!*r) return Value::Bool(false);
        a = std::move(b);
      }
      return Value::Bool(true);
    }
    case ExprKind::kCond: {
      TL_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1], f));
      if (c.Truthy()) return Eval(*e.args[0], f);
      if (e.args[2]) return Eval(*e.args[2], f);
      return Value::Undefined("the inline if's condition was false and it has no else");
    }
  }
  return ErrorAt(e.pos, "unknown expression");
}

StatusOr<Value> Evaluator::Binary(const std::string& op, const Value& a, const Value& b, Pos pos) {
  if (op == "~") {
    std::string s = a.ToString(Limit()) + b.ToString(Limit());
    TL_RETURN_IF_ERROR(r_.CheckSize(s.size()));
    return Value::String(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a, pos);
  if (b.is_undefined()) return UndefinedError(b, pos);
  const std::string types = "'" + a.TypeName() + "' and '" + b.TypeName() + "'";
  if (a.is_number() && b.is_number()) {
    const bool ints = a.kind() != Value::kFloat && b.kind() != Value::kFloat;
    const int64_t x = a.as_int(), y = b.as_int();
    const double p = a.as_double(), q = b.as_double();
    int64_t r = 0;
    if (op == "+") {
      if (!ints) return Value::Float(p + q);
      if (__builtin_add_overflow(x, y, &r)) return InvalidArgument("integer overflow");
      return Value::Int(r);
    }
    if (op == "-") {
      if (!ints) return Value::Float(p - q);
      if (__builtin_sub_overflow(x, y, &r)) return InvalidArgument("integer overflow");
      return Value::Int(r);
    }
    if (op == "*") {
      if (!ints) return Value::Float(p * q);
      if (__builtin_mul_overflow(x, y, &r)) return InvalidArgument("integer overflow");
      return Value::Int(r);
    }
    if (op == "/") {
      if (q == 0) return InvalidArgument("division by zero");
      return Value::Float(p / q);
    }
    if (op == "//" || op == "%") {
      if (q == 0) return InvalidArgument(op == "%" ? "modulo by zero" : "division by zero");
      if (!ints) {
        double m = std::fmod(p, q);
        if (m != 0 && ((m < 0) != (q < 0))) m += q;
        return Value::Float(op == "%" ? m : std::floor((p - m) / q + 0.5));
      }
      if (x == INT64_MIN && y == -1) return InvalidArgument("integer overflow");
      int64_t d = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        m += y;
        --d;
      }
      return Value::Int(op == "%" ? m : d);
    }
    if (op == "**") {
      if (ints && y >= 0) {
        int64_t acc = 1;
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(acc, x, &acc)) return InvalidArgument("integer overflow");
          if (acc == 0 || acc == 1 || (acc == -1 && i > 64)) break;
        }
        if (acc == -1 && x == -1) acc = (y % 2) ? -1 : 1;
        return Value::Int(acc);
      }
      return Value::Float(std::pow(p, q));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    TL_RETURN_IF_ERROR(r_.CheckSize(a.str().size() + b.str().size()));
    return Value::String(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = a.list();
    out.insert(out.end(), b.list().begin(), b.list().end());
    TL_RETURN_IF_ERROR(r_.CountIterations(static_cast<int64_t>(out.size())));
    return Value::MakeList(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) &&
      (b.kind() == Value::kInt || b.kind() == Value::kBool)) {
    const int64_t n = std::max<int64_t>(0, b.as_int());
    if (a.is_string()) {
      if (n > 0 && a.str().size() > static_cast<size_t>(r_.limits().max_output_bytes) / n)
        return r_.CheckSize(SIZE_MAX);
      std::string s;
      for (int64_t i = 0; i < n; ++i) s += a.str();
      return Value::String(std::move(s));
    }
    if (n > 0 && a.list().size() > static_cast<size_t>(r_.limits().max_loop_iterations) / n)
      return r_.CountIterations(-1);
    TL_RETURN_IF_ERROR(r_.CountIterations(n * static_cast<int64_t>(a.list().size())));
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), a.list().begin(), a.list().end());
    return Value::MakeList(std::move(out));
  }
  if (op == "*" && (b.is_string() || b.is_list()) &&
      (a.kind() == Value::kInt || a.kind() == Value::kBool))
    return Binary(op, b, a, pos);
  return InvalidArgument("unsupported operand type(s) for " + op + ": " + types);
}

StatusOr<bool> Evaluator::Compare(const std::string& op, const Value& a, const Value& b, Pos) {
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string())
        return InvalidArgument("'in <string>' requires string as left operand, not " +
                               a.TypeName());
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& v : b.list()) found = found || Equal(a, v);
    } else if (b.is_dict()) {
      found = a.is_string() && b.Find(a.str()) != nullptr;
    } else if (!b.is_undefined()) {
      return InvalidArgument("argument of type '" + b.TypeName() + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined() || b.is_undefined())
    return InvalidArgument(a.is_undefined() && !a.str().empty()   ? a.str()
                           : b.is_undefined() && !b.str().empty() ? b.str()
                                                                  : "undefined value compared");
  if (op == "<") return Less(a, b);
  if (op == ">") return Less(b, a);
  TL_ASSIGN_OR_RETURN(bool lt, Less(op == "<=" ? b : a, op == "<=" ? a : b));
  return !lt;
}

StatusOr<std::string> RenderProgram(const Program& p, const nlohmann::ordered_json& context,
                                    const JinjaLimits& limits) {
  if (!context.is_object() && !context.is_null())
    return InvalidArgument("a template's context must be a JSON object");
  auto root = std::make_shared<Frame>();
  if (context.is_object()) {
    for (const auto& [k, v] : context.items()) root->Set(k, Value::FromJson(v));
  }
  Renderer r(limits);
  std::string out;
  Status s;
  {
    Evaluator ev(r);
    s = ev.Exec(p.body, root, &out);
  }
  for (const Value& ns : r.namespaces_) ns.mutable_dict().clear();
  root->vars.clear();
  TL_RETURN_IF_ERROR(s);
  return out;
}

StatusOr<Template> Template::Parse(std::string_view source) {
  TL_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  TL_ASSIGN_OR_RETURN(auto program, ParseTokens(std::move(tokens)));
  Template t;
  t.program_ = std::move(program);
  return t;
}

StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context,
                                       const JinjaLimits& limits) const {
  return RenderProgram(*program_, context, limits);
}

}  // namespace tlaloc::jinja
