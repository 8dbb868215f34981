// Trees of f32 elementwise arithmetic run tile by tile (fusion.h, FuseElementwiseTrees).
//
// AdamW's update is a dozen elementwise ops per parameter (decay, two moments, their bias
// corrections, the square root, the step), gradient clipping scales every gradient, and the
// backward pass has chains of its own; run one by one, each op streams full-size tensors from
// memory and writes a full-size intermediate (the tiny preset's 151,936 x 64 embedding: 39 MB
// per pass). Here a tree of such ops, whose inner values each have one user, runs over tiles of
// kTile elements: every op of the tree in turn on one tile, the intermediates in per-thread
// buffers that stay in L1/L2, then the next tile. Each element still goes through the same
// IEEE operations on the same f32 values in the same order (add, subtract, multiply, divide,
// sqrt and negate are correctly rounded, so the result is the unfused ops' bits; a NaN result's
// payload when both inputs are NaN is the hardware's choice of operand, as it is for the ops
// themselves).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "fusion.h"
#include "ops/data_movement_kernels.h"

namespace tlaloc::interp {

namespace {

constexpr int64_t kTile = 1024;  // elements per tile: 4 KB per intermediate
constexpr int kMaxNodes = 32;    // instructions per tree, leaves included
constexpr int64_t kMinElements = 4096;
constexpr int kMaxDeferredPast = 4;  // full-size ops of others an inner op may be deferred past  //
                                     // smaller tensors: dispatch costs more than it saves

enum class Code : uint8_t {
  kLeaf,
  kBroadcast,
  kSparse,
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kSqrt,
  kNeg
};

// One instruction of a tree in postfix order: a leaf reads an operand (in place, or a
// broadcast one at index (i / inner) % count), an op combines earlier instructions a and b.
// A sparse leaf is scatter(broadcast(init scalar), indices [N, rank], updates [N], add): the
// gradient of a gather of single elements (the cross-entropy's picked logits); its operand is
// the init, its indices and updates operands `indices` and `updates`, `strides` the result's.
struct Instr {
  Code code = Code::kLeaf;
  int a = -1, b = -1;
  int operand = -1;
  int64_t inner = 1, count = 1;
  int indices = -1, updates = -1;
  std::vector<int64_t> strides, dims;
};

bool IsF32Tensor(Value v) {
  return v.type().is_tensor() && v.tensor_type().element_type == ElementType::kF32;
}

// The code of an op the tree may hold, or kLeaf when it may not.
Code OpCode(const Operation& op) {
  if (op.num_results() != 1 || !op.regions().empty()) return Code::kLeaf;
  const std::string& n = op.name();
  if (op.num_operands() == 2) {
    if (n == "stablehlo.add") return Code::kAdd;
    if (n == "stablehlo.subtract") return Code::kSubtract;
    if (n == "stablehlo.multiply") return Code::kMultiply;
    if (n == "stablehlo.divide") return Code::kDivide;
  } else if (op.num_operands() == 1) {
    if (n == "stablehlo.sqrt") return Code::kSqrt;
    if (n == "stablehlo.negate") return Code::kNeg;
  }
  return Code::kLeaf;
}

// broadcast_in_dim of an f32 operand whose dimensions (less those of size 1 that expand) are one
// run of consecutive result dimensions of the same sizes: element i of the result reads the
// operand at (i / inner) % count. False for any other broadcast.
bool BroadcastIndexing(const Operation& bop, int64_t& inner, int64_t& count) {
  if (bop.name() != "stablehlo.broadcast_in_dim" || bop.num_operands() != 1) return false;
  Value s = bop.operand(0), b = bop.result(0);
  if (!IsF32Tensor(s) || !IsF32Tensor(b)) return false;
  const TensorType& bt = b.tensor_type();
  const TensorType& st = s.tensor_type();
  const std::vector<int64_t> all = GetIntArrayAttr(bop.attrs(), "broadcast_dimensions");
  if (static_cast<int64_t>(all.size()) != st.rank()) return false;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] < 0 || all[i] >= bt.rank()) return false;
    if (st.dims[i] == bt.dims[all[i]])
      dims.push_back(all[i]);
    else if (st.dims[i] != 1)
      return false;
  }
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != dims[0] + static_cast<int64_t>(i)) return false;
  inner = 1;
  for (int64_t d = dims.empty() ? 0 : dims.back() + 1; d < bt.rank(); ++d) inner *= bt.dims[d];
  count = st.num_elements();
  return inner > 0 && count > 0;
}

