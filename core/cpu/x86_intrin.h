#pragma once
// <immintrin.h> for the files with AVX-512 kernels (x86 builds only). GCC 12's AVX-512 headers build
// unmasked intrinsics on a self-initialized "undefined" vector, which -Wuninitialized reports once
// they are inlined into a kernel (GCC bug 105593); the values are never read. The warnings are off
// from here to the end of the including file, as they fire where the intrinsics inline, not here.
// Clang has no such report (nor -Wmaybe-uninitialized).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
