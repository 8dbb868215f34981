// stablehlo.rng_bit_generator with the THREE_FRY algorithm, bit-identical to XLA's expansion:
// the state is u64[2] = (key, counter); output element i (row-major) of a 64-bit result is
// threefry2x32(key, counter + i) with the two words joined low-first, and the new state is
// (key, counter + elements). 32-bit results split one dimension in halves so that each
// threefry call yields two neighbouring outputs (see SplitDim below); 8/16-bit results are the
// low bits of the 32-bit ones.
#include "control_flow_threefry.h"
#include "op_areas.h"
#include "op_helpers.h"

namespace tlaloc::ops {

namespace {

StatusOr<std::vector<Type>> InferRng(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  const TensorType& state = in.operand_types[0].tensor;
  if (state.rank() != 1 || !IsInteger(state.element_type))
    return InvalidArgument("initial_state must be a rank-1 integer tensor, got " +
                           state.ToString());
  TL_ASSIGN_OR_RETURN(std::vector<Type> out, DeclaredResults(in, 2));
  if (!(out[0] == in.operand_types[0]))
    return InvalidArgument("output_state must have the initial_state's type " + state.ToString() +
                           ", got " + out[0].ToString());
  if (!out[1].is_tensor() ||
      (!IsInteger(out[1].tensor.element_type) && !IsFloat(out[1].tensor.element_type)))
    return InvalidArgument("output must be an integer or float tensor, got " + out[1].ToString());
  return out;
}

// The dimension XLA splits for 32-bit outputs: the first even-sized one, else the largest.
int64_t SplitDim(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] % 2 == 0) return static_cast<int64_t>(i);
  int64_t best = 0;
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] > dims[best]) best = static_cast<int64_t>(i);
  return best;
}

Status EvalRng(const Operation& op, std::span<const Literal> operands,
               std::vector<Literal>& results, EvalContext&) {
  std::string alg = GetStringAttr(op.attrs(), "rng_algorithm", "DEFAULT");
  if (alg != "THREE_FRY")
    return Unimplemented("rng_algorithm " + alg +
                         " is not supported by the interpreter (only THREE_FRY)");
  const Literal& state = operands[0];
  if (state.element_type() != ElementType::kU64 || state.num_elements() != 2)
    return InvalidArgument("THREE_FRY needs initial_state tensor<2xui64>, got " +
                           state.type().ToString());
  uint64_t key = state.span<uint64_t>()[0];
  uint64_t counter = state.span<uint64_t>()[1];
  Literal& out = results[1];
  int width = BitWidth(out.element_type());
  const std::vector<int64_t>& dims = out.dims();
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  auto bits_for = [&](uint64_t c) {
    return Threefry2x32(k0, k1, static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32));
  };
  int64_t n = out.num_elements();
  uint64_t used = 0;
  if (width == 64) {
    uint64_t* p = reinterpret_cast<uint64_t*>(out.data());
    for (int64_t i = 0; i < n; ++i) {
      auto [lo, hi] = bits_for(counter + static_cast<uint64_t>(i));
      p[i] = static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32);
    }
    used = static_cast<uint64_t>(n);
  } else {
    // Half shape: the split dimension d of size s becomes ceil(s / 2); half element h yields
    // the outputs at 2 * h_d (first word) and 2 * h_d + 1 (second word) along d.
    std::vector<int64_t> half = dims.empty() ? std::vector<int64_t>{1} : dims;
    int64_t d = dims.empty() ? 0 : SplitDim(dims);
    half[d] = (half[d] + 1) / 2;
    int64_t half_n = NumElements(half);
    std::vector<int64_t> out_strides = RowMajorStrides(dims);
    std::vector<int64_t> idx(half.size(), 0);
    for (int64_t h = 0; h < half_n; ++h) {
      auto [w0, w1] = bits_for(counter + static_cast<uint64_t>(h));
      for (int word = 0; word < 2; ++word) {
        int64_t pos = 2 * idx[d] + word;
        if (!dims.empty() && pos >= dims[d]) continue;  // odd sizes drop the last second word
        if (dims.empty() && word == 1) continue;
        int64_t off = 0;
        for (size_t k = 0; k < dims.size(); ++k)
          off += (static_cast<int64_t>(k) == d ? pos : idx[k]) * out_strides[k];
        uint32_t v = word ? w1 : w0;
        if (width == 32) {
          reinterpret_cast<uint32_t*>(out.data())[off] = v;
        } else if (width == 16) {
          reinterpret_cast<uint16_t*>(out.data())[off] = static_cast<uint16_t>(v);
        } else {
          reinterpret_cast<uint8_t*>(out.data())[off] = static_cast<uint8_t>(v);
        }
      }
      for (int64_t k = static_cast<int64_t>(half.size()) - 1; k >= 0; --k) {
        if (++idx[k] < half[k]) break;
        idx[k] = 0;
      }
    }
    used = static_cast<uint64_t>(half_n);
  }
  Literal new_state(state.type());
  new_state.span<uint64_t>()[0] = key;
  new_state.span<uint64_t>()[1] = counter + used;
  results[0] = std::move(new_state);
  return OkStatus();
}

// "stablehlo.rng_bit_generator %s, algorithm = THREE_FRY : (t) -> (t, t)"
void PrintRng(const Operation& op, OpPrinter& p) {
  p.Print(" ");
  p.PrintOperand(op.operand(0));
  p.Print(", algorithm = " + GetStringAttr(op.attrs(), "rng_algorithm", "DEFAULT"));
  p.PrintOptionalAttrDict(op.attrs(), {"rng_algorithm"});
  p.Print(" : ");
  p.PrintFunctionalType(op);
}

Status ParseRng(OpParser& p, ParsedOp& op) {
  TL_ASSIGN_OR_RETURN(Value s, p.ParseOperand());
  op.operands = {s};
  TL_RETURN_IF_ERROR(p.ParsePunct(","));
  TL_RETURN_IF_ERROR(p.ParseKeyword("algorithm"));
  TL_RETURN_IF_ERROR(p.ParsePunct("="));
  TL_ASSIGN_OR_RETURN(std::string alg, p.ParseIdentifier());
  if (alg != "DEFAULT" && alg != "THREE_FRY" && alg != "PHILOX")
    return p.Error("expected DEFAULT, THREE_FRY or PHILOX, found " + alg);
  op.attrs["rng_algorithm"] = Attribute::Enum(alg, "rng_algorithm");
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  std::vector<Type> inputs;
  return p.ParseFunctionalType(inputs, op.result_types);
}

}  // namespace

void RegisterRngOps(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.rng_bit_generator";
  d.infer = InferRng;
  d.eval = EvalRng;
  d.print = PrintRng;
  d.parse = ParseRng;
  r.Register(std::move(d));
}

}  // namespace tlaloc::ops
