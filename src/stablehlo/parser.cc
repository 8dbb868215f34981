// Modules, functions, operations and regions of the StableHLO text parser.
#include "tlaloc/stablehlo/parser.h"

#include <optional>

#include "parser_internal.h"
#include "tlaloc/ir/builder.h"

namespace tlaloc::shlo {

namespace {
constexpr int64_t kMaxResultsPerName = 1 << 16;

std::string StripSigil(const std::string& s) { return !s.empty() && s[0] == '%' ? s.substr(1) : s; }
}  // namespace

StatusOr<Value> Parser::ParseOperand() {
  if (cur_.kind != Tok::kPercent) return Expected("an operand (%name)");
  const Token t = cur_;
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(t.text);
    if (found == it->end()) continue;
    const std::vector<Value>& vals = found->second;
    int64_t idx = t.number < 0 ? 0 : t.number;
    if (t.number < 0 && vals.size() != 1)
      return Error("%" + t.text + " names " + std::to_string(vals.size()) + " results; use %" +
                   t.text + "#N");
    if (idx >= static_cast<int64_t>(vals.size()))
      return Error("%" + t.text + " has only " + std::to_string(vals.size()) + " result(s)");
    Advance();
    return vals[idx];
  }
  return Error("use of undefined value %" + t.text);
}

StatusOr<std::vector<Value>> Parser::ParseOperandList() {
  std::vector<Value> out;
  if (cur_.kind != Tok::kPercent) return out;
  while (true) {
    TL_ASSIGN_OR_RETURN(Value v, ParseOperand());
    out.push_back(v);
    if (!Peek(",")) break;
    size_t p = next_;
    Token after = Lex(p);
    if (after.kind != Tok::kPercent) break;
    Advance();
  }
  return out;
}

StatusOr<std::unique_ptr<Region>> Parser::ParseRegion(
    const std::vector<std::pair<std::string, Type>>* implicit_args) {
  DepthGuard guard(*this);
  if (guard.too_deep()) return Error("regions nested too deeply");
  TL_RETURN_IF_ERROR(ParsePunct("{"));
  auto region = std::make_unique<Region>();
  Block& block = region->AddBlock();
  scopes_.emplace_back();
  bool saved_level = at_function_level_;
  at_function_level_ = false;
  auto done = [&](Status s) {
    scopes_.pop_back();
    at_function_level_ = saved_level;
    return s;
  };
  if (implicit_args) {
    for (const auto& [name, type] : *implicit_args)
      scopes_.back()[StripSigil(name)] = {block.AddArgument(type)};
  }
  if (cur_.kind == Tok::kCaret) {
    Advance();
    if (ParseOptionalPunct("(")) {
      if (implicit_args && !implicit_args->empty())
        return done(Error("block arguments given twice (before the region and in its label)"));
      if (!Peek(")")) {
        do {
          if (cur_.kind != Tok::kPercent || cur_.number >= 0)
            return done(Expected("a block argument name"));
          std::string name = cur_.text;
          Advance();
          Status s = ParsePunct(":");
          if (!s.ok()) return done(s);
          auto type = ParseType();
          if (!type.ok()) return done(type.status());
          scopes_.back()[name] = {block.AddArgument(*type)};
          s = SkipLoc();
          if (!s.ok()) return done(s);
        } while (ParseOptionalPunct(","));
      }
      Status s = ParsePunct(")");
      if (!s.ok()) return done(s);
    }
    Status s = ParsePunct(":");
    if (!s.ok()) return done(s);
  }
  Status s = ParseBlockBody(block, "}");
  if (!s.ok()) return done(s);
  s = ParsePunct("}");
  if (!s.ok()) return done(s);
  (void)done(OkStatus());
  return region;
}

Status Parser::ParseBlockBody(Block& block, std::string_view end) {
  while (!Peek(end)) {
    if (AtEof()) return Expected("'" + std::string(end) + "'");
    if (cur_.kind == Tok::kCaret)
      return Status(StatusCode::kUnimplemented,
                    Error("regions with several blocks are not supported").message());
    TL_RETURN_IF_ERROR(ParseOperation(block));
  }
  return OkStatus();
}

StatusOr<const OpDef*> Parser::ResolveOp(const std::string& name, size_t pos) const {
  if (const OpDef* d = registry_->Find(name)) return d;
  if (name.find('.') == std::string::npos) {
    std::vector<std::string> tries;
    if (at_function_level_) tries.push_back("func." + name);
    tries.push_back("stablehlo." + name);
    tries.push_back("chlo." + name);
    tries.push_back("func." + name);
    for (const auto& n : tries)
      if (const OpDef* d = registry_->Find(n)) return d;
  }
  return Status(StatusCode::kUnimplemented,
                ErrorAt(pos, "unknown operation '" + name + "'").message());
}

