// OpBuilder: creates operations at the end of a block, inferring result types through the op
// registry. Errors are sticky: the first failure is kept (status()) and later ops that use an
// invalid value are skipped, so model code can be written as plain expressions and checked once.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc {

class OpBuilder {
 public:
  explicit OpBuilder(Block* block, Module* module = nullptr) : block_(block), module_(module) {}

  Block* block() const { return block_; }
  Module* module() const { return module_; }
  void set_block(Block* block) { block_ = block; }

  // Creates `name` with the given operands and attributes. Result types are inferred, or taken
  // from `result_types` for ops whose result cannot be derived. Returns all results (empty on
  // error, with status() set).
  std::vector<Value> Create(std::string_view name, std::vector<Value> operands,
                            AttrDict attrs = {}, std::optional<std::vector<Type>> result_types = {},
                            std::vector<std::unique_ptr<Region>> regions = {});
  // Single-result convenience: result 0, or an invalid Value on error.
  Value CreateOne(std::string_view name, std::vector<Value> operands, AttrDict attrs = {},
                  std::optional<std::vector<Type>> result_types = {},
                  std::vector<std::unique_ptr<Region>> regions = {});
  // The operation created last (null before any, or after an error).
  Operation* last_op() const { return last_op_; }

  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Records an error (the first one wins).
  void Fail(Status s);

 private:
  Block* block_;
  Module* module_;
  Operation* last_op_ = nullptr;
  Status status_;
};

// Creates an operation without appending it anywhere, checking types through the registry.
// Used by the parser and the builder.
StatusOr<std::unique_ptr<Operation>> CreateOperation(
    const OpDef& def, std::vector<Value> operands, AttrDict attrs,
    const std::optional<std::vector<Type>>& result_types,
    std::vector<std::unique_ptr<Region>> regions);

}  // namespace tlaloc
