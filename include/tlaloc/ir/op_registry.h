// The op registry: one OpDef per operation, holding everything about the op (shape rule,
// verifier, pretty syntax, evaluation, gradient). Op definitions live in src/ops/, one file per
// op area; adding an op touches that file and its test.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc {

class OpBuilder;

// ---- Shape rule -----------------------------------------------------------------------------
// What the shape rule of an op sees. `declared_results` holds the result types written in the
// program text (or passed by the builder); ops whose result cannot be derived from operands and
// attributes alone (reshape, convert, iota, ...) read them, and every op's rule is checked
// against them when present.
struct InferInput {
  std::vector<Type> operand_types;
  const AttrDict& attrs;
  const std::vector<std::unique_ptr<Region>>& regions;
  const std::vector<Type>* declared_results = nullptr;
};
using InferFn = std::function<StatusOr<std::vector<Type>>(const InferInput&)>;

// ---- Evaluation ------------------------------------------------------------------------------
// Services the interpreter offers to an op's evaluation function.
class EvalContext {
 public:
  virtual ~EvalContext() = default;
  // Runs a region of the current op (reduce body, while cond/body, comparator) on arguments.
  virtual StatusOr<std::vector<Literal>> RunRegion(const Region& region,
                                                   std::vector<Literal> args) = 0;
  // Runs a function of the module by name.
  virtual StatusOr<std::vector<Literal>> CallFunction(const std::string& name,
                                                      std::vector<Literal> args) = 0;
  // Splits [0, n) into chunks of at least `grain` and runs them, possibly on several threads.
  virtual void ParallelFor(int64_t n, int64_t grain,
                           const std::function<void(int64_t, int64_t)>& body) = 0;
  // True when operand i is dead after this op and its storage may be reused for a result.
  virtual bool CanReuseOperand(int i) const = 0;
  // Handler for a custom_call target registered with the interpreter, or null.
  virtual const std::function<Status(std::span<const Literal>, std::vector<Literal>&)>*
  FindCustomCall(const std::string& target) const = 0;
};

// Computes an op's results. `results` arrives holding zeroed buffers of the result types
// (uninitialised ones when the op has OpTraits::writes_all_results, storage-less placeholders
// with OpTraits::replaces_results, a dying operand's buffer per OpTraits::in_place); the function
// fills them, or replaces an entry (for example with a view of an operand).
using EvalFn = std::function<Status(const Operation& op, std::span<const Literal> operands,
                                    std::vector<Literal>& results, EvalContext& ctx)>;

// ---- Gradient --------------------------------------------------------------------------------
// Given the op, its operands' values in the gradient program and the cotangents of its results,
// builds the operands' cotangents with `b` (an invalid Value means zero / not differentiable).
using VjpFn = std::function<StatusOr<std::vector<Value>>(
    OpBuilder& b, const Operation& op, const std::vector<Value>& operands,
    const std::vector<Value>& results, const std::vector<Value>& result_cotangents)>;

// ---- Syntax ----------------------------------------------------------------------------------
// Printing interface handed to an op's pretty printer (implemented in stablehlo/).
class OpPrinter {
 public:
  virtual ~OpPrinter() = default;
  virtual void Print(std::string_view text) = 0;
  virtual void PrintOperand(Value v) = 0;
  // "%a, %b"
  virtual void PrintOperands(std::span<const Value> values) = 0;
  virtual void PrintType(const Type& type) = 0;
  virtual void PrintAttribute(const Attribute& attr) = 0;
  // "(t1, t2) -> t3" (or "(t1) -> (t2, t3)"), from the op's operands and results.
  virtual void PrintFunctionalType(const Operation& op) = 0;
  // Prints " {name = attr, ...}" for the attributes not in `elided` (nothing when none remain).
  virtual void PrintOptionalAttrDict(const AttrDict& attrs,
                                     const std::vector<std::string>& elided) = 0;
  // "{\n ^bb0(%arg: type, ...):\n ops \n}"; entry arguments printed when `print_arguments`.
  virtual void PrintRegion(const Region& region, bool print_arguments = true) = 0;
  // "[1, 2, 3]"
  virtual void PrintIntList(const std::vector<int64_t>& values) = 0;
};

// What an op's pretty parser produces; the generic parser then creates the op from it.
struct ParsedOp {
  std::vector<Value> operands;
  std::vector<Type> result_types;
  AttrDict attrs;
  std::vector<std::unique_ptr<Region>> regions;
};