Status Parser::ParseOperation(Block& block) {
  std::vector<std::pair<std::string, int64_t>> names;
  const size_t start = cur_.pos;
  if (cur_.kind == Tok::kPercent) {
    while (true) {
      if (cur_.kind != Tok::kPercent || cur_.number >= 0) return Expected("a result name");
      std::string name = cur_.text;
      Advance();
      int64_t count = 1;
      if (ParseOptionalPunct(":")) {
        TL_ASSIGN_OR_RETURN(count, ParseInteger());
        if (count < 1 || count > kMaxResultsPerName) return Error("invalid result count");
      }
      names.emplace_back(std::move(name), count);
      if (!ParseOptionalPunct(",")) break;
    }
    TL_RETURN_IF_ERROR(ParsePunct("="));
  }
  const size_t op_pos = cur_.pos;
  std::vector<Value> operands;
  AttrDict attrs;
  std::vector<std::unique_ptr<Region>> regions;
  std::optional<std::vector<Type>> declared;
  const OpDef* def = nullptr;
  if (cur_.kind == Tok::kString) {
    TL_ASSIGN_OR_RETURN(def, ResolveOp(cur_.text, op_pos));
    Advance();
    TL_RETURN_IF_ERROR(ParsePunct("("));
    TL_ASSIGN_OR_RETURN(operands, ParseOperandList());
    TL_RETURN_IF_ERROR(ParsePunct(")"));
    if (ParseOptionalPunct("<")) {
      TL_RETURN_IF_ERROR(ParsePunct("{"));
      TL_ASSIGN_OR_RETURN(AttrDict props, ParseDictBody());
      for (auto& [k, v] : props) attrs[k] = std::move(v);
      TL_RETURN_IF_ERROR(ParsePunct(">"));
    }
    // MLIR writes the regions before the attribute dictionary; older text has it first.
    if (ParseOptionalPunct("{")) {
      TL_ASSIGN_OR_RETURN(AttrDict d, ParseDictBody());
      for (auto& [k, v] : d) attrs[k] = std::move(v);
    }
    if (ParseOptionalPunct("(")) {
      do {
        TL_ASSIGN_OR_RETURN(auto r, ParseRegion());
        regions.push_back(std::move(r));
      } while (ParseOptionalPunct(","));
      TL_RETURN_IF_ERROR(ParsePunct(")"));
      if (ParseOptionalPunct("{")) {
        TL_ASSIGN_OR_RETURN(AttrDict d, ParseDictBody());
        for (auto& [k, v] : d) attrs[k] = std::move(v);
      }
    }
    TL_RETURN_IF_ERROR(ParsePunct(":"));
    const size_t type_pos = cur_.pos;
    std::vector<Type> inputs, outputs;
    TL_RETURN_IF_ERROR(ParseFunctionalType(inputs, outputs));
    if (inputs.size() != operands.size())
      return ErrorAt(type_pos, "expected " + std::to_string(operands.size()) +
                                   " operand type(s), found " + std::to_string(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!(inputs[i] == operands[i].type()))
        return ErrorAt(type_pos, "operand " + std::to_string(i) + " has type " +
                                     operands[i].type().ToString() + ", the op says " +
                                     inputs[i].ToString());
    declared = std::move(outputs);
  } else if (cur_.kind == Tok::kIdent) {
    TL_ASSIGN_OR_RETURN(def, ResolveOp(cur_.text, op_pos));
    if (!def->parse)
      return ErrorAt(op_pos, "'" + def->name + "' has no pretty syntax; use the generic form");
    Advance();
    ParsedOp parsed;
    Status s = def->parse(*this, parsed);
    if (!s.ok()) {
      if (s.message().rfind(source_ + ":", 0) == 0) return s;
      return Status(s.code(), Error(def->name + ": " + s.message()).message());
    }
    operands = std::move(parsed.operands);
    attrs = std::move(parsed.attrs);
    regions = std::move(parsed.regions);
    if (!parsed.result_types.empty() || names.empty()) declared = std::move(parsed.result_types);
  } else {
    return Expected("an operation");
  }
  TL_RETURN_IF_ERROR(SkipLoc());
  auto op =
      CreateOperation(*def, std::move(operands), std::move(attrs), declared, std::move(regions));
  if (!op.ok()) return Status(op.status().code(), ErrorAt(op_pos, op.status().message()).message());
  int64_t total = 0;
  for (const auto& n : names) total += n.second;
  if (!names.empty() && total != (*op)->num_results())
    return ErrorAt(start, "the op defines " + std::to_string((*op)->num_results()) +
                              " result(s), the names give " + std::to_string(total));
  int idx = 0;
  for (const auto& [name, count] : names) {
    auto& slot = scopes_.back()[name];
    if (!slot.empty()) return ErrorAt(start, "redefinition of %" + name);
    for (int64_t i = 0; i < count; ++i) slot.push_back((*op)->result(idx++));
  }
  block.Append(std::move(*op));
  return OkStatus();
}

Status Parser::ParseAliasDefinition() {
  std::string name = cur_.text;
  Advance();
  TL_RETURN_IF_ERROR(ParsePunct("="));
  if (cur_.kind == Tok::kIdent && cur_.text == "loc") return SkipLoc();
  TL_ASSIGN_OR_RETURN(Attribute a, ParseAttribute());
  attr_aliases_[name] = std::move(a);
  return OkStatus();
}

Status Parser::ParseFunction(Module& module) {
  TL_RETURN_IF_ERROR(ParseKeyword("func.func"));
  bool is_public = true;
  if (ParseOptionalKeyword("private"))
    is_public = false;
  else if (!ParseOptionalKeyword("public"))
    ParseOptionalKeyword("nested");
  if (cur_.kind != Tok::kAt) return Expected("a function name (@name)");
  std::string name = cur_.text;
  const size_t name_pos = cur_.pos;
  Advance();
  if (module.Find(name)) return ErrorAt(name_pos, "redefinition of function @" + name);
  TL_RETURN_IF_ERROR(ParsePunct("("));
  std::vector<std::string> arg_names;
  std::vector<Type> arg_types, result_types;
  std::vector<AttrDict> arg_attrs, result_attrs;
  if (!Peek(")")) {
    do {
      if (cur_.kind != Tok::kPercent || cur_.number >= 0) return Expected("an argument (%name)");
      arg_names.push_back(cur_.text);
      Advance();
      TL_RETURN_IF_ERROR(ParsePunct(":"));
      TL_ASSIGN_OR_RETURN(Type t, ParseType());
      arg_types.push_back(std::move(t));
      arg_attrs.emplace_back();
      TL_RETURN_IF_ERROR(ParseOptionalAttrDict(arg_attrs.back()));
      TL_RETURN_IF_ERROR(SkipLoc());
    } while (ParseOptionalPunct(","));
  }
  TL_RETURN_IF_ERROR(ParsePunct(")"));
  if (ParseOptionalPunct("->")) {
    if (ParseOptionalPunct("(")) {
      if (!Peek(")")) {
        do {
          TL_ASSIGN_OR_RETURN(Type t, ParseType());
          result_types.push_back(std::move(t));
          result_attrs.emplace_back();
          TL_RETURN_IF_ERROR(ParseOptionalAttrDict(result_attrs.back()));
        } while (ParseOptionalPunct(","));
      }
      TL_RETURN_IF_ERROR(ParsePunct(")"));
    } else {
      TL_ASSIGN_OR_RETURN(Type t, ParseType());
      result_types.push_back(std::move(t));
      result_attrs.emplace_back();
    }
  }
  Function* fn = module.AddFunction(name, arg_types, result_types);
  fn->set_public(is_public);
  for (size_t i = 0; i < arg_attrs.size(); ++i) fn->arg_attrs(i) = std::move(arg_attrs[i]);
  for (size_t i = 0; i < result_attrs.size(); ++i) fn->result_attrs(i) = std::move(result_attrs[i]);
  if (ParseOptionalKeyword("attributes")) {
    TL_RETURN_IF_ERROR(ParsePunct("{"));
    TL_ASSIGN_OR_RETURN(fn->attrs(), ParseDictBody());
  }
  if (!Peek("{"))
    return Status(StatusCode::kUnimplemented,
                  Expected("a function body '{' (declarations are not supported)").message());
  Advance();
  scopes_.clear();
  scopes_.emplace_back();
  for (size_t i = 0; i < arg_names.size(); ++i) {
    auto& slot = scopes_.back()[arg_names[i]];
    if (!slot.empty()) return ErrorAt(name_pos, "argument %" + arg_names[i] + " is named twice");
    slot.push_back(fn->entry().argument(static_cast<int>(i)));
  }
  at_function_level_ = true;
  TL_RETURN_IF_ERROR(ParseBlockBody(fn->entry(), "}"));
  at_function_level_ = false;
  scopes_.clear();
  TL_RETURN_IF_ERROR(ParsePunct("}"));
  return SkipLoc();
}

// `sdy.mesh @name = <["a"=2, ...]>`, kept verbatim in the module's "sdy.meshes" attribute
// (ir/sharding.h reads it).
Status Parser::ParseMesh(Module& module) {
  Advance();  // sdy.mesh
  if (cur_.kind != Tok::kAt) return Expected("a mesh name (@name)");
  std::string name = cur_.text;
  Advance();
  TL_RETURN_IF_ERROR(ParsePunct("="));
  if (!Peek("<")) return Expected("'<' opening the mesh");
  std::string body;
  TL_RETURN_IF_ERROR(SkipBalanced('<', '>', &body));
  AttrDict meshes;
  auto it = module.attrs().find("sdy.meshes");
  if (it != module.attrs().end() && it->second.kind() == Attribute::Kind::kDict)
    meshes = it->second.as_dict();
  if (meshes.count(name)) return Error("redefinition of mesh @" + name);
  meshes[name] = Attribute::Opaque(std::move(body));
  module.attrs()["sdy.meshes"] = Attribute::Dict(std::move(meshes));
  return SkipLoc();
}

StatusOr<std::unique_ptr<Module>> Parser::ParseTopLevel() {
  auto module = std::make_unique<Module>("");
  bool seen_module = false, seen_func = false;
  while (!AtEof()) {
    if (cur_.kind == Tok::kError) return Expected("a module or a function");
    if (cur_.kind == Tok::kHash) {
      TL_RETURN_IF_ERROR(ParseAliasDefinition());
      continue;
    }
    if (Peek("{") && next_ < text_.size() && text_[next_] == '-') {
      // A trailing "{-# dialect_resources ... #-}" block: not needed.
      size_t end = text_.find("#-}", next_);
      if (end == std::string_view::npos) return Error("unterminated '{-#' block");
      next_ = end + 3;
      Advance();
      continue;
    }
    if (cur_.kind == Tok::kIdent && cur_.text == "module") {
      if (seen_module || seen_func) return Error("only one module per input is supported");
      seen_module = true;
      Advance();
      if (cur_.kind == Tok::kAt) {
        module->set_name(cur_.text);
        Advance();
      }
      if (ParseOptionalKeyword("attributes")) {
        TL_RETURN_IF_ERROR(ParsePunct("{"));
        TL_ASSIGN_OR_RETURN(module->attrs(), ParseDictBody());
      }
      TL_RETURN_IF_ERROR(ParsePunct("{"));
      while (!Peek("}")) {
        if (AtEof()) return Expected("'}' closing the module");
        if (cur_.kind == Tok::kIdent && cur_.text == "sdy.mesh") {
          TL_RETURN_IF_ERROR(ParseMesh(*module));
          continue;
        }
        TL_RETURN_IF_ERROR(ParseFunction(*module));
      }
      Advance();
      TL_RETURN_IF_ERROR(SkipLoc());
      continue;
    }
    if (cur_.kind == Tok::kIdent && cur_.text == "func.func") {
      if (seen_module) return Error("functions after the module are not supported");
      seen_func = true;
      TL_RETURN_IF_ERROR(ParseFunction(*module));
      continue;
    }
    return Expected("'module' or 'func.func'");
  }
  if (!seen_module && !seen_func) return Error("expected a module or a function, found nothing");
  return module;
}

}  // namespace tlaloc::shlo

namespace tlaloc {

StatusOr<std::unique_ptr<Module>> ParseModule(std::string_view text, std::string_view source_name,
                                              const ParseOptions& options) {
  shlo::Parser parser(text, source_name, options);
  TL_ASSIGN_OR_RETURN(auto module, parser.ParseTopLevel());
  if (options.verify) {
    Status s = Verify(*module);
    if (!s.ok()) return Status(s.code(), std::string(source_name) + ": " + s.message());
  }
  return module;
}

StatusOr<Attribute> ParseAttributeText(std::string_view text) {
  shlo::Parser parser(text, "<attribute>", ParseOptions{});
  TL_ASSIGN_OR_RETURN(Attribute a, parser.ParseAttribute());
  if (!parser.AtEof()) return parser.Expected("end of input");
  return a;
}

StatusOr<Type> ParseTypeText(std::string_view text) {
  shlo::Parser parser(text, "<type>", ParseOptions{});
  TL_ASSIGN_OR_RETURN(Type t, parser.ParseType());
  if (!parser.AtEof()) return parser.Expected("end of input");
  return t;
}

}  // namespace tlaloc
