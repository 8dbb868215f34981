#include "tlaloc/interp/interpreter.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <unordered_map>

#include "fusion.h"
#include "op_profile.h"
#include "prepared_ops.h"
#include "tlaloc/cpu/kernels.h"
#include "tlaloc/ir/liveness.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/support/buffer_cache.h"
#include "tlaloc/support/memory_info.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc {

// ---- Plan -----------------------------------------------------------------------------------

namespace {

using interp::BlockPlan;
using interp::OpPlan;

struct FunctionPlan {
  int num_slots = 0;
  std::unordered_map<const ValueImpl*, int> slots;
  std::unordered_map<const Block*, BlockPlan> blocks;
};

class Planner {
 public:
  Planner(FunctionPlan& plan, bool fuse, bool reference_only, bool prepare)
      : plan_(plan), fuse_(fuse), reference_only_(reference_only), prepare_(prepare) {}

  int Slot(const ValueImpl* v) {
    auto [it, inserted] = plan_.slots.emplace(v, plan_.num_slots);
    if (inserted) ++plan_.num_slots;
    return it->second;
  }

  void PlanBlock(const Block& block) {
    BlockPlan bp;
    const BlockUses uses(block);
    const auto& ops = block.operations();
    // Values captured from an outer block are released there, so only this block's own
    // arguments and results are placed.
    std::vector<std::vector<int>> release(ops.size());
    for (Value a : block.arguments()) {
      const int slot = Slot(a.impl());
      bp.arg_slots.push_back(slot);
      const int last = uses.LastUse(a);
      if (last < 0)
        bp.release_at_start.push_back(slot);
      else
        release[last].push_back(slot);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      for (Value r : ops[i]->results()) {
        const int last = uses.LastUse(r);  // unused results die right away
        release[last < 0 ? i : static_cast<size_t>(last)].push_back(Slot(r.impl()));
      }
      for (const auto& region : ops[i]->regions())
        for (const auto& inner : region->blocks()) PlanBlock(*inner);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const Operation& op = *ops[i];
      OpPlan p;
      p.op = &op;
      p.eval = &cpu::KernelFor(op.def(), reference_only_);
      if (prepare_) p.prepared = interp::PrepareOp(op);
      for (Value v : op.operands()) p.operand_slots.push_back(Slot(v.impl()));
      for (Value r : op.results()) p.result_slots.push_back(Slot(r.impl()));
      // The terminator's operands are read by the caller of the block; never release them here.
      if (!op.def().traits.terminator) p.release_after = std::move(release[i]);
      std::sort(p.release_after.begin(), p.release_after.end());
      bp.ops.push_back(std::move(p));
    }
    if (fuse_) interp::FuseChains(block, uses, bp, [&](const ValueImpl* v) { return Slot(v); });
    plan_.blocks[&block] = std::move(bp);
  }

 private:
  FunctionPlan& plan_;
  const bool fuse_;
  const bool reference_only_;  // TLALOC_CPU_KERNELS=0: every op runs its reference evaluation
  const bool prepare_;         // prepared kernels (prepared_ops.h) for the ops that have one
};

// Live-bytes accounting keyed by storage, so aliased buffers count once. An open-addressing
// table (linear probing, backward-shift deletion): a decode step adds and removes a few
// thousand entries, and a node-based map allocated and freed a node for each.
class MemoryTracker {
 public:
  void Add(const Literal& l) {
    if (l.valid()) Add(l.data(), l.byte_size());
  }
  void Add(const std::byte* key, int64_t bytes) {
    if (2 * (count_ + 1) > table_.size()) Grow();
    Entry& e = table_[Find(key)];
    if (e.refs++ == 0) {
      e.key = key;
      e.bytes = bytes;
      ++count_;
      bytes_ += bytes;
      peak_ = std::max(peak_, bytes_);
    }
  }
  void Remove(const Literal& l) {
    if (l.valid()) Remove(l.data());
  }
  void Remove(const std::byte* key) {
    if (table_.empty()) return;
    size_t i = Find(key);
    if (table_[i].refs == 0 || --table_[i].refs > 0) return;
    bytes_ -= table_[i].bytes;
    --count_;
    // Backward shift: move later entries of the probe run into the hole so lookups never stop
    // early at it.
    const size_t mask = table_.size() - 1;
    for (size_t j = (i + 1) & mask; table_[j].refs > 0; j = (j + 1) & mask) {
      const size_t home = Home(table_[j].key);
      // Entry j may fill the hole at i if its home is not cyclically in (i, j].
      if (((j - home) & mask) >= ((j - i) & mask)) {
        table_[i] = table_[j];
        i = j;
      }
    }
    table_[i] = Entry{};
  }
  int64_t peak() const { return peak_; }
  int64_t bytes() const { return bytes_; }

