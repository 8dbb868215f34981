// Shared pieces of the data-movement ops: box copies between strided views of two buffers, and
// attribute readers for the structured gather/scatter dimension numbers. Every data-movement op
// (broadcast, transpose, reverse, slice, pad, concatenate, dynamic slices, gather, scatter) is a
// strided copy of some box, so one well-tuned loop serves them all.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

// A strided view of a buffer, in elements: element (i0, ..., in) of the box lives at
// offset + sum(i_k * strides[k]).
struct StridedView {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// At most this rank keeps a box walk's index on the stack; deeper boxes allocate it.
inline constexpr int kStackRank = 8;

// Calls fn(dst_offset, src_offset) at the start of every row of a box of shape `dims` (the rows
// being all its dimensions but the last, whose size is not read), rows [row_begin, row_end),
// outer dimensions like an odometer. Allocates nothing for boxes of rank <= kStackRank.
template <typename Fn>
void ForEachRowStart(const std::vector<int64_t>& dims, int64_t dst_offset,
                     const std::vector<int64_t>& dst_strides, int64_t src_offset,
                     const std::vector<int64_t>& src_strides, int64_t row_begin, int64_t row_end,
                     Fn&& fn) {
  const int rank = static_cast<int>(dims.size());
  if (rank <= 1) {
    if (row_begin == 0 && row_end > 0) fn(dst_offset, src_offset);
    return;
  }
  int64_t stack_idx[kStackRank];
  std::vector<int64_t> heap_idx;
  int64_t* idx = stack_idx;
  if (rank > kStackRank) {
    heap_idx.resize(rank);
    idx = heap_idx.data();
  }
  // Decompose row_begin into the outer multi-index.
  int64_t r = row_begin;
  for (int d = rank - 2; d >= 0; --d) {
    idx[d] = dims[d] ? r % dims[d] : 0;
    r = dims[d] ? r / dims[d] : 0;
  }
  int64_t doff = dst_offset, soff = src_offset;
  for (int d = 0; d < rank - 1; ++d) {
    doff += idx[d] * dst_strides[d];
    soff += idx[d] * src_strides[d];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    fn(doff, soff);
    // Advance the outer index like an odometer.
    for (int d = rank - 2; d >= 0; --d) {
      ++idx[d];
      doff += dst_strides[d];
      soff += src_strides[d];
      if (idx[d] < dims[d]) break;
      doff -= idx[d] * dst_strides[d];
      soff -= idx[d] * src_strides[d];
      idx[d] = 0;
    }
  }
}

// Calls fn(dst_index, src_index) for every element of a box of shape `dims`, innermost dimension
// fastest. Rows [row_begin, row_end) of the box (all dimensions but the last) are visited.
template <typename Fn>
void ForEachBoxRow(const std::vector<int64_t>& dims, const StridedView& dst, const StridedView& src,
                   int64_t row_begin, int64_t row_end, Fn&& fn) {
  if (dims.empty()) {
    if (row_begin == 0 && row_end > 0) fn(dst.offset, src.offset);
    return;
  }
  const int64_t inner = dims.back();
  const int64_t ds = dst.strides.back(), ss = src.strides.back();
  ForEachRowStart(dims, dst.offset, dst.strides, src.offset, src.strides, row_begin, row_end,
                  [&](int64_t doff, int64_t soff) {
                    for (int64_t i = 0; i < inner; ++i) fn(doff + i * ds, soff + i * ss);
                  });
}

// Number of rows (product of all dimensions but the last; 1 for rank <= 1).
inline int64_t BoxRows(const std::vector<int64_t>& dims) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d];
  return dims.empty() ? 1 : rows;
}

// Copies a box of `dims` elements of size `esize` bytes from src to dst through their views.
// Splits rows over ctx's threads when the box is large (ctx may be null: serial).
void CopyBox(std::byte* dst, const StridedView& dst_view, const std::byte* src,
             const StridedView& src_view, const std::vector<int64_t>& dims, int esize,
             EvalContext* ctx);

// A box copy worked out once and run many times (a data-movement op's copy is fixed by its
// attributes and its operands' and result's types; only where a dynamic slice starts varies):
// the box with the dimensions that continue each other on both sides merged, and dimensions of
// size 1 dropped. Running it allocates nothing for merged boxes of rank <= kStackRank, unless
// it is large enough to be split over the pool's threads.
struct BoxCopy {
  std::vector<int64_t> dims;
  StridedView dst, src;
  int esize = 1;
  bool empty = false;  // no elements: nothing to copy
};
BoxCopy PrepareBoxCopy(const StridedView& dst_view, const StridedView& src_view,
                       const std::vector<int64_t>& dims, int esize);
// Runs `copy` with `dst_offset` and `src_offset` elements added to its views' offsets.
void RunBoxCopy(const BoxCopy& copy, std::byte* dst, int64_t dst_offset, const std::byte* src,
                int64_t src_offset, EvalContext* ctx);

// Fills `n` elements of size `esize` at dst with the element at `value`.
void FillElements(std::byte* dst, int64_t n, const std::byte* value, int esize, EvalContext* ctx);

// Reads a scalar integer literal (any integer element type) as int64.
int64_t ScalarIndex(const Literal& l);

// Row-major strides of `dims` as a view at offset 0.
StridedView DenseView(const std::vector<int64_t>& dims);

// Field readers of structured attributes (gather/scatter dimension numbers); a missing field is
// the dialect's default (empty list, 0).
StatusOr<std::vector<int64_t>> StructIntList(const Attribute& s, const std::string& field);
StatusOr<int64_t> StructInt(const Attribute& s, const std::string& field, int64_t fallback);

// What a scatter's update computation does, as recognised by scatter's evaluation
// (data_movement_gather.cc): "replace", "add", ... or "" for any other computation.
std::string ScatterCombinerName(const Operation& scatter);

// "[1, 2]" for messages.
std::string ListToString(const std::vector<int64_t>& v);

}  // namespace tlaloc::ops
