// Shape manipulation: reshape, transpose, broadcasting, slicing, concatenation, padding.
#include "builder/internal.h"

namespace tlaloc {

using namespace builder_internal;

Tensor Reshape(const Tensor& x, const std::vector<int64_t>& dims) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  std::vector<int64_t> d = dims;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] == -1) {
      if (infer_at >= 0) {
        b->Fail(InvalidArgument("Reshape: at most one dimension may be -1"));
        return Tensor();
      }
      infer_at = static_cast<int64_t>(i);
    } else {
      known *= d[i];
    }
  }
  int64_t n = x.type().num_elements();
  if (infer_at >= 0) d[infer_at] = known == 0 ? 0 : n / known;
  if (NumElements(d) != n) {
    b->Fail(InvalidArgument("Reshape: cannot reshape [" + DimsToString(x.dims()) + "] to [" +
                            DimsToString(dims) + "]"));
    return Tensor();
  }
  if (d == x.dims()) return x;
  return Wrap(b, hlo::Reshape(*b, x.value(), TensorType(x.element_type(), d)));
}

Tensor Transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity && static_cast<int64_t>(perm.size()) == x.rank()) return x;
  return Wrap(b, hlo::Transpose(*b, x.value(), perm));
}

Tensor BroadcastInDim(const Tensor& x, const std::vector<int64_t>& dims,
                      const std::vector<int64_t>& broadcast_dimensions) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  return Wrap(b, hlo::BroadcastInDim(*b, x.value(), TensorType(x.element_type(), dims),
                                     broadcast_dimensions));
}

Tensor BroadcastTo(const Tensor& x, const std::vector<int64_t>& dims) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  if (x.dims() == dims) return x;
  int64_t offset = static_cast<int64_t>(dims.size()) - x.rank();
  if (offset < 0) {
    b->Fail(InvalidArgument("BroadcastTo: cannot broadcast [" + DimsToString(x.dims()) +
                            "] to fewer dimensions [" + DimsToString(dims) + "]"));
    return Tensor();
  }
  // Size-1 dimensions that must stretch are dropped first so broadcast_in_dim maps 1:1.
  std::vector<int64_t> kept_dims, bdims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t target = dims[offset + i];
    if (x.dims()[i] == target) {
      kept_dims.push_back(target);
      bdims.push_back(offset + i);
    } else if (x.dims()[i] != 1) {
      b->Fail(InvalidArgument("BroadcastTo: cannot broadcast [" + DimsToString(x.dims()) +
                              "] to [" + DimsToString(dims) + "]"));
      return Tensor();
    }
  }
  Tensor y = Reshape(x, kept_dims);
  return BroadcastInDim(y, dims, bdims);
}

Tensor ExpandDims(const Tensor& x, int64_t axis) {
  if (!x.valid()) return Tensor();
  int64_t a = NormalizeAxis(x.builder(), axis, x.rank() + 1);
  std::vector<int64_t> d = x.dims();
  d.insert(d.begin() + a, 1);
  return Reshape(x, d);
}

Tensor Squeeze(const Tensor& x, int64_t axis) {
  if (!x.valid()) return Tensor();
  int64_t a = NormalizeAxis(x.builder(), axis, x.rank());
  if (x.dims()[a] != 1) {
    x.builder()->Fail(InvalidArgument("Squeeze: dimension " + std::to_string(a) + " is not 1"));
    return Tensor();
  }
  std::vector<int64_t> d = x.dims();
  d.erase(d.begin() + a);
  return Reshape(x, d);
}

Tensor Slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
             const std::vector<int64_t>& strides) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  std::vector<int64_t> s = strides.empty() ? std::vector<int64_t>(start.size(), 1) : strides;
  return Wrap(b, hlo::Slice(*b, x.value(), start, limit, s));
}

Tensor SliceAxis(const Tensor& x, int64_t axis, int64_t begin, int64_t end) {
  if (!x.valid()) return Tensor();
  int64_t a = NormalizeAxis(x.builder(), axis, x.rank());
  std::vector<int64_t> start(x.rank(), 0), limit = x.dims();
  start[a] = begin;
  limit[a] = end;
  return Slice(x, start, limit);
}

Tensor DynamicSlice(const Tensor& x, const std::vector<Tensor>& starts,
                    const std::vector<int64_t>& sizes) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  std::vector<Value> start_values;
  for (const Tensor& s : starts) start_values.push_back(s.value());
  return Wrap(b, hlo::DynamicSlice(*b, x.value(), start_values, sizes));
}

Tensor DynamicUpdateSlice(const Tensor& x, const Tensor& update, const std::vector<Tensor>& starts) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  std::vector<Value> start_values;
  for (const Tensor& s : starts) start_values.push_back(s.value());
  return Wrap(b, hlo::DynamicUpdateSlice(*b, x.value(), update.value(), start_values));
}

Tensor Concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty() || !xs[0].builder()) return Tensor();
  OpBuilder* b = xs[0].builder();
  if (xs.size() == 1) return xs[0];
  std::vector<Value> operands;
  for (const Tensor& t : xs) operands.push_back(t.value());
  int64_t a = NormalizeAxis(b, axis, xs[0].rank());
  return Wrap(b, hlo::Concatenate(*b, std::move(operands), a));
}

Tensor Pad(const Tensor& x, const Tensor& value, const std::vector<int64_t>& low,
           const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  std::vector<int64_t> in = interior.empty() ? std::vector<int64_t>(low.size(), 0) : interior;
  return Wrap(b, hlo::Pad(*b, x.value(), value.value(), low, high, in));
}

Tensor Reverse(const Tensor& x, const std::vector<int64_t>& axes) {
  OpBuilder* b = x.builder();
  if (!b || !x.valid()) return Tensor();
  return Wrap(b, hlo::Reverse(*b, x.value(), axes));
}

}  // namespace tlaloc