 private:
  struct Entry {
    const std::byte* key = nullptr;
    int refs = 0;  // 0: the slot is empty
    int64_t bytes = 0;
  };
  size_t Home(const std::byte* key) const {
    // Storage is 64-byte aligned: drop the low bits, then mix (Fibonacci hashing).
    const uint64_t h = (reinterpret_cast<uintptr_t>(key) >> 6) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> 32) & (table_.size() - 1);
  }
  // The slot holding `key`, or the empty slot where it would go.
  size_t Find(const std::byte* key) const {
    const size_t mask = table_.size() - 1;
    size_t i = Home(key);
    while (table_[i].refs > 0 && table_[i].key != key) i = (i + 1) & mask;
    return i;
  }
  void Grow() {
    std::vector<Entry> old = std::move(table_);
    table_.assign(std::max<size_t>(64, 2 * old.size()), Entry{});
    for (const Entry& e : old)
      if (e.refs > 0) table_[Find(e.key)] = e;
  }
  std::vector<Entry> table_;
  size_t count_ = 0;
  int64_t bytes_ = 0, peak_ = 0;
};

}  // namespace

struct Executable::Plan {
  std::unordered_map<const Function*, FunctionPlan> functions;
  // InterpreterOptions::num_threads > 0: this executable's own pool instead of the shared one.
  std::unique_ptr<ThreadPool> pool;
};

// ---- Execution ------------------------------------------------------------------------------

namespace {

Literal AllocateResult(const Operation& op, int i) {
  const OpTraits& traits = op.def().traits;
  const Type& t = op.result(i).type();
  if (!t.is_tensor()) return Literal(TensorType(ElementType::kPred, {}));
  if (traits.replaces_results) return Literal::TypeOnly(t.tensor);
  if (traits.writes_all_results) return Literal::Uninitialized(t.tensor);
  return Literal(t.tensor);
}

// The operand whose buffer result `i` takes over per OpTraits::in_place, or null.
const Literal* InPlaceOperand(const Operation& op, int i, const std::vector<Literal>& operands,
                              const std::vector<bool>& reusable) {
  using InPlace = OpTraits::InPlace;
  const InPlace mode = op.def().traits.in_place;
  const Type& t = op.result(i).type();
  if (mode == InPlace::kNone || !t.is_tensor()) return nullptr;
  auto fits = [&](size_t k) { return reusable[k] && operands[k].type() == t.tensor; };
  if (mode == InPlace::kSameIndex)
    return static_cast<size_t>(i) < operands.size() && fits(static_cast<size_t>(i))
               ? &operands[static_cast<size_t>(i)]
               : nullptr;
  if (i != 0) return nullptr;
  for (size_t k = 0; k < operands.size(); ++k)
    if (fits(k)) return &operands[k];
  return nullptr;
}

}  // namespace

std::vector<Literal> AllocateResults(const Operation& op) {
  std::vector<Literal> results;
  results.reserve(op.num_results());
  for (int i = 0; i < op.num_results(); ++i) results.push_back(AllocateResult(op, i));
  return results;
}