// scatter(broadcast_in_dim(s f32 scalar), indices, updates f32 [N]) with an add body, each update
// one element at the coordinates in its row of indices [N, rank] (the index vector last), and
// the broadcast used by nothing else: true, with the broadcast's op index in `bcast`.
bool IsPointScatterOfSplat(const BlockUses& uses, const Operation& op,
                           const std::unordered_map<const Operation*, int>& index, int& bcast) {
  if (op.name() != "stablehlo.scatter" || op.num_operands() != 3 || op.num_results() != 1 ||
      op.regions().size() != 1 || !IsF32Tensor(op.result(0)) || !IsF32Tensor(op.operand(2)))
    return false;
  auto body = ops::MatchBinaryBody(*op.regions()[0]);
  if (!body || *body != ops::BinaryKind::kAdd) return false;
  const TensorType& rt = op.result(0).tensor_type();
  const TensorType& it = op.operand(1).tensor_type();
  const TensorType& ut = op.operand(2).tensor_type();
  const int64_t rank = rt.rank();
  if (it.rank() != 2 || it.dims[1] != rank || ut.rank() != 1 || ut.dims[0] != it.dims[0])
    return false;
  const Attribute* dn = FindAttr(op.attrs(), "scatter_dimension_numbers");
  if (!dn || dn->kind() != Attribute::Kind::kStruct) return false;
  std::vector<int64_t> all(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) all[d] = d;
  auto list = [&](const char* field) {
    auto v = ops::StructIntList(*dn, field);
    return v.ok() ? *v : std::vector<int64_t>{-1};
  };
  auto vector_dim = ops::StructInt(*dn, "index_vector_dim", 0);
  if (!vector_dim.ok() || *vector_dim != 1 || !list("update_window_dims").empty() ||
      list("inserted_window_dims") != all || !list("input_batching_dims").empty() ||
      !list("scatter_indices_batching_dims").empty() || list("scatter_dims_to_operand_dims") != all)
    return false;
  const Operation* p = op.operand(0).producer();
  auto found = p ? index.find(p) : index.end();
  if (found == index.end() || p->name() != "stablehlo.broadcast_in_dim" ||
      !IsF32Tensor(p->operand(0)) || p->operand(0).tensor_type().rank() != 0 ||
      uses.Users(op.operand(0)).size() != 1)
    return false;
  bcast = found->second;
  return true;
}

// Builds the tree rooted at op `root` of `block`.
class TreeBuilder {
 public:
  TreeBuilder(const Block& block, const BlockUses& uses, const BlockPlan& plan,
              const std::unordered_map<const Operation*, int>& index)
      : block_(block), uses_(uses), plan_(plan), index_(index) {}

  // Emits the tree at `root`; false when it holds fewer than two arithmetic ops.
  bool Build(int root) {
    type_ = block_.operations()[root]->result(0).tensor_type();
    Emit(root);
    return arith_ >= 2;
  }

  std::vector<Instr> program;
  std::vector<int> chain;
  std::vector<Value> operands;

 private:
  // The op index producing `v` when it may join the tree (one use, not fused, same block).
  int Inlinable(Value v) const {
    const Operation* p = v.producer();
    if (!p) return -1;
    auto it = index_.find(p);
    if (it == index_.end()) return -1;
    const int i = it->second;
    if (plan_.ops[i].skip || plan_.ops[i].fused || uses_.Users(v).size() != 1) return -1;
    return i;
  }

  // Running op p at its user u instead keeps p's operands alive until u: fine across the tree's
  // own ops and small ones, not across a stretch of other full-size work (the next loss chunk's
  // logits, say), where the deferred operands would add to the peak.
  bool Near(int p, int u) const {
    const auto& ops = block_.operations();
    int others = 0;
    for (int k = p + 1; k < u; ++k) {
      if (plan_.ops[k].skip || std::find(chain.begin(), chain.end(), k) != chain.end()) continue;
      const Operation& op = *ops[k];
      if (op.num_results() == 1 && op.result(0).type().is_tensor() &&
          op.result(0).tensor_type().num_elements() >= kMinElements && ++others > kMaxDeferredPast)
        return false;
    }
    return true;
  }

