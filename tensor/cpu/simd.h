#pragma once
// Hot loops compiled for several x86-64 levels in one binary: a function
// marked PHASOR_SIMD_CLONES gets an AVX-512, an AVX2 and a baseline version,
// and the dynamic loader picks the best the CPU has. Without it the Release
// build (no -march) runs every loop on SSE2. Callers keep the loop in an
// always-inline template and wrap its float32 instance in a marked function.
#if defined(__x86_64__) && defined(__GNUC__)
#define PHASOR_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PHASOR_SIMD_CLONES
#endif
