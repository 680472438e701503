// The strided loop every CPU elementwise kernel runs on: operands with arbitrary (broadcast)
// strides over one output shape, dims coalesced, innermost rows handed to a body, rows split
// across threads. Element order inside a row is fixed, so results never depend on threads.
//   strided_loop<2>(out.shape(), {out.strides(), bstrides(x, out.shape())},
//                   [&](int64_t n, const auto& off, const auto& st) { ... });
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "core/parallel.h"
#include "core/tensor.h"

namespace octet::cpu {

// Strides of `t` seen from `shape` (which t broadcasts to): 0 on broadcast dims.
inline Shape bstrides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  int64_t lead = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) st[lead + i] = t.shape()[i] == 1 && shape[lead + i] != 1 ? 0 : t.strides()[i];
  return st;
}

// A strided loop's dims: those of the shape in operand 0's memory order, size-1 dims dropped and
// neighbours contiguous for every operand merged; the last one is the row. Templated on the
// operand count only: the ~280 loops of the elementwise ops (an op and dtype each) share four
// copies of it. A copy of its sort per loop was most of core/cpu/elementwise.cpp's compile time
// (165 s at -O3 on a Zen 3, 370 s in the sanitizer build; 70 s and 153 s with these four).
template <size_t N>
struct StridedDims {
  bool none = false;  // a dim of size 0: no element
  Shape shape;        // empty: a single element
  std::array<Shape, N> strides;
};

template <size_t N>
StridedDims<N> strided_dims(const Shape& shape_in, const std::array<Shape, N>& strides_in) {
  // Walk operand 0 (the output) in its memory order: a channels-last output (core/memory_format.h)
  // then runs in long unit-stride rows like a contiguous one. Elementwise bodies do not depend on
  // the order.
  StridedDims<N> r;
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape_in.size(); ++d) {
    if (shape_in[d] == 0) {
      r.none = true;
      return r;
    }
    if (shape_in[d] > 1) dims.push_back(d);  // size-1 dims are dropped
  }
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides_in[0][a] > strides_in[0][b]; });
  // Merge neighbours that are contiguous for every operand.
  for (size_t d : dims) {
    bool merge = !r.shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = r.strides[k].back() == strides_in[k][d] * shape_in[d];
    if (merge) {
      r.shape.back() *= shape_in[d];
      for (size_t k = 0; k < N; ++k) r.strides[k].back() = strides_in[k][d];
    } else {
      r.shape.push_back(shape_in[d]);
      for (size_t k = 0; k < N; ++k) r.strides[k].push_back(strides_in[k][d]);
    }
  }
  return r;
}

// body(count, offsets, inner_strides): a row of `count` elements; operand k's element j sits at
// base_k + offsets[k] + j * inner_strides[k].
template <size_t N, typename Body>
void strided_loop(const Shape& shape_in, const std::array<Shape, N>& strides_in, Body&& body, int64_t grain = 32768) {
  const StridedDims<N> dims = strided_dims<N>(shape_in, strides_in);
  if (dims.none) return;
  const Shape& shape = dims.shape;
  const std::array<Shape, N>& st = dims.strides;
  std::array<int64_t, N> zero{}, inner{};
  if (shape.empty()) {
    body(int64_t{1}, zero, zero);
    return;
  }
  int64_t nd = static_cast<int64_t>(shape.size());
  int64_t row = shape.back();
  for (size_t k = 0; k < N; ++k) inner[k] = st[k].back();
  int64_t rows = shape_numel(shape) / row;
  parallel_for(0, rows, std::max<int64_t>(1, grain / row), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(nd - 1);
    std::array<int64_t, N> off{};
    int64_t rem = begin;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * st[k][d];
    }
    for (int64_t r = begin; r < end; ++r) {
      body(row, off, inner);
      for (int64_t d = nd - 2; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) off[k] += st[k][d];
        if (++idx[d] < shape[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= st[k][d] * shape[d];
        idx[d] = 0;
      }
    }
  });
}

// t's data, or null for an undefined (optional) tensor.
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Throws unless every tensor is on the CPU.
inline void check_cpu(const char* op, std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    OCTET_CHECK(!t.defined() || t.device().is_cpu(), op, ": expected a CPU tensor, got one on ", t.device());
}

}  // namespace octet::cpu
