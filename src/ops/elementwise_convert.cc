// convert, bitcast_convert, reduce_precision and iota.
//   stablehlo.convert %0 : (tensor<4xf32>) -> tensor<4xi32>
//   stablehlo.bitcast_convert %0 : (tensor<4xf32>) -> tensor<4xi32>
//   stablehlo.reduce_precision %0, format = e5m10 : tensor<4xf32>
//   stablehlo.iota dim = 0 : tensor<4xi32>
#include <cstring>
#include <regex>

#include "elementwise_kernels.h"

namespace tlaloc::ops::ew {

namespace {

using Values = std::vector<Value>;

// One element of `convert`. Integers wrap (two's complement truncation); floats round to nearest
// even; float -> integer truncates toward zero, saturates out-of-range values and maps NaN to 0
// (what XLA does; the specification leaves overflow implementation-defined); x -> i1 is x != 0.
template <typename From, typename To>
To ConvertElement(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kIsFloatLike<From>)
      return Up(v) != 0;  // NaN != 0 is true
    else
      return v != 0;
  } else if constexpr (std::is_same_v<From, bool>) {
    return FromDouble<To>(v ? 1.0 : 0.0);
  } else if constexpr (kIsFloatLike<To>) {
    if constexpr (kIsHalfLike<To> && (std::is_same_v<From, float> || kIsHalfLike<From>)) {
      return To(Up(v));  // float (or a half type's exact float) rounds once, straight from its bits
    } else if constexpr (kIsHalfLike<To>) {
      return FromDouble<To>(ToDouble(v));  // one rounding from the (exact for floats) double
    } else if constexpr (kIsHalfLike<From>) {
      return static_cast<To>(v.f());
    } else {
      return static_cast<To>(v);
    }
  } else if constexpr (kIsFloatLike<From>) {
    double d = ToDouble(v);
    if (std::isnan(d)) return 0;
    d = std::trunc(d);
    // Both bounds are powers of two (or zero) and so exact in double.
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi_excl = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
    if (d <= lo) return std::numeric_limits<To>::min();
    if (d >= hi_excl) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else {
    return static_cast<To>(v);  // integer -> integer: modular since C++20
  }
}

void RegisterConvert(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.convert";
  d.traits.writes_all_results = true;
  d.traits.in_place = OpTraits::InPlace::kAnyOperand;  // only an identity conversion matches
  d.traits.elementwise = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
    TL_ASSIGN_OR_RETURN(std::vector<Type> res, DeclaredResults(in, 1));
    if (!res[0].is_tensor() || res[0].tensor.dims != in.operand_types[0].tensor.dims)
      return InvalidArgument("expected a result of the operand's shape " +
                             in.operand_types[0].ToString() + ", got " + res[0].ToString());
    return res;
  };
  d.eval = [](const Operation&, std::span<const Literal> in, std::vector<Literal>& out,
              EvalContext& ctx) -> Status {
    if (in[0].element_type() == out[0].element_type()) {
      out[0] = in[0];  // identity conversion shares the operand's bytes
      return OkStatus();
    }
    // f32 <-> bf16 (a bf16 model's every product and norm) in vectorised bulk: bit for bit
    // ConvertElement's To(Up(v)) and v.f().
    const ElementType from = in[0].element_type(), to = out[0].element_type();
    if ((from == ElementType::kF32 && to == ElementType::kBF16) ||
        (from == ElementType::kBF16 && to == ElementType::kF32)) {
      const std::byte* x = in[0].data();
      std::byte* y = out[0].data();
      const vmath::BulkKernels& bulk = vmath::Bulk();
      ParallelRange(ctx, out[0].num_elements(), [&](int64_t b, int64_t e) {
        if (from == ElementType::kF32)
          bulk.f32_to_bf16(reinterpret_cast<const float*>(x) + b,
                           reinterpret_cast<uint16_t*>(y) + b, e - b);
        else
          bulk.bf16_to_f32(reinterpret_cast<const uint16_t*>(x) + b,
                           reinterpret_cast<float*>(y) + b, e - b);
      });
      return OkStatus();
    }
    return DispatchElementType(in[0].element_type(), [&]<typename From>() -> Status {
      return DispatchElementType(out[0].element_type(), [&]<typename To>() -> Status {
        Map1<From, To>(ctx, in[0], out[0], [](From v) { return ConvertElement<From, To>(v); });
        return OkStatus();
      });
    });
  };
  d.print = [](const Operation& op, OpPrinter& p) { PrintSameTypeOrFunctional(op, p); };
  d.parse = ParseSameTypeOrFunctional;
  d.vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values&,
             const Values& cts) -> StatusOr<Values> {
    if (!IsFloat(x[0].tensor_type().element_type) || !IsFloat(cts[0].tensor_type().element_type))
      return Values{Value()};  // integer values carry no gradient
    Value g = hlo::Convert(b, cts[0], x[0].tensor_type().element_type);
    TL_RETURN_IF_ERROR(b.status());
    return Values{g};
  };
  r.Register(std::move(d));
}

// Bit width for bitcasting (i1 counts as its one byte of storage is not addressable as bits).
int BitcastWidth(ElementType et) { return ElementSize(et) * 8; }

