// The StableHLO text parser's internals: a lexer over the source text and the Parser that
// implements OpParser for the ops' pretty-syntax hooks. Split over lexer.cc (tokens, types,
// attributes, dense literals) and parser.cc (modules, functions, operations, regions).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/ir/op_registry.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc::shlo {

enum class Tok : uint8_t {
  kEof,
  kIdent,    // bare identifier, may contain '.' and '$' (stablehlo.add, LT, e11m52)
  kPercent,  // %name or %name#3 (text without the sigil, result number in `number`)
  kAt,       // @name or @"name" (text is the name)
  kCaret,    // ^bb0
  kHash,     // #stablehlo, #loc3
  kBang,     // !stablehlo.token
  kInt,      // 12, -3, 0x7FC00000
  kFloat,    // 1.5, -2.0e+03
  kString,   // "text" (text holds the unescaped value)
  kPunct,    // ( ) [ ] { } < > , : = -> ? * + |
  kError,    // a malformed token (text says why)
};

struct Token {
  Tok kind = Tok::kEof;
  std::string_view raw;  // the source text of the token
  std::string text;      // decoded text (name, string value, punctuation)
  size_t pos = 0;
  int64_t number = -1;  // %name#number
};

class Parser : public OpParser {
 public:
  Parser(std::string_view text, std::string_view source, const ParseOptions& options);

  StatusOr<std::unique_ptr<Module>> ParseTopLevel();

  // ---- OpParser ----
  Status ParseKeyword(std::string_view keyword) override;
  bool ParseOptionalKeyword(std::string_view keyword) override;
  StatusOr<std::string> ParseIdentifier() override;
  Status ParsePunct(std::string_view punct) override;
  bool ParseOptionalPunct(std::string_view punct) override;
  StatusOr<Value> ParseOperand() override;
  StatusOr<std::vector<Value>> ParseOperandList() override;
  StatusOr<Type> ParseType() override;
  Status ParseFunctionalType(std::vector<Type>& inputs, std::vector<Type>& outputs) override;
  StatusOr<Attribute> ParseAttribute() override;
  StatusOr<int64_t> ParseInteger() override;
  StatusOr<std::vector<int64_t>> ParseIntList() override;
  Status ParseOptionalAttrDict(AttrDict& attrs) override;
  StatusOr<std::unique_ptr<Region>> ParseRegion(
      const std::vector<std::pair<std::string, Type>>* implicit_args = nullptr) override;
  bool Peek(std::string_view token) const override;
  Status Error(std::string_view message) const override;

  // ---- lexer.cc ----
  const Token& Cur() const { return cur_; }
  void Advance();
  bool AtEof() const { return cur_.kind == Tok::kEof; }
  Status ErrorAt(size_t pos, std::string_view message) const;
  // "expected X, found Y" at the current token.
  Status Expected(std::string_view what) const;
  std::string Describe(const Token& t) const;
  StatusOr<Attribute> ParseDense();
  StatusOr<AttrDict> ParseDictBody();  // after '{', through '}'
  Status SkipLoc();                    // loc(...) when present
  Status SkipBalanced(char open, char close, std::string* out);
  StatusOr<TensorType> ParseTensorTypeBody();  // after "tensor", from '<'

  // ---- parser.cc ----
  Status ParseAliasDefinition();
  Status ParseFunction(Module& module);
  Status ParseMesh(Module& module);  // sdy.mesh @name = <...>
  Status ParseOperation(Block& block);
  Status ParseBlockBody(Block& block, std::string_view end);
  StatusOr<const OpDef*> ResolveOp(const std::string& name, size_t pos) const;

 private:
  friend class DepthGuard;
  Token Lex(size_t& pos) const;
  void SkipSpace(size_t& pos) const;

  std::string_view text_;
  std::string source_;
  ParseOptions options_;
  const OpRegistry* registry_;
  size_t next_ = 0;  // offset after cur_
  Token cur_;
  int depth_ = 0;
  bool at_function_level_ = false;
  std::map<std::string, Attribute> attr_aliases_;
  // Value scopes: innermost last. A name maps to the values it defines (one per result).
  std::vector<std::map<std::string, std::vector<Value>>> scopes_;

 public:
  // Increments the nesting depth for the lifetime of the guard.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p) : p_(p) { ++p_.depth_; }
    ~DepthGuard() { --p_.depth_; }
    bool too_deep() const { return p_.depth_ > p_.options_.max_nesting_depth; }

   private:
    Parser& p_;
  };
};

}  // namespace tlaloc::shlo
