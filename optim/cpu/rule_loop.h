// The CPU loop of an update rule (optim/update_rules.h) over one block of a parameter's state,
// compiled for each ISA of core/cpu/isa.h: what cpu::rule_update (optim/cpu/update.cpp) runs over
// ParamState::for_each_block (any state kind: dense, 8-bit, custom).
//   state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { apply_rule(isa, rule, p, g, b); }));
#pragma once

#include "core/cpu/isa.h"
#include "optim/optimizer.h"
#include "optim/update_rules.h"

namespace octet {

// The CPU loop over one block of N state buffers: each element's state values go through
// registers (s), so the rule sees the same values whatever the state's storage.
// The rule is copied to a local: the compiler then knows that stores to p and the buffers
// cannot change its scalars, keeps them in registers and vectorizes the loop.
// A block whose gradient is all finite (the usual case, found by a vectorized scan) runs the rule
// as is; a block with a non-finite element runs update_element, which skips it (update_rules.h):
// the selects in one loop would keep the compiler from vectorizing the rule.
template <int N, typename Rule, typename T>
[[gnu::always_inline]] inline void rule_loop(const Rule& rule_ref, T* p, const T* g, int64_t n, T* const* buffers) {
  const Rule rule = rule_ref;
  T* buf[N > 0 ? N : 1] = {};
  for (int k = 0; k < N; ++k) buf[k] = buffers[k];
  int non_finite = 0;
  for (int64_t i = 0; i < n; ++i) non_finite |= !finite_grad(g[i]);
  if (non_finite == 0) {
    for (int64_t i = 0; i < n; ++i) {
      T s[kMaxStateBuffers] = {};
      for (int k = 0; k < N; ++k) s[k] = buf[k][i];
      rule(p[i], g[i], s);
      for (int k = 0; k < N; ++k) buf[k][i] = s[k];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    T s[kMaxStateBuffers] = {};
    for (int k = 0; k < N; ++k) s[k] = buf[k][i];
    update_element<N>(rule, p[i], g[i], s);
    for (int k = 0; k < N; ++k) buf[k][i] = s[k];
  }
}

// The same loop compiled for each ISA of core/cpu/isa.h (flatten: the rule is inlined and so
// compiled with the wider vectors); the same IEEE operations in the same order, so every copy
// gives the same bits.
template <int N, typename Rule, typename T>
void rule_loop_portable(const Rule& rule, T* p, const T* g, int64_t n, T* const* buffers) {
  rule_loop<N>(rule, p, g, n, buffers);
}
#ifdef OCTET_CPU_X86
template <int N, typename Rule, typename T>
[[gnu::flatten]] OCTET_TARGET_AVX2 void rule_loop_avx2(const Rule& rule, T* p, const T* g, int64_t n,
                                                       T* const* buffers) {
  rule_loop<N>(rule, p, g, n, buffers);
}
template <int N, typename Rule, typename T>
[[gnu::flatten]] OCTET_TARGET_AVX512 void rule_loop_avx512(const Rule& rule, T* p, const T* g, int64_t n,
                                                           T* const* buffers) {
  rule_loop<N>(rule, p, g, n, buffers);
}
#endif

template <int N, typename Rule, typename T>
void apply_rule_block(cpu::Isa isa, const Rule& rule, T* p, const T* g, int64_t n, T* const* buffers) {
#ifdef OCTET_CPU_X86
  if (isa == cpu::Isa::avx512) return rule_loop_avx512<N>(rule, p, g, n, buffers);
  if (isa == cpu::Isa::avx2) return rule_loop_avx2<N>(rule, p, g, n, buffers);
#endif
  rule_loop_portable<N>(rule, p, g, n, buffers);
}

// `rule` over block b of the parameter p with gradient g (both pointing at element 0), with the
// loop compiled for `isa`.
template <typename Rule, typename T>
void apply_rule(cpu::Isa isa, const Rule& rule, T* p, const T* g, const StateBlock<T>& b) {
  switch (rule.buffers) {
    case 0:
      return apply_rule_block<0>(isa, rule, p + b.begin, g + b.begin, b.n, b.buffers);
    case 1:
      return apply_rule_block<1>(isa, rule, p + b.begin, g + b.begin, b.n, b.buffers);
    case 2:
      return apply_rule_block<2>(isa, rule, p + b.begin, g + b.begin, b.n, b.buffers);
    case 3:
      return apply_rule_block<3>(isa, rule, p + b.begin, g + b.begin, b.n, b.buffers);
    default:
      OCTET_FAIL("optimizer: a rule with ", rule.buffers, " state buffers (at most ", kMaxStateBuffers, ")");
  }
}

}  // namespace octet