void RegisterBitcastConvert(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.bitcast_convert";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
    TL_ASSIGN_OR_RETURN(std::vector<Type> res, DeclaredResults(in, 1));
    const TensorType& a = in.operand_types[0].tensor;
    if (!res[0].is_tensor()) return InvalidArgument("expected a tensor result");
    const TensorType& t = res[0].tensor;
    if ((a.element_type == ElementType::kPred) != (t.element_type == ElementType::kPred))
      return InvalidArgument(
          "cannot bitcast between i1 and " +
          std::string(
              MlirName(a.element_type == ElementType::kPred ? t.element_type : a.element_type)));
    int in_bits = BitcastWidth(a.element_type), out_bits = BitcastWidth(t.element_type);
    std::vector<int64_t> want = a.dims;
    if (in_bits < out_bits) {
      // Several operand elements make one result element: the last operand dim holds them.
      int64_t ratio = out_bits / in_bits;
      if (a.dims.empty() || a.dims.back() != ratio)
        return InvalidArgument("expected the operand's last dimension to be " +
                               std::to_string(ratio) + " to bitcast " + a.ToString() + " to " +
                               std::string(MlirName(t.element_type)));
      want.pop_back();
    } else if (in_bits > out_bits) {
      want.push_back(in_bits / out_bits);
    }
    if (t.dims != want)
      return InvalidArgument("expected a result of shape [" + DimsToString(want) + "] for " +
                             a.ToString() + ", got " + res[0].ToString());
    return res;
  };
  d.eval = [](const Operation&, std::span<const Literal> in, std::vector<Literal>& out,
              EvalContext&) -> Status {
    // Row-major little-endian bytes are the same on both sides: only the type changes.
    std::memcpy(out[0].data(), in[0].data(), static_cast<size_t>(out[0].byte_size()));
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) { PrintSameTypeOrFunctional(op, p); };
  d.parse = ParseSameTypeOrFunctional;
  r.Register(std::move(d));
}

struct FloatLayout {
  int exponent_bits, mantissa_bits;
};
FloatLayout LayoutOf(ElementType et) {
  switch (et) {
    case ElementType::kF16:
      return {5, 10};
    case ElementType::kBF16:
      return {8, 7};
    case ElementType::kF32:
      return {8, 23};
    default:
      return {11, 52};
  }
}

// Rounds the bit pattern `x` of a float with layout `src` to `exp_bits` exponent and `man_bits`
// mantissa bits (nearest even), keeping the source encoding: values above the reduced range
// become infinity, values at or below its smallest normal exponent become zero (the reduced
// format has no denormals), NaN stays NaN unless no mantissa bit is left to encode it (then it
// becomes +infinity), as XLA and the StableHLO reference interpreter do.
uint64_t ReducePrecisionBits(uint64_t x, int total_bits, FloatLayout src, int exp_bits,
                             int man_bits) {
  const uint64_t sign_mask = uint64_t{1} << (total_bits - 1);
  const uint64_t exp_mask = ((uint64_t{1} << src.exponent_bits) - 1) << src.mantissa_bits;
  const uint64_t man_mask = (uint64_t{1} << src.mantissa_bits) - 1;
  const bool is_nan = (x & exp_mask) == exp_mask && (x & man_mask) != 0;
  uint64_t v = x;
  if (man_bits < src.mantissa_bits) {
    const int shift = src.mantissa_bits - man_bits;
    const uint64_t last_bit = uint64_t{1} << shift;
    const uint64_t bias = ((last_bit >> 1) - 1) + ((v & last_bit) >> shift);
    v = (v + bias) & ~(last_bit - 1);
  }
  if (exp_bits < src.exponent_bits) {
    const int64_t src_bias = (int64_t{1} << (src.exponent_bits - 1)) - 1;
    const int64_t reduced_bias = (int64_t{1} << (exp_bits - 1)) - 1;
    const uint64_t max_exp = static_cast<uint64_t>(src_bias + reduced_bias) << src.mantissa_bits;
    const uint64_t min_exp = static_cast<uint64_t>(src_bias - reduced_bias) << src.mantissa_bits;
    const uint64_t e = v & exp_mask;
    if (e > max_exp)
      v = (v & sign_mask) | exp_mask;
    else if (e <= min_exp)
      v = v & sign_mask;
  }
  if (total_bits < 64) v &= (uint64_t{1} << total_bits) - 1;
  if (is_nan) return man_bits > 0 ? x : exp_mask;  // +inf, as the reference interpreter
  return v;
}

StatusOr<FloatLayout> ReducedFormat(const AttrDict& attrs) {
  int64_t e = GetIntAttr(attrs, "exponent_bits", -1);
  int64_t m = GetIntAttr(attrs, "mantissa_bits", -1);
  if (e < 1 || m < 0 || e > 64 || m > 64)
    return InvalidArgument("expected exponent_bits >= 1 and mantissa_bits >= 0, got " +
                           std::to_string(e) + " and " + std::to_string(m));
  return FloatLayout{static_cast<int>(e), static_cast<int>(m)};
}