  int AddOperand(Value v) {
    for (size_t k = 0; k < operands.size(); ++k)
      if (operands[k] == v) return static_cast<int>(k);
    operands.push_back(v);
    return static_cast<int>(operands.size()) - 1;
  }

  // Emits value `v` (an operand of a tree op) and returns its instruction.
  int EmitValue(Value v) {
    const auto& ops = block_.operations();
    const int p = Inlinable(v);
    // Inline only while there is room for this op and a leaf per operand (a rough bound).
    const int room = kMaxNodes - static_cast<int>(program.size());
    if (p >= 0 && room >= 3 && OpCode(*ops[p]) != Code::kLeaf &&
        ops[p]->result(0).tensor_type() == type_ && Near(p, uses_.Users(v)[0]))
      return Emit(p);
    Instr leaf;
    int bcast = -1;
    if (p >= 0 && ops[p]->result(0).tensor_type() == type_ &&
        IsPointScatterOfSplat(uses_, *ops[p], index_, bcast) && !plan_.ops[bcast].skip &&
        !plan_.ops[bcast].fused) {
      leaf.code = Code::kSparse;
      leaf.operand = AddOperand(ops[bcast]->operand(0));
      leaf.indices = AddOperand(ops[p]->operand(1));
      leaf.updates = AddOperand(ops[p]->operand(2));
      leaf.dims = type_.dims;
      leaf.strides.assign(type_.dims.size(), 1);
      for (int64_t d = static_cast<int64_t>(type_.dims.size()) - 2; d >= 0; --d)
        leaf.strides[d] = leaf.strides[d + 1] * type_.dims[d + 1];
      chain.push_back(bcast);
      chain.push_back(p);
    } else if (p >= 0 && BroadcastIndexing(*ops[p], leaf.inner, leaf.count) &&
               ops[p]->result(0).tensor_type() == type_) {
      leaf.code = Code::kBroadcast;
      leaf.operand = AddOperand(ops[p]->operand(0));
      chain.push_back(p);
    } else {
      leaf.operand = AddOperand(v);
    }
    program.push_back(leaf);
    return static_cast<int>(program.size()) - 1;
  }

  int Emit(int i) {
    const Operation& op = *block_.operations()[i];
    Instr in;
    in.code = OpCode(op);
    in.a = EmitValue(op.operand(0));
    if (op.num_operands() == 2) in.b = EmitValue(op.operand(1));
    chain.push_back(i);
    ++arith_;
    program.push_back(in);
    return static_cast<int>(program.size()) - 1;
  }

  const Block& block_;
  const BlockUses& uses_;
  const BlockPlan& plan_;
  const std::unordered_map<const Operation*, int>& index_;
  TensorType type_;
  int arith_ = 0;
};

#define TLALOC_AVX512_TARGET __attribute__((target("avx512f")))

template <Code C>
inline float Scalar(float a, float b) {
  if constexpr (C == Code::kAdd) return a + b;
  if constexpr (C == Code::kSubtract) return a - b;
  if constexpr (C == Code::kMultiply) return a * b;
  if constexpr (C == Code::kDivide) return a / b;
  if constexpr (C == Code::kSqrt) return std::sqrt(a);
  return -a;
}

// d = a OP b (b unused for the unary codes) over n elements, 16 at a time: each lane is the
// one IEEE operation the scalar form does (a loop per op, so nothing contracts into an FMA).
template <Code C>
TLALOC_AVX512_TARGET void Apply512(const float* a, const float* b, float* d, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 x = _mm512_loadu_ps(a + j);
    __m512 r;
    if constexpr (C == Code::kAdd) r = _mm512_add_ps(x, _mm512_loadu_ps(b + j));
    if constexpr (C == Code::kSubtract) r = _mm512_sub_ps(x, _mm512_loadu_ps(b + j));
    if constexpr (C == Code::kMultiply) r = _mm512_mul_ps(x, _mm512_loadu_ps(b + j));
    if constexpr (C == Code::kDivide) r = _mm512_div_ps(x, _mm512_loadu_ps(b + j));
    if constexpr (C == Code::kSqrt)
      r = _mm512_mask_sqrt_ps(x, 0xFFFF, x);  // (the unmasked form trips -Wmaybe-uninitialized)
    if constexpr (C == Code::kNeg)
      r = _mm512_castsi512_ps(
          _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
    _mm512_storeu_ps(d + j, r);
  }
  for (; j < n; ++j) d[j] = Scalar<C>(a[j], b ? b[j] : 0.0f);
}

