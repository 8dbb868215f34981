// Tlaloc's tensor IR: modules of functions in SSA form. Operations mirror StableHLO op for
// op; an operation's behaviour (shape rule, syntax, evaluation, gradient) lives in its OpDef
// in the registry (op_registry.h), never in switches spread over the code.
#pragma once

#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/ir/attribute.h"
#include "tlaloc/ir/type.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

class Block;
class Function;
class Module;
class Operation;
class Region;
struct OpDef;

// Storage of one SSA value: an operation result or a block argument.
struct ValueImpl {
  Type type;
  Operation* producer = nullptr;  // null for block arguments
  Block* owner_block = nullptr;   // set for block arguments
  int index = 0;                  // result index or argument index
};

// A handle to an SSA value; cheap to copy, compared by identity.
class Value {
 public:
  Value() = default;
  explicit Value(ValueImpl* impl) : impl_(impl) {}
  const Type& type() const { return impl_->type; }
  const TensorType& tensor_type() const { return impl_->type.tensor; }
  Operation* producer() const { return impl_->producer; }
  bool is_block_argument() const { return impl_->producer == nullptr; }
  Block* owner_block() const { return impl_->owner_block; }
  int index() const { return impl_->index; }
  ValueImpl* impl() const { return impl_; }
  explicit operator bool() const { return impl_ != nullptr; }
  bool operator==(const Value& o) const { return impl_ == o.impl_; }

 private:
  ValueImpl* impl_ = nullptr;
};

class Operation {
 public:
  // Creates a detached operation; result types must already be known (see OpBuilder, which
  // infers them through the OpDef).
  static std::unique_ptr<Operation> Create(const OpDef& def, std::vector<Value> operands,
                                           const std::vector<Type>& result_types, AttrDict attrs,
                                           int num_regions = 0);
  ~Operation();

  const OpDef& def() const { return *def_; }
  const std::string& name() const;

  int num_operands() const { return static_cast<int>(operands_.size()); }
  Value operand(int i) const { return operands_[i]; }
  const std::vector<Value>& operands() const { return operands_; }
  void set_operand(int i, Value v) { operands_[i] = v; }

  int num_results() const { return static_cast<int>(results_.size()); }
  Value result(int i) const { return Value(results_[i].get()); }
  std::vector<Value> results() const;
  std::vector<Type> result_types() const;
  std::vector<Type> operand_types() const;

  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

  int num_regions() const { return static_cast<int>(regions_.size()); }
  Region& region(int i) { return *regions_[i]; }
  const Region& region(int i) const { return *regions_[i]; }
  const std::vector<std::unique_ptr<Region>>& regions() const { return regions_; }

  Block* parent_block() const { return parent_; }

 private:
  friend class Block;
  Operation() = default;
  const OpDef* def_ = nullptr;
  std::vector<Value> operands_;
  std::vector<std::unique_ptr<ValueImpl>> results_;
  AttrDict attrs_;
  std::vector<std::unique_ptr<Region>> regions_;
  Block* parent_ = nullptr;
};

class Block {
 public:
  explicit Block(Region* parent) : parent_(parent) {}
  Value AddArgument(Type type);
  int num_arguments() const { return static_cast<int>(args_.size()); }
  Value argument(int i) const { return Value(args_[i].get()); }
  std::vector<Value> arguments() const;
  std::vector<Type> argument_types() const;

  Operation* Append(std::unique_ptr<Operation> op);
  const std::vector<std::unique_ptr<Operation>>& operations() const { return ops_; }
  std::vector<std::unique_ptr<Operation>>& mutable_operations() { return ops_; }
  // The last operation (a return), or null for an empty block.
  Operation* terminator() const { return ops_.empty() ? nullptr : ops_.back().get(); }
  Region* parent_region() const { return parent_; }

 private:
  Region* parent_;
  std::vector<std::unique_ptr<ValueImpl>> args_;
  std::vector<std::unique_ptr<Operation>> ops_;
};

class Region {
 public:
  explicit Region(Operation* parent_op = nullptr) : parent_op_(parent_op) {}
  Block& AddBlock();
  bool empty() const { return blocks_.empty(); }
  Block& front() { return *blocks_.front(); }
  const Block& front() const { return *blocks_.front(); }
  const std::vector<std::unique_ptr<Block>>& blocks() const { return blocks_; }
  Operation* parent_op() const { return parent_op_; }
  void set_parent_op(Operation* op) { parent_op_ = op; }

 private:
  Operation* parent_op_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

class Function {
 public:
  Function(std::string name, const std::vector<Type>& arg_types, std::vector<Type> result_types);

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  bool is_public() const { return is_public_; }
  void set_public(bool p) { is_public_ = p; }

  Block& entry() { return body_.front(); }
  const Block& entry() const { return body_.front(); }
  Region& body() { return body_; }
  const Region& body() const { return body_; }
  int num_arguments() const { return entry().num_arguments(); }
  // Appends a parameter (keeps the per-argument attribute slots in step).
  Value AddArgument(Type type);
  std::vector<Type> argument_types() const { return entry().argument_types(); }
  const std::vector<Type>& result_types() const { return result_types_; }
  void set_result_types(std::vector<Type> t);

  // Per-argument and per-result attribute dictionaries (tf.aliasing_output, shardings, ...).
  AttrDict& arg_attrs(int i) { return arg_attrs_[i]; }
  const AttrDict& arg_attrs(int i) const { return arg_attrs_[i]; }
  AttrDict& result_attrs(int i) { return result_attrs_[i]; }
  const AttrDict& result_attrs(int i) const { return result_attrs_[i]; }
  // Other function attributes, carried through printing and parsing.
  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

 private:
  std::string name_;
  bool is_public_ = true;
  Region body_;
  std::vector<Type> result_types_;
  std::vector<AttrDict> arg_attrs_;
  std::vector<AttrDict> result_attrs_;
  AttrDict attrs_;
};

class Module {
 public:
  explicit Module(std::string name = "tlaloc") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  AttrDict& attrs() { return attrs_; }
  const AttrDict& attrs() const { return attrs_; }

  Function* AddFunction(std::string name, const std::vector<Type>& arg_types,
                        std::vector<Type> result_types);
  Function* Find(const std::string& name) const;
  // The function named "main", else the first public one, else null.
  Function* Entry() const;
  const std::vector<std::unique_ptr<Function>>& functions() const { return functions_; }
  // Removes each private function named in `candidates` that no other function reaches through
  // a symbol (a func.call's callee, a composite's decomposition, any string or symbol attribute
  // naming it, nested regions included; a candidate reached only from removed candidates goes
  // too): the decompositions kernelize leaves behind when it replaces composites. Returns how
  // many were removed.
  int RemoveUnreachableFunctions(const std::set<std::string>& candidates);

 private:
  std::string name_;
  AttrDict attrs_;
  std::vector<std::unique_ptr<Function>> functions_;
};

// Checks every operation of the module with its OpDef (operand and result types, attributes,
// regions), SSA dominance inside blocks, terminators, and calls against callee signatures.
Status Verify(const Module& module);
Status VerifyFunction(const Function& function, const Module* module);

}  // namespace tlaloc