class InterpreterRun : public EvalContext {
 public:
  InterpreterRun(const Executable& exe, ExecutionStats* stats)
      : exe_(exe),
        stats_(stats),
        pool_(exe.plan_->pool ? exe.plan_->pool.get() : &DefaultThreadPool()) {}

  StatusOr<std::vector<Literal>> RunFunction(const Function& fn, std::vector<Literal> args,
                                             bool track_args) {
    auto it = exe_.plan_->functions.find(&fn);
    if (it == exe_.plan_->functions.end())
      return Internal("function @" + fn.name() + " was not prepared");
    Frame frame{&it->second, std::vector<Literal>(it->second.num_slots)};
    Frame* saved = frame_;
    frame_ = &frame;
    if (args.size() != static_cast<size_t>(fn.num_arguments()))
      return InvalidArgument("@" + fn.name() + " expects " + std::to_string(fn.num_arguments()) +
                             " arguments, got " + std::to_string(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      const Type& t = fn.entry().argument(static_cast<int>(i)).type();
      if (t.is_tensor() && !(args[i].type() == t.tensor))
        return InvalidArgument("argument " + std::to_string(i) + " of @" + fn.name() + " is " +
                               args[i].type().ToString() + ", expected " + t.ToString());
      if (track_args) {
        // Arguments the caller still holds stay live for the whole run.
        if (!args[i].HasUniqueStorage()) tracker_.Add(args[i]);
      }
    }
    auto result = RunBlock(fn.entry(), std::move(args));
    frame_ = saved;
    return result;
  }

  StatusOr<std::vector<Literal>> RunBlock(const Block& block, std::vector<Literal> args) {
    const BlockPlan& bp = frame_->plan->blocks.at(&block);
    auto& slots = frame_->slots;
    for (size_t i = 0; i < bp.arg_slots.size(); ++i) {
      tracker_.Add(args[i]);
      slots[bp.arg_slots[i]] = std::move(args[i]);
    }
    for (int s : bp.release_at_start) Release(s);
    for (const OpPlan& p : bp.ops) {
      if (p.skip) continue;  // part of a fused chain that runs at its last op
      const Operation& op = *p.op;
      if (op.def().traits.terminator) {
        std::vector<Literal> out;
        for (int s : p.operand_slots) out.push_back(slots[s]);
        // Values yielded by the block leave its scope: drop the slot references.
        for (int s : p.operand_slots) ReleaseKeepingTracked(s);
        return out;
      }
      TL_RETURN_IF_ERROR(RunOp(p));
    }
    return std::vector<Literal>{};
  }

  Status RunOp(const OpPlan& p) {
    const Operation& op = *p.op;
    if (!op.def().eval) return Unimplemented("the interpreter does not support " + op.name());
    auto& slots = frame_->slots;
    // This nesting level's reused vectors (an eval that runs regions or calls re-enters RunOp
    // one level down); the guard empties them whatever path leaves, so no storage stays shared.
    if (depth_ == scratch_.size()) scratch_.push_back(std::make_unique<OpScratch>());
    OpScratch& scratch = *scratch_[depth_];
    ScratchGuard guard(*this, scratch);
    std::vector<Literal>& operands = scratch.operands;
    const size_t num_operands = p.operand_slots.size();
    operands.resize(num_operands);
    reusable_.assign(num_operands, false);
    for (size_t i = 0; i < num_operands; ++i) {
      int s = p.operand_slots[i];
      bool dies = std::binary_search(p.release_after.begin(), p.release_after.end(), s);
      bool once = std::count(p.operand_slots.begin(), p.operand_slots.end(), s) == 1;
      operands[i] = slots[s];  // copy-assigned: the dims' capacity is reused
      reusable_[i] = dies && once;
    }
    // An operand is reusable only if nothing else (caller, constant, other slot) shares it.
    for (size_t i = 0; i < num_operands; ++i)
      if (reusable_[i]) reusable_[i] = operands[i].storage().use_count() == 2;  // slot + here
    const int profiling = interp::OpProfilingLevel();
    const auto start =
        profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    const double outer_child_seconds = child_seconds_;
    child_seconds_ = 0;
    std::vector<Literal>& results = scratch.results;
    const Operation* saved_op = current_op_;
    current_op_ = &op;
    // The results are live beside the operands from the moment they are allocated, through the
    // regions or callees the op runs, until the operands dying here are released. `allocated`
    // keeps what was allocated until the op is done, so an eval that replaces a result (with an
    // operand it reuses, or a buffer of its own) is counted with both at its peak.
    std::vector<std::shared_ptr<std::byte>>& allocated = scratch.allocated;
    auto track_allocated = [&] {
      allocated.clear();
      for (const Literal& r : results) {
        allocated.push_back(r.storage());
        tracker_.Add(r);
      }
    };
    const std::span<const Literal> in(operands.data(), num_operands);
    Status st;
    try {
      if (p.fused) {
        // A kernel of several results fills them all; a chain's result may take over its
        // first operand's buffer when that dies here.
        if (p.fused->eval_results) {
          for (int i = 0; i < op.num_results(); ++i)
            results.push_back(Literal::Uninitialized(op.result(i).type().tensor));
        } else if (reusable_[0] && operands[0].type() == op.result(0).type().tensor)
          results.push_back(operands[0]);
        else if (op.def().traits.replaces_results)  // a composite mapped to its kernel
          results.push_back(Literal::Uninitialized(op.result(0).type().tensor));
        else
          for (int i = 0; i < op.num_results(); ++i) results.push_back(AllocateResult(op, i));
        track_allocated();
        st = p.fused->eval_results ? p.fused->eval_results(in, results, *this)
                                   : p.fused->eval(in, results[0], *this);
      } else {
        // A dying operand the eval would take over is placed in its result's slot up front, so
        // no buffer is allocated only to be dropped.
        for (int i = 0; i < op.num_results(); ++i) {
          const Literal* take = InPlaceOperand(op, i, operands, reusable_);
          results.push_back(take ? *take : AllocateResult(op, i));
        }
        track_allocated();
        st = p.prepared ? p.prepared(in, results, *this)
                        : (p.eval ? *p.eval : op.def().eval)(op, in, results, *this);
      }
    } catch (const std::bad_alloc& e) {
      st = OutOfMemory(op, e);
    }
    if (st.ok()) {
      for (const Literal& r : results)
        if (!r.valid() && op.def().traits.replaces_results)
          st = Internal(op.name() + " left a result placeholder unreplaced");
    }
    if (st.ok()) {
      for (size_t i = 0; i < results.size(); ++i)
        if (i >= allocated.size() || results[i].data() != allocated[i].get())
          tracker_.Add(results[i]);
    }
    for (size_t i = 0; i < allocated.size(); ++i)
      if (!st.ok() || i >= results.size() || results[i].data() != allocated[i].get())
        tracker_.Remove(allocated[i].get());
    allocated.clear();
    current_op_ = saved_op;
    if (profiling) {
      // Self time: what this op's regions or callees ran is already counted under their ops.
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      int64_t bytes = 0;
      for (const Literal& r : results) bytes += r.valid() ? r.byte_size() : 0;
      std::string key = p.fused ? p.fused->name : op.name();
      if (profiling == 2 && op.num_results() > 0) key += " -> " + op.result(0).type().ToString();
      interp::RecordOpTime(key, elapsed - child_seconds_, bytes);
      child_seconds_ = outer_child_seconds + elapsed;
    } else {
      child_seconds_ = outer_child_seconds;
    }
    if (!st.ok()) return st.WithContext(p.fused ? p.fused->name : op.name());
    if (results.size() != p.result_slots.size())
      return Internal(op.name() + " produced " + std::to_string(results.size()) + " results");
    for (size_t i = 0; i < results.size(); ++i) slots[p.result_slots[i]] = std::move(results[i]);
    if (stats_) ++stats_->ops_executed;
    guard.Clear();  // the operands' references go before the slots dying here are released
    for (int s : p.release_after) Release(s);
    return OkStatus();
  }

  // An allocation that failed inside `op` (its results, or a buffer its kernel needed) as a
  // ResourceExhausted naming the bytes asked for and what the run held (RunOp adds the op).
  Status OutOfMemory(const Operation& op, const std::bad_alloc& e) const {
    int64_t result_bytes = 0;
    for (int i = 0; i < op.num_results(); ++i)
      if (op.result(i).type().is_tensor()) result_bytes += op.result(i).type().tensor.byte_size();
    std::string asked = "an allocation";
    if (const auto* failed = dynamic_cast<const AllocationFailed*>(&e))
      asked = "allocating " + FormatBytes(failed->bytes()) + " (" +
              std::to_string(failed->bytes()) + " bytes)";
    const std::string available =
        AvailableMemoryBytes() ? FormatBytes(*AvailableMemoryBytes()) : std::string("unknown");
    return ResourceExhausted("out of memory: " + asked + " failed; its results take " +
                             FormatBytes(result_bytes) + ", the run held " +
                             FormatBytes(tracker_.bytes()) + " of tensors, and " + available +
                             " is still available to the process");
  }

  void Release(int slot) {
    auto& l = frame_->slots[slot];
    tracker_.Remove(l);
    l = Literal();
  }
  void ReleaseKeepingTracked(int slot) { frame_->slots[slot] = Literal(); }

  // EvalContext
  StatusOr<std::vector<Literal>> RunRegion(const Region& region,
                                           std::vector<Literal> args) override {
    if (region.blocks().empty()) return InvalidArgument("empty region");
    std::vector<bool> saved = reusable_;
    auto r = RunBlock(region.front(), std::move(args));
    reusable_ = std::move(saved);
    // Region results were tracked when produced; the caller takes them over untracked.
    if (r.ok())
      for (const auto& l : *r) tracker_.Remove(l);
    return r;
  }
  StatusOr<std::vector<Literal>> CallFunction(const std::string& name,
                                              std::vector<Literal> args) override {
    const Function* fn = exe_.module().Find(name);
    if (!fn) return NotFound("call to unknown function @" + name);
    std::vector<bool> saved = reusable_;
    auto r = RunFunction(*fn, std::move(args), false);
    reusable_ = std::move(saved);
    if (r.ok())
      for (const auto& l : *r) tracker_.Remove(l);
    return r;
  }
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& body) override {
    pool_->ParallelFor(n, grain, body);
  }
  bool CanReuseOperand(int i) const override {
    return i >= 0 && i < static_cast<int>(reusable_.size()) && reusable_[i];
  }
  const CustomCallHandler* FindCustomCall(const std::string& target) const override {
    auto it = exe_.options_.custom_calls.find(target);
    return it == exe_.options_.custom_calls.end() ? nullptr : &it->second;
  }