// Parsing interface handed to an op's pretty parser (implemented in stablehlo/). Every method
// returns an error Status naming line, column and what was expected; Optional variants return
// whether the token was present.
class OpParser {
 public:
  virtual ~OpParser() = default;
  virtual Status ParseKeyword(std::string_view keyword) = 0;
  virtual bool ParseOptionalKeyword(std::string_view keyword) = 0;
  // Any bare identifier (e.g. LT, FLOAT, a dimension name); error if none.
  virtual StatusOr<std::string> ParseIdentifier() = 0;
  // Punctuation such as "," ":" "(" ")" "[" "]" "=" "->" "x" "<" ">" "{" "}".
  virtual Status ParsePunct(std::string_view punct) = 0;
  virtual bool ParseOptionalPunct(std::string_view punct) = 0;
  virtual StatusOr<Value> ParseOperand() = 0;
  // Comma-separated operands, possibly none (stops before a token that is not %name).
  virtual StatusOr<std::vector<Value>> ParseOperandList() = 0;
  virtual StatusOr<Type> ParseType() = 0;
  // "(t, t) -> t" or "(t) -> (t, t)"; also accepts a bare "t -> t".
  virtual Status ParseFunctionalType(std::vector<Type>& inputs, std::vector<Type>& outputs) = 0;
  virtual StatusOr<Attribute> ParseAttribute() = 0;
  virtual StatusOr<int64_t> ParseInteger() = 0;
  // "[1, 2, 3]" (also "[]").
  virtual StatusOr<std::vector<int64_t>> ParseIntList() = 0;
  // "{name = attr, ...}" when present, merged into attrs.
  virtual Status ParseOptionalAttrDict(AttrDict& attrs) = 0;
  // A region "{ ^bb0(...): ... }" (or an entry block without a label, whose arguments are
  // `implicit_args`, for pretty forms that declare them outside the braces).
  virtual StatusOr<std::unique_ptr<Region>> ParseRegion(
      const std::vector<std::pair<std::string, Type>>* implicit_args = nullptr) = 0;
  // True when the next token is the given punctuation or keyword (not consumed).
  virtual bool Peek(std::string_view token) const = 0;
  virtual Status Error(std::string_view message) const = 0;
};

using PrintFn = std::function<void(const Operation& op, OpPrinter& p)>;
using ParseFn = std::function<Status(OpParser& p, ParsedOp& op)>;

// Traits that passes and the interpreter read.
struct OpTraits {
  bool elementwise = false;     // result element i depends only on operand element i
  bool terminator = false;      // ends a block (return)
  bool side_effecting = false;  // never removed or reordered (custom_call with side effects)
  bool commutative = false;
  // The eval writes every element of every result (or replaces the result whole), so the
  // interpreter hands it uninitialised buffers and skips the zero-fill. Set only after
  // reading the eval: one that writes part of a result (or lets a handler do it) relies on
  // the zeros.
  bool writes_all_results = false;
  // The eval always replaces every result whole (the constant's attribute, a view of an operand,
  // the callee's or a region's values), so the interpreter hands it storage-less placeholders
  // (Literal::TypeOnly) and allocates nothing. Implies writes_all_results.
  bool replaces_results = false;
  // Which results may take over the buffer of an operand that dies at this op (same type), as
  // the eval would do itself: the interpreter then places that operand in the result's slot
  // instead of allocating a buffer the eval would drop. kAnyOperand: result 0 takes the first
  // dying operand of its type (elementwise ops); kSameIndex: result i takes operand i (the
  // updated input of dynamic_update_slice and scatter).
  enum class InPlace { kNone, kAnyOperand, kSameIndex };
  InPlace in_place = InPlace::kNone;
};

struct OpDef {
  std::string name;  // full name, e.g. "stablehlo.add"
  OpTraits traits;
  InferFn infer;        // required
  EvalFn eval;          // interpreter semantics; null => unsupported by the interpreter
  VjpFn vjp;            // gradient rule; null => not differentiable
  PrintFn print;        // pretty form; null => generic form
  ParseFn parse;        // pretty form; null => only the generic form parses
  int num_regions = 0;  // regions the op owns; -1: any number (case)
};

class OpRegistry {
 public:
  // The process-wide registry with every built-in op registered.
  static const OpRegistry& Global();

  // Registers `def`; a second definition under the same name is a programming error.
  OpDef& Register(OpDef def);
  const OpDef* Find(std::string_view name) const;
  // Fails with a message naming the op when it is unknown.
  StatusOr<const OpDef*> Get(std::string_view name) const;
  std::vector<const OpDef*> All() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> defs_;
};

// Entry points of the op area files in src/ops/ (called once by OpRegistry::Global()).
void RegisterBuiltinOps(OpRegistry& registry);

}  // namespace tlaloc