template <Code C>
void ApplyPlain(const float* a, const float* b, float* d, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] = Scalar<C>(a[j], b ? b[j] : 0.0f);
}

template <Code C>
void Apply(const float* a, const float* b, float* d, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  avx512 ? Apply512<C>(a, b, d, n) : ApplyPlain<C>(a, b, d, n);
}

// Runs `program` over elements [begin, end) of the result: tile by tile, each instruction in
// turn, an op's tile in its own buffer (the root's straight into `out`).
using SparseEntries = std::vector<std::pair<int64_t, float>>;  // (flat index, value), sorted

// Each sparse leaf's elements other than its init: the init plus the updates landing there, in
// the scatter's order (updates outside the result skipped, as the scatter skips them).
std::vector<SparseEntries> SparseLeaves(const std::vector<Instr>& program,
                                        std::span<const Literal> in) {
  std::vector<SparseEntries> sparse(program.size());
  for (size_t k = 0; k < program.size(); ++k) {
    const Instr& ins = program[k];
    if (ins.code != Code::kSparse) continue;
    const Literal& idx = in[ins.indices];
    const float* upd = in[ins.updates].span<float>().data();
    const int64_t n = in[ins.updates].num_elements();
    const int64_t rank = static_cast<int64_t>(ins.dims.size());
    std::vector<std::pair<int64_t, int64_t>> at;  // (flat index, update)
    for (int64_t u = 0; u < n; ++u) {
      int64_t flat = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t c = idx.GetAsInt64(u * rank + d);
        inside = inside && c >= 0 && c < ins.dims[d];
        flat += c * ins.strides[d];
      }
      if (inside) at.push_back({flat, u});
    }
    std::stable_sort(at.begin(), at.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    const float init = in[ins.operand].span<float>()[0];
    for (size_t i = 0; i < at.size(); ++i) {
      if (i == 0 || at[i].first != at[i - 1].first) sparse[k].push_back({at[i].first, init});
      sparse[k].back().second = sparse[k].back().second + upd[at[i].second];
    }
  }
  return sparse;
}

void RunTiles(const std::vector<Instr>& program, std::span<const Literal> in,
              const std::vector<SparseEntries>& sparse, float* out, int64_t begin, int64_t end) {
  const int n = static_cast<int>(program.size());
  std::vector<float> buffers(static_cast<size_t>(n) * kTile);
  std::vector<const float*> src(n);
  std::vector<const float*> base(n, nullptr);
  for (int k = 0; k < n; ++k)
    if (program[k].operand >= 0) base[k] = in[program[k].operand].span<float>().data();
  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int64_t len = std::min(kTile, end - t0);
    for (int k = 0; k < n; ++k) {
      const Instr& ins = program[k];
      float* dst = k == n - 1 ? out + t0 : buffers.data() + static_cast<size_t>(k) * kTile;
      src[k] = dst;
      switch (ins.code) {
        case Code::kLeaf:
          src[k] = base[k] + t0;  // read in place
          break;
        case Code::kSparse: {
          std::fill(dst, dst + len, in[ins.operand].span<float>()[0]);
          const SparseEntries& e = sparse[k];
          auto it = std::lower_bound(e.begin(), e.end(), t0,
                                     [](const auto& x, int64_t t) { return x.first < t; });
          for (; it != e.end() && it->first < t0 + len; ++it) dst[it->first - t0] = it->second;
          break;
        }
        case Code::kBroadcast: {
          const float* s = base[k];
          if (ins.count == 1) {
            std::fill(dst, dst + len, s[0]);
            break;
          }
          // In runs: a stretch of the operand (inner 1), or one value repeated `inner` times.
          for (int64_t i = t0; i < t0 + len;) {
            if (ins.inner == 1) {
              const int64_t c0 = i % ins.count, run = std::min(t0 + len - i, ins.count - c0);
              std::copy(s + c0, s + c0 + run, dst + (i - t0));
              i += run;
            } else {
              const int64_t seg = i / ins.inner;
              const int64_t run = std::min(t0 + len - i, (seg + 1) * ins.inner - i);
              std::fill(dst + (i - t0), dst + (i - t0) + run, s[seg % ins.count]);
              i += run;
            }
          }
          break;
        }
        case Code::kAdd:
          Apply<Code::kAdd>(src[ins.a], src[ins.b], dst, len);
          break;
        case Code::kSubtract:
          Apply<Code::kSubtract>(src[ins.a], src[ins.b], dst, len);
          break;
        case Code::kMultiply:
          Apply<Code::kMultiply>(src[ins.a], src[ins.b], dst, len);
          break;
        case Code::kDivide:
          Apply<Code::kDivide>(src[ins.a], src[ins.b], dst, len);
          break;
        case Code::kSqrt:
          Apply<Code::kSqrt>(src[ins.a], nullptr, dst, len);
          break;
        case Code::kNeg:
          Apply<Code::kNeg>(src[ins.a], nullptr, dst, len);
          break;
      }
    }
    // A root that is a leaf cannot happen (the tree holds two ops), so `out` is written.
  }
}