  int64_t peak() const { return tracker_.peak(); }

 private:
  struct Frame {
    const FunctionPlan* plan;
    std::vector<Literal> slots;
  };
  const Executable& exe_;
  ExecutionStats* stats_;
  ThreadPool* pool_;
  Frame* frame_ = nullptr;
  const Operation* current_op_ = nullptr;
  std::vector<bool> reusable_;
  // RunOp's operand, result and allocation vectors, one set per nesting level, reused from op
  // to op: a decode step runs about 1,800 small ops, and fresh vectors (and a fresh copy of
  // each operand's dims) cost a few allocations each.
  struct OpScratch {
    std::vector<Literal> operands;
    std::vector<Literal> results;
    std::vector<std::shared_ptr<std::byte>> allocated;
  };
  // Enters a nesting level; Clear (or leaving) drops the level's references to storage, keeping
  // the vectors' capacity.
  class ScratchGuard {
   public:
    ScratchGuard(InterpreterRun& run, OpScratch& s) : run_(run), s_(s) { ++run_.depth_; }
    ~ScratchGuard() {
      Clear();
      --run_.depth_;
    }
    void Clear() {
      static const Literal kEmpty;
      for (Literal& l : s_.operands) l = kEmpty;  // copy-assigned: keeps the dims' capacity
      s_.results.clear();
      s_.allocated.clear();
    }

