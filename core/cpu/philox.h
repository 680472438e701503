// Philox4x32-10 (core/generator.h) over runs of consecutive counters, vectorized (AVX2: eight
// counters per register, four interleaved; 2.5-4.5 ns per counter on a Zen 3 against 18-22 for
// philox_at in a loop, and 11 for the compiler's vectorization of the rounds on arrays). Bit for
// bit the words of philox_at on every ISA of core/cpu/isa.h; tests/core/test_philox.cpp compares
// every word.
//   cpu::philox_words(seed, ctr, n, out);        // out[4 b + w] = word w of counter ctr + b
//   cpu::philox_first_words(seed, ctr, n, out);  // out[b] = word 0 of counter ctr + b
#pragma once

#include <cstdint>

namespace octet::cpu {

void philox_words(uint64_t seed, uint64_t ctr, int64_t blocks, uint32_t* out);
// Word 0 alone: what a draw of one value per element uses (dropout's keep decisions, uniform f32).
void philox_first_words(uint64_t seed, uint64_t ctr, int64_t blocks, uint32_t* out);

}  // namespace octet::cpu
