// The Jinja parser: tokens to the syntax tree, with jinja2's grammar and operator precedence
// (from loosest: `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **,
// unary - +, then postfix `.attr` `[i]` `[a:b:c]` `(args)` and the `|filter` / `is test` chain).
#include <set>

#include "jinja_internal.h"

namespace tlaloc::jinja {

namespace {

constexpr int kMaxNesting = 200;  // bounds the parser's recursion on hostile input

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  StatusOr<std::shared_ptr<const Program>> Run() {
    auto program = std::make_shared<Program>();
    std::string end_tag;
    TL_RETURN_IF_ERROR(ParseBody({}, &program->body, &end_tag));
    return std::shared_ptr<const Program>(std::move(program));
  }

 private:
  const Token& Cur() const { return toks_[i_]; }
  const Token& Peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  Pos PosOf(const Token& t) const { return Pos{t.line, t.col}; }
  void Next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == Tok::kName && Cur().text == name; }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case Tok::kText:
        return "template text";
      case Tok::kVarBegin:
        return "'{{'";
      case Tok::kVarEnd:
        return "'}}'";
      case Tok::kBlockBegin:
        return "'{%'";
      case Tok::kBlockEnd:
        return "'%}'";
      case Tok::kName:
        return "name '" + t.text + "'";
      case Tok::kString:
        return "a string";
      case Tok::kInt:
      case Tok::kFloat:
        return "number " + t.text;
      case Tok::kOp:
        return "'" + t.text + "'";
      case Tok::kEnd:
        return "the end of the template";
    }
    return "?";
  }
  Status Unexpected(const std::string& expected) const {
    return ErrorAt(PosOf(Cur()), "expected " + expected + ", found " + Describe(Cur()));
  }
  Status ExpectOp(const char* op) {
    if (!IsOp(op)) return Unexpected(std::string("'") + op + "'");
    Next();
    return OkStatus();
  }
  Status ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) return Unexpected("'%}'");
    Next();
    return OkStatus();
  }
  StatusOr<std::string> ExpectName() {
    if (Cur().type != Tok::kName) return Unexpected("a name");
    std::string n = Cur().text;
    Next();
    return n;
  }

  // Parses nodes until a block tag whose name is in `ends` (left at that name, after '{%').
  Status ParseBody(const std::set<std::string>& ends, std::vector<NodePtr>* out,
                   std::string* end_tag) {
    if (++nesting_ > kMaxNesting) return ErrorAt(PosOf(Cur()), "blocks nested too deeply");
    while (true) {
      const Token& t = Cur();
      if (t.type == Tok::kEnd) {
        --nesting_;
        if (ends.empty()) return OkStatus();
        return ErrorAt(PosOf(t), "unexpected end of template: expected " + Join(ends));
      }
      if (t.type == Tok::kText) {
        auto n = MakeNode(NodeKind::kText, t);
        n->text = t.text;
        out->push_back(std::move(n));
        Next();
      } else if (t.type == Tok::kVarBegin) {
        auto n = MakeNode(NodeKind::kOutput, t);
        Next();
        TL_ASSIGN_OR_RETURN(n->expr, ParseExpression());
        if (Cur().type != Tok::kVarEnd) return Unexpected("'}}'");
        Next();
        out->push_back(std::move(n));
      } else if (t.type == Tok::kBlockBegin) {
        Next();
        if (Cur().type != Tok::kName) return Unexpected("a tag name");
        if (ends.count(Cur().text)) {
          *end_tag = Cur().text;
          --nesting_;
          return OkStatus();
        }
        TL_RETURN_IF_ERROR(ParseStatement(out));
      } else {
        return Unexpected("template text or a tag");
      }
    }
  }

  static std::string Join(const std::set<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "'" : " or '") + n + "'";
    return s;
  }

  NodePtr MakeNode(NodeKind kind, const Token& t) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->pos = PosOf(t);
    return n;
  }

  Status ParseStatement(std::vector<NodePtr>* out) {
    const Token tag = Cur();
    const std::string& name = tag.text;
    Next();
    if (name == "if") return ParseIf(tag, out);
    if (name == "for") return ParseFor(tag, out);
    if (name == "set") return ParseSet(tag, out);
    if (name == "macro") return ParseMacro(tag, out);
    if (name == "call") return ParseCallBlock(tag, out);
    if (name == "filter") return ParseFilterBlock(tag, out);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return ErrorAt(PosOf(tag), "'" + name + "' outside of a for loop");
      out->push_back(MakeNode(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, tag));
      return ExpectBlockEnd();
    }
    if (name == "generation") {  // transformers' assistant-mask tag: renders its body
      TL_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      TL_RETURN_IF_ERROR(ParseBody({"endgeneration"}, out, &end));
      Next();
      return ExpectBlockEnd();
    }
    if (name == "raw") return ErrorAt(PosOf(tag), "unclosed 'raw' block: expected 'endraw'");
    static const std::set<std::string> kEnds = {"endif",  "endfor",       "else",    "elif",
                                                "endset", "endmacro",     "endcall", "endfilter",
                                                "endraw", "endgeneration"};
    if (kEnds.count(name)) return ErrorAt(PosOf(tag), "unexpected '" + name + "' tag");
    return ErrorAt(PosOf(tag), "unknown or unsupported tag '" + name + "'");
  }

  Status ParseIf(const Token& tag, std::vector<NodePtr>* out) {
    auto n = MakeNode(NodeKind::kIf, tag);
    TL_ASSIGN_OR_RETURN(n->expr, ParseExpression());
    TL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    TL_RETURN_IF_ERROR(ParseBodyOf(tag, {"elif", "else", "endif"}, &n->body, &end));
    Token at = Cur();
    Next();
    if (end == "elif") {
      TL_RETURN_IF_ERROR(ParseIf(at, &n->else_body));
      out->push_back(std::move(n));
      return OkStatus();  // the nested if consumed the endif
    }
    if (end == "else") {
      TL_RETURN_IF_ERROR(ExpectBlockEnd());
      TL_RETURN_IF_ERROR(ParseBodyOf(tag, {"endif"}, &n->else_body, &end));
      Next();
    }
    out->push_back(std::move(n));
    return ExpectBlockEnd();
  }

  // ParseBody with an error naming the block that is left open.
  Status ParseBodyOf(const Token& tag, const std::set<std::string>& ends, std::vector<NodePtr>* out,
                     std::string* end) {
    Status s = ParseBody(ends, out, end);
    if (!s.ok() && Cur().type == Tok::kEnd)
      return ErrorAt(PosOf(Cur()), "unclosed '" + tag.text + "' block opened at line " +
                                       std::to_string(tag.line) + ": expected " + Join(ends) +
                                       " before the end of the template");
    return s;
  }

  Status ParseTargets(std::vector<std::string>* targets) {
    bool paren = IsOp("(");
    if (paren) Next();
    while (true) {
      TL_ASSIGN_OR_RETURN(std::string t, ExpectName());
      targets->push_back(t);
      if (!IsOp(",")) break;
      Next();
      if (paren && IsOp(")")) break;
    }
    if (paren) return ExpectOp(")");
    return OkStatus();
  }

  Status ParseFor(const Token& tag, std::vector<NodePtr>* out) {
    auto n = MakeNode(NodeKind::kFor, tag);
    TL_RETURN_IF_ERROR(ParseTargets(&n->targets));
    if (!IsName("in")) return Unexpected("'in'");
    Next();
    TL_ASSIGN_OR_RETURN(n->expr, ParseTupleOrExpr(/*allow_cond=*/false));
    if (IsName("if")) {
      Next();
      TL_ASSIGN_OR_RETURN(n->cond, ParseExpression());
    }
    if (IsName("recursive")) return ErrorAt(PosOf(Cur()), "recursive for loops are not supported");
    TL_RETURN_IF_ERROR(ExpectBlockEnd());
    ++loop_depth_;
    std::string end;
    Status s = ParseBodyOf(tag, {"else", "endfor"}, &n->body, &end);
    --loop_depth_;
    TL_RETURN_IF_ERROR(s);
    Next();
    if (end == "else") {
      TL_RETURN_IF_ERROR(ExpectBlockEnd());
      TL_RETURN_IF_ERROR(ParseBodyOf(tag, {"endfor"}, &n->else_body, &end));
      Next();
    }
    out->push_back(std::move(n));
    return ExpectBlockEnd();
  }

  Status ParseSet(const Token& tag, std::vector<NodePtr>* out) {
    auto n = MakeNode(NodeKind::kSet, tag);
    TL_ASSIGN_OR_RETURN(std::string first, ExpectName());
    n->targets.push_back(first);
    if (IsOp(".")) {
      Next();
      TL_ASSIGN_OR_RETURN(n->attr, ExpectName());
    } else {
      while (IsOp(",")) {
        Next();
        TL_ASSIGN_OR_RETURN(std::string t, ExpectName());
        n->targets.push_back(t);
      }
    }
    if (IsOp("=")) {
      Next();
      TL_ASSIGN_OR_RETURN(n->expr, ParseTupleOrExpr(/*allow_cond=*/true));
      out->push_back(std::move(n));
      return ExpectBlockEnd();
    }
    // {% set x %}...{% endset %}, optionally {% set x | filter %}.
    if (n->targets.size() != 1 || !n->attr.empty()) return Unexpected("'='");
    n->kind = NodeKind::kSetBlock;
    if (IsOp("|")) {
      auto hole = std::make_unique<Expr>();
      hole->kind = ExprKind::kLiteral;
      hole->name = "<hole>";
      hole->pos = PosOf(Cur());
      TL_ASSIGN_OR_RETURN(n->expr, ParseFilters(std::move(hole)));
    }
    TL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    TL_RETURN_IF_ERROR(ParseBodyOf(tag, {"endset"}, &n->body, &end));
    Next();
    out->push_back(std::move(n));
    return ExpectBlockEnd();
  }

  Status ParseParams(Node* n) {
    TL_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      TL_ASSIGN_OR_RETURN(std::string p, ExpectName());
      ExprPtr def;
      if (IsOp("=")) {
        Next();
        TL_ASSIGN_OR_RETURN(def, ParseExpression());
      }
      n->params.emplace_back(p, std::move(def));
      if (!IsOp(",")) break;
      Next();
    }
    return ExpectOp(")");
  }

  Status ParseMacro(const Token& tag, std::vector<NodePtr>* out) {
    auto n = MakeNode(NodeKind::kMacro, tag);
    TL_ASSIGN_OR_RETURN(n->text, ExpectName());
    TL_RETURN_IF_ERROR(ParseParams(n.get()));
    TL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    int saved = loop_depth_;
    loop_depth_ = 0;
    Status s = ParseBodyOf(tag, {"endmacro"}, &n->body, &end);
    loop_depth_ = saved;
    TL_RETURN_IF_ERROR(s);
    Next();
    if (Cur().type == Tok::kName && Cur().text == n->text) Next();
    out->push_back(std::move(n));
    return ExpectBlockEnd();
  }

  Status ParseCallBlock(const Token& tag, std::vector<NodePtr>* out) {
    auto n = MakeNode(NodeKind::kCallBlock, tag);
    if (IsOp("(")) TL_RETURN_IF_ERROR(ParseParams(n.get()));
    TL_ASSIGN_OR_RETURN(n->expr, ParseExpression());
    if (n->expr->kind != ExprKind::kCall) return ErrorAt(n->pos, "'call' needs a macro call");
    TL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    TL_RETURN_IF_ERROR(ParseBodyOf(tag, {"endcall"}, &n->body, &end));
    Next();
    out->push_back(std::move(n));
    return ExpectBlockEnd();
  }

  Status ParseFilterBlock(const Token& tag, std::vector<NodePtr>* out) {
    auto n = MakeNode(NodeKind::kFilterBlock, tag);
    auto hole = std::make_unique<Expr>();
    hole->kind = ExprKind::kLiteral;
    hole->name = "<hole>";
    hole->pos = PosOf(Cur());
    TL_ASSIGN_OR_RETURN(n->expr, ParseFilterChain(std::move(hole), /*first_has_pipe=*/false));
    TL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    TL_RETURN_IF_ERROR(ParseBodyOf(tag, {"endfilter"}, &n->body, &end));
    Next();
    out->push_back(std::move(n));
    return ExpectBlockEnd();
  }

  // ---- Expressions.

  ExprPtr MakeExpr(ExprKind kind, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // `a, b` without parentheses is a tuple (for and set).
  StatusOr<ExprPtr> ParseTupleOrExpr(bool allow_cond) {
    Pos p = PosOf(Cur());
    TL_ASSIGN_OR_RETURN(ExprPtr first, allow_cond ? ParseExpression() : ParseOr());
    if (!IsOp(",")) return first;
    auto t = MakeExpr(ExprKind::kTuple, p);
    t->args.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Cur().type == Tok::kBlockEnd) break;
      TL_ASSIGN_OR_RETURN(ExprPtr e, allow_cond ? ParseExpression() : ParseOr());
      t->args.push_back(std::move(e));
    }
    return t;
  }

  StatusOr<ExprPtr> ParseExpression() {
    if (++nesting_ > kMaxNesting) return ErrorAt(PosOf(Cur()), "expression nested too deeply");
    auto r = ParseCondExpr();
    --nesting_;
    return r;
  }

  StatusOr<ExprPtr> ParseCondExpr() {
    TL_ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
    while (IsName("if")) {
      auto c = MakeExpr(ExprKind::kCond, PosOf(Cur()));
      Next();
      TL_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr other;
      if (IsName("else")) {
        Next();
        TL_ASSIGN_OR_RETURN(other, ParseCondExpr());
      }
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  StatusOr<ExprPtr> ParseOr() {
    TL_ASSIGN_OR_RETURN(ExprPtr e, ParseAnd());
    while (IsName("or")) {
      auto b = MakeExpr(ExprKind::kOr, PosOf(Cur()));
      Next();
      TL_ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
      b->args.push_back(std::move(e));
      b->args.push_back(std::move(r));
      e = std::move(b);
    }
    return e;
  }

  StatusOr<ExprPtr> ParseAnd() {
    TL_ASSIGN_OR_RETURN(ExprPtr e, ParseNot());
    while (IsName("and")) {
      auto b = MakeExpr(ExprKind::kAnd, PosOf(Cur()));
      Next();
      TL_ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
      b->args.push_back(std::move(e));
      b->args.push_back(std::move(r));
      e = std::move(b);
    }
    return e;
  }

  StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      if (++nesting_ > kMaxNesting) return ErrorAt(PosOf(Cur()), "expression nested too deeply");
      auto n = MakeExpr(ExprKind::kNot, PosOf(Cur()));
      Next();
      TL_ASSIGN_OR_RETURN(ExprPtr e, ParseNot());
      --nesting_;
      n->args.push_back(std::move(e));
      return n;
    }
    return ParseCompare();
  }

  StatusOr<ExprPtr> ParseCompare() {
    Pos p = PosOf(Cur());
    TL_ASSIGN_OR_RETURN(ExprPtr e, ParseMath1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == Tok::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == ">" ||
           Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = MakeExpr(ExprKind::kCompare, p);
        cmp->args.push_back(std::move(e));
      }
      TL_ASSIGN_OR_RETURN(ExprPtr r, ParseMath1());
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(r));
    }
    return cmp ? std::move(cmp) : std::move(e);
  }

  // Left-associative binary levels.
  template <typename Sub>
  StatusOr<ExprPtr> ParseBinary(std::initializer_list<const char*> ops, Sub sub) {
    TL_ASSIGN_OR_RETURN(ExprPtr e, (this->*sub)());
    while (true) {
      const char* found = nullptr;
      for (const char* op : ops) {
        if (IsOp(op)) found = op;
      }
      if (!found) return e;
      auto b = MakeExpr(ExprKind::kBinary, PosOf(Cur()));
      b->name = found;
      Next();
      TL_ASSIGN_OR_RETURN(ExprPtr r, (this->*sub)());
      b->args.push_back(std::move(e));
      b->args.push_back(std::move(r));
      e = std::move(b);
    }
  }
  StatusOr<ExprPtr> ParseMath1() { return ParseBinary({"+", "-"}, &Parser::ParseConcat); }
  StatusOr<ExprPtr> ParseConcat() { return ParseBinary({"~"}, &Parser::ParseMath2); }
  StatusOr<ExprPtr> ParseMath2() { return ParseBinary({"*", "/", "//", "%"}, &Parser::ParsePow); }
  StatusOr<ExprPtr> ParsePow() { return ParseBinary({"**"}, &Parser::ParseUnaryWithFilter); }
  StatusOr<ExprPtr> ParseUnaryWithFilter() { return ParseUnary(true); }

  StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    if (++nesting_ > kMaxNesting) return ErrorAt(PosOf(Cur()), "expression nested too deeply");
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = MakeExpr(IsOp("-") ? ExprKind::kNeg : ExprKind::kPos, PosOf(Cur()));
      Next();
      TL_ASSIGN_OR_RETURN(ExprPtr inner, ParseUnary(false));
      e->args.push_back(std::move(inner));
    } else {
      TL_ASSIGN_OR_RETURN(e, ParsePrimary());
    }
    TL_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
    if (with_filter) {
      TL_ASSIGN_OR_RETURN(e, ParseFilters(std::move(e)));
    }
    --nesting_;
    return e;
  }

  StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    Pos p = PosOf(t);
    if (t.type == Tok::kName) {
      auto e = MakeExpr(ExprKind::kLiteral, p);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::None();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      Next();
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s;
      while (Cur().type == Tok::kString) {  // adjacent literals concatenate
        s += Cur().text;
        Next();
      }
      auto e = MakeExpr(ExprKind::kLiteral, p);
      e->literal = Value::String(std::move(s));
      return e;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto e = MakeExpr(ExprKind::kLiteral, p);
      e->literal = t.type == Tok::kInt ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return MakeExpr(ExprKind::kTuple, p);
      }
      TL_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression());
      if (IsOp(",")) {
        auto tuple = MakeExpr(ExprKind::kTuple, p);
        tuple->args.push_back(std::move(e));
        while (IsOp(",")) {
          Next();
          if (IsOp(")")) break;
          TL_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
          tuple->args.push_back(std::move(item));
        }
        e = std::move(tuple);
      }
      TL_RETURN_IF_ERROR(ExpectOp(")"));
      return e;
    }
    if (IsOp("[")) {
      Next();
      auto list = MakeExpr(ExprKind::kList, p);
      while (!IsOp("]")) {
        TL_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
        list->args.push_back(std::move(item));
        if (!IsOp(",")) break;
        Next();
      }
      TL_RETURN_IF_ERROR(ExpectOp("]"));
      return list;
    }
    if (IsOp("{")) {
      Next();
      auto dict = MakeExpr(ExprKind::kDict, p);
      while (!IsOp("}")) {
        TL_ASSIGN_OR_RETURN(ExprPtr k, ParseExpression());
        TL_RETURN_IF_ERROR(ExpectOp(":"));
        TL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
        dict->args.push_back(std::move(k));
        dict->args.push_back(std::move(v));
        if (!IsOp(",")) break;
        Next();
      }
      TL_RETURN_IF_ERROR(ExpectOp("}"));
      return dict;
    }
    return Unexpected("an expression");
  }

  StatusOr<ExprPtr> ParsePostfix(ExprPtr e) {
    while (true) {
      Pos p = PosOf(Cur());
      if (IsOp(".")) {
        Next();
        if (Cur().type == Tok::kInt) {  // x.0 is x[0]
          auto item = MakeExpr(ExprKind::kItem, p);
          auto idx = MakeExpr(ExprKind::kLiteral, p);
          idx->literal = Value::Int(Cur().int_value);
          Next();
          item->args.push_back(std::move(e));
          item->args.push_back(std::move(idx));
          e = std::move(item);
          continue;
        }
        auto a = MakeExpr(ExprKind::kAttr, p);
        TL_ASSIGN_OR_RETURN(a->name, ExpectName());
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (IsOp("[")) {
        Next();
        TL_ASSIGN_OR_RETURN(e, ParseSubscript(std::move(e), p));
      } else if (IsOp("(")) {
        TL_ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  StatusOr<ExprPtr> ParseSubscript(ExprPtr obj, Pos p) {
    ExprPtr parts[3];
    int n = 0;  // slice parts seen (colons + 1)
    bool slice = false;
    while (true) {
      if (IsOp(":")) {
        slice = true;
        if (++n > 2) return Unexpected("']'");
        Next();
        continue;
      }
      if (IsOp("]")) break;
      if (parts[n]) return Unexpected("':' or ']'");
      TL_ASSIGN_OR_RETURN(parts[n], ParseExpression());
    }
    Next();
    if (!slice) {
      if (!parts[0]) return ErrorAt(p, "empty subscript");
      auto item = MakeExpr(ExprKind::kItem, p);
      item->args.push_back(std::move(obj));
      item->args.push_back(std::move(parts[0]));
      return item;
    }
    auto s = MakeExpr(ExprKind::kSlice, p);
    s->args.push_back(std::move(obj));
    for (auto& part : parts) s->args.push_back(std::move(part));
    return s;
  }

  // `(` args `)` after a callee, filter or test: positional, then name=value.
  Status ParseArgs(Expr* e) {
    TL_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        TL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
        e->kwargs.emplace_back(key, std::move(v));
      } else {
        if (!e->kwargs.empty()) return ErrorAt(PosOf(Cur()), "positional argument after keyword");
        TL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
        e->args.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return ExpectOp(")");
  }

  StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    auto c = MakeExpr(ExprKind::kCall, PosOf(Cur()));
    c->args.push_back(std::move(callee));
    TL_RETURN_IF_ERROR(ParseArgs(c.get()));
    return c;
  }

  StatusOr<ExprPtr> ParseFilters(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        TL_ASSIGN_OR_RETURN(e, ParseFilterChain(std::move(e), true));
      } else if (IsName("is")) {
        TL_ASSIGN_OR_RETURN(e, ParseTest(std::move(e)));
      } else if (IsOp("(")) {
        TL_ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  // One filter (after '|' when first_has_pipe), then any further '|' filters.
  StatusOr<ExprPtr> ParseFilterChain(ExprPtr e, bool first_has_pipe) {
    bool first = true;
    while (first || IsOp("|")) {
      if (!first || first_has_pipe) Next();
      first = false;
      Pos p = PosOf(Cur());
      TL_ASSIGN_OR_RETURN(std::string name, ExpectName());
      while (IsOp(".")) {  // dotted filter names
        Next();
        TL_ASSIGN_OR_RETURN(std::string more, ExpectName());
        name += "." + more;
      }
      if (!IsKnownFilter(name)) return ErrorAt(p, "unknown filter '" + name + "'");
      auto f = MakeExpr(ExprKind::kFilter, p);
      f->name = name;
      f->args.push_back(std::move(e));
      if (IsOp("(")) TL_RETURN_IF_ERROR(ParseArgs(f.get()));
      e = std::move(f);
    }
    return e;
  }

  StatusOr<ExprPtr> ParseTest(ExprPtr e) {
    Next();  // is
    auto t = MakeExpr(ExprKind::kTest, PosOf(Cur()));
    if (IsName("not")) {
      t->negated = true;
      Next();
    }
    Pos p = PosOf(Cur());
    std::string name;
    // `is none`, `is true` and `is false` arrive as names too.
    TL_ASSIGN_OR_RETURN(name, ExpectName());
    if (!IsKnownTest(name)) return ErrorAt(p, "unknown test '" + name + "'");
    t->name = name;
    t->args.push_back(std::move(e));
    if (IsOp("(")) {
      TL_RETURN_IF_ERROR(ParseArgs(t.get()));
    } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString || Cur().type == Tok::kInt ||
                Cur().type == Tok::kFloat || IsOp("[") || IsOp("{")) &&
               !(Cur().type == Tok::kName &&
                 (Cur().text == "else" || Cur().text == "or" || Cur().text == "and" ||
                  Cur().text == "if" || Cur().text == "is" || Cur().text == "in" ||
                  Cur().text == "not"))) {
      TL_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      TL_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      t->args.push_back(std::move(arg));
    }
    return t;
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

StatusOr<std::shared_ptr<const Program>> ParseTokens(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).Run();
}

}  // namespace tlaloc::jinja