   private:
    InterpreterRun& run_;
    OpScratch& s_;
  };
  std::vector<std::unique_ptr<OpScratch>> scratch_;
  size_t depth_ = 0;
  MemoryTracker tracker_;
  double child_seconds_ = 0;  // time of the ops run inside the op being evaluated (profiling)
};

Executable::~Executable() = default;

namespace {
bool FusionDisabledByEnvironment() {
  const char* env = std::getenv("TLALOC_FUSION");
  return env && std::string(env) == "0";
}
}  // namespace

StatusOr<std::unique_ptr<Executable>> Executable::Prepare(std::shared_ptr<const Module> module,
                                                          const std::string& entry,
                                                          InterpreterOptions options) {
  const Function* fn = entry.empty() ? module->Entry() : module->Find(entry);
  if (!fn)
    return NotFound(entry.empty() ? "the module has no entry function (@main or a public one)"
                                  : "the module has no function @" + entry);
  TL_RETURN_IF_ERROR(Verify(*module));
  std::unique_ptr<Executable> exe(new Executable());
  exe->module_ = std::move(module);
  exe->function_ = fn;
  exe->options_ = std::move(options);
  exe->plan_ = std::make_unique<Plan>();
  if (exe->options_.num_threads > 0)
    exe->plan_->pool = std::make_unique<ThreadPool>(exe->options_.num_threads);
  // The CPU layer's kernels run in place of the ops' reference evaluations where they exist.
  cpu::RegisterKernels();
  const bool reference_only = cpu::ReferenceOnlyFromEnvironment();
  const bool prepare = !reference_only && !interp::PreparedOpsDisabledByEnvironment();
  for (const auto& f : exe->module_->functions()) {
    FunctionPlan& fp = exe->plan_->functions[f.get()];
    Planner(fp, exe->options_.fuse && !FusionDisabledByEnvironment(), reference_only, prepare)
        .PlanBlock(f->entry());
  }
  return exe;
}

StatusOr<std::vector<Literal>> Executable::Execute(std::vector<Literal> args,
                                                   ExecutionStats* stats) const {
  int64_t arg_bytes = 0;
  for (const auto& a : args) arg_bytes += a.byte_size();
  InterpreterRun run(*this, stats);
  auto result = run.RunFunction(*function_, std::move(args), true);
  if (!result.ok()) return result.status().WithContext("@" + function_->name());
  if (stats) {
    stats->peak_live_bytes = run.peak();
    stats->argument_bytes = arg_bytes;
    stats->output_bytes = 0;
    for (const auto& r : *result) stats->output_bytes += r.byte_size();
  }
  return result;
}

StatusOr<std::vector<Literal>> Interpret(const Module& module, const std::string& entry,
                                         std::vector<Literal> args, ExecutionStats* stats,
                                         InterpreterOptions options) {
  // Non-owning shared_ptr: the caller keeps the module alive for this call.
  std::shared_ptr<const Module> alias(std::shared_ptr<const Module>(), &module);
  TL_ASSIGN_OR_RETURN(auto exe, Executable::Prepare(alias, entry, std::move(options)));
  return exe->Execute(std::move(args), stats);
}

}  // namespace tlaloc