void RegisterReducePrecision(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.reduce_precision";
  d.traits.writes_all_results = true;
  d.traits.elementwise = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_RETURN_IF_ERROR(CheckKinds(in.operand_types[0], kFloatK, "operand"));
    TL_RETURN_IF_ERROR(ReducedFormat(in.attrs).status());
    return std::vector<Type>{in.operand_types[0]};
  };
  d.eval = [](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
              EvalContext& ctx) -> Status {
    TL_ASSIGN_OR_RETURN(FloatLayout f, ReducedFormat(op.attrs()));
    ElementType et = in[0].element_type();
    FloatLayout src = LayoutOf(et);
    const int bits = ElementSize(et) * 8;
    auto run = [&]<typename U>() {
      Map1<U, U>(ctx, in[0], out[0], [&](U x) {
        return static_cast<U>(ReducePrecisionBits(x, bits, src, f.exponent_bits, f.mantissa_bits));
      });
    };
    if (bits == 16)
      run.template operator()<uint16_t>();
    else if (bits == 32)
      run.template operator()<uint32_t>();
    else
      run.template operator()<uint64_t>();
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperand(op.operand(0));
    p.Print(", format = e" + std::to_string(GetIntAttr(op.attrs(), "exponent_bits", 0)) + "m" +
            std::to_string(GetIntAttr(op.attrs(), "mantissa_bits", 0)));
    p.PrintOptionalAttrDict(op.attrs(), {"exponent_bits", "mantissa_bits"});
    p.Print(" : ");
    p.PrintType(op.result(0).type());
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Value x, p.ParseOperand());
    op.operands = {x};
    TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_RETURN_IF_ERROR(p.ParseKeyword("format"));
    TL_RETURN_IF_ERROR(p.ParsePunct("="));
    TL_ASSIGN_OR_RETURN(std::string fmt, p.ParseIdentifier());
    static const std::regex kFormat("e([0-9]+)m([0-9]+)");
    std::smatch m;
    if (!std::regex_match(fmt, m, kFormat))
      return p.Error("expected a format like e5m10, got " + fmt);
    // The generic form types both as i32.
    op.attrs["exponent_bits"] = Attribute::Int(std::stoll(m[1].str()), ElementType::kS32);
    op.attrs["mantissa_bits"] = Attribute::Int(std::stoll(m[2].str()), ElementType::kS32);
    return ParseAttrDictAndResultType(p, op);
  };
  r.Register(std::move(d));
}

void RegisterIota(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.iota";
  d.traits.writes_all_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 0));
    TL_ASSIGN_OR_RETURN(std::vector<Type> res, DeclaredResults(in, 1));
    if (!res[0].is_tensor()) return InvalidArgument("expected a tensor result");
    const Attribute* dim = FindAttr(in.attrs, "iota_dimension");
    if (!dim || dim->kind() != Attribute::Kind::kInt)
      return InvalidArgument("expected an integer 'iota_dimension' attribute");
    if (dim->as_int() < 0 || dim->as_int() >= res[0].tensor.rank())
      return InvalidArgument("iota_dimension " + std::to_string(dim->as_int()) +
                             " is out of range for " + res[0].ToString());
    return res;
  };
  d.eval = [](const Operation& op, std::span<const Literal>, std::vector<Literal>& out,
              EvalContext& ctx) -> Status {
    const auto& dims = out[0].dims();
    const int64_t dim = GetIntAttr(op.attrs(), "iota_dimension", 0);
    const int64_t stride = RowMajorStrides(dims)[dim];
    const int64_t size = dims[dim];
    return DispatchElementType(out[0].element_type(), [&]<typename T>() -> Status {
      T* y = out[0].span<T>().data();
      ParallelRange(ctx, out[0].num_elements(), [&](int64_t lo, int64_t hi) {
        // Counters instead of two divisions per element (2 ns each over a 151,936-id vocabulary).
        int64_t index = (lo / stride) % size, within = lo % stride;
        for (int64_t i = lo; i < hi; ++i) {
          y[i] = ConvertElement<int64_t, T>(index);
          if (++within == stride) {
            within = 0;
            if (++index == size) index = 0;
          }
        }
      });
      return OkStatus();
    });
  };
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" dim = " + std::to_string(GetIntAttr(op.attrs(), "iota_dimension", 0)));
    p.PrintOptionalAttrDict(op.attrs(), {"iota_dimension"});
    p.Print(" : ");
    p.PrintType(op.result(0).type());
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_RETURN_IF_ERROR(p.ParseKeyword("dim"));
    TL_RETURN_IF_ERROR(p.ParsePunct("="));
    TL_ASSIGN_OR_RETURN(int64_t dim, p.ParseInteger());
    op.attrs["iota_dimension"] = Attribute::Int(dim, ElementType::kS64);
    return ParseAttrDictAndResultType(p, op);
  };
  r.Register(std::move(d));
}

}  // namespace

void RegisterElementwiseConvertOps(OpRegistry& r) {
  RegisterConvert(r);
  RegisterBitcastConvert(r);
  RegisterReducePrecision(r);
  RegisterIota(r);
}

}  // namespace tlaloc::ops::ew