std::shared_ptr<const FusedKernel> TreeKernel(std::vector<Instr> program) {
  return std::make_shared<const FusedKernel>(
      FusedKernel{"fused.elementwise",
                  [program = std::move(program)](std::span<const Literal> in, Literal& out,
                                                 EvalContext& ctx) -> Status {
                    float* po = out.span<float>().data();
                    const int64_t total = out.num_elements();
                    const int64_t tiles = (total + kTile - 1) / kTile;
                    const std::vector<SparseEntries> sparse = SparseLeaves(program, in);
                    // At least 64 tiles (256 KB of result) per thread's share, so small trees stay
                    // on one.
                    ctx.ParallelFor(tiles, 64, [&](int64_t b, int64_t e) {
                      RunTiles(program, in, sparse, po, b * kTile, std::min(total, e * kTile));
                    });
                    return OkStatus();
                  }});
}

}  // namespace

void FuseElementwiseTrees(const Block& block, const BlockUses& uses, BlockPlan& plan,
                          const std::function<int(const ValueImpl*)>& slot_of) {
  const auto& ops = block.operations();
  std::unordered_map<const Operation*, int> index;
  for (size_t i = 0; i < ops.size(); ++i) index[ops[i].get()] = static_cast<int>(i);
  // From the last op back, so a tree's root is met before the ops inside it.
  for (int a = static_cast<int>(ops.size()) - 1; a >= 0; --a) {
    if (plan.ops[a].skip || plan.ops[a].fused) continue;
    const Operation& op = *ops[a];
    if (OpCode(op) == Code::kLeaf || !IsF32Tensor(op.result(0)) ||
        op.result(0).tensor_type().num_elements() < kMinElements)
      continue;
    bool same = true;
    for (int k = 0; k < op.num_operands(); ++k)
      same = same && op.operand(k).type() == op.result(0).type();
    if (!same) continue;
    TreeBuilder tree(block, uses, plan, index);
    if (!tree.Build(a)) continue;
    // The interpreter lets a fused result take over its first operand's buffer when that dies
    // at the kernel: put a full-size leaf that dies here first, so the result is written in
    // place as the unfused ops would be instead of into a fresh buffer (the cross-entropy
    // gradient's tree starts with its [rows] scale). Writing in place is safe: every read of a
    // tile comes before the root writes that tile.
    auto dies_here = [&](Value v) {
      return v.type() == op.result(0).type() &&
             std::find(tree.chain.begin(), tree.chain.end(), uses.LastUse(v)) != tree.chain.end();
    };
    for (size_t k = 1; k < tree.operands.size() && !dies_here(tree.operands[0]); ++k) {
      if (!dies_here(tree.operands[k])) continue;
      std::swap(tree.operands[0], tree.operands[k]);
      auto remap = [&](int& i) {
        i = i == 0 ? static_cast<int>(k) : i == static_cast<int>(k) ? 0 : i;
      };
      for (Instr& ins : tree.program) {
        if (ins.operand >= 0) remap(ins.operand);
        if (ins.indices >= 0) remap(ins.indices);
        if (ins.updates >= 0) remap(ins.updates);
      }
      break;
    }
    plan.kernels.push_back(TreeKernel(std::move(tree.program)));
    ReplaceChain(tree.chain, tree.operands, plan.kernels.back().get(), plan, slot_of);
  }
}

}  // namespace tlaloc::interp
