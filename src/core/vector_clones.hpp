// Loops built once for each vector width an x86-64 CPU may have (AVX-512, AVX2 with FMA, else SSE2), the build that
// runs chosen when the program loads (GCC's target_clones): crema's binaries are built for the baseline x86-64, where
// a loop would otherwise vectorise for SSE2 only. CREMA_VECTOR_CLONES goes before such a function, and
// CREMA_ALWAYS_INLINE on the helpers it calls, so that each build inlines them at its own width. Other compilers
// (clang, in the sanitizer and fuzzing builds) and other CPUs get one plain build.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CREMA_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#define CREMA_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CREMA_VECTOR_CLONES
#define CREMA_ALWAYS_INLINE inline
#endif
