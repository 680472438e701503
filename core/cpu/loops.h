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

// body(count, offsets, inner_strides): a row of `count` elements; operand k's element j sits at
// base_k + offsets[k] + j * inner_strides[k].
template <size_t N, typename Body>
void strided_loop(const Shape& shape_in, const std::array<Shape, N>& strides_in, Body&& body, int64_t grain = 32768) {
  // Walk operand 0 (the output) in its memory order: a channels-last output (core/memory_format.h)
  // then runs in long unit-stride rows like a contiguous one. Elementwise bodies do not depend on
  // the order.
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape_in.size(); ++d) {
    if (shape_in[d] == 0) return;
    if (shape_in[d] > 1) dims.push_back(d);  // size-1 dims are dropped
  }
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides_in[0][a] > strides_in[0][b]; });
  // Merge neighbours that are contiguous for every operand.
  Shape shape;
  std::array<Shape, N> st;
  for (size_t d : dims) {
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = st[k].back() == strides_in[k][d] * shape_in[d];
    if (merge) {
      shape.back() *= shape_in[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides_in[k][d];
    } else {
      shape.push_back(shape_in[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides_in[k][d]);
    }
  }
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
