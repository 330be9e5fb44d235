/* Shared helpers for kernel-layer tests: a core for a catalogue machine, seeded random data rounded to a
 * dtype, and a float64 GEMM reference with a per-element error bound. */
#ifndef TERN_TESTS_KERNEL_UTIL_H
#define TERN_TESTS_KERNEL_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "tern/kernel.h"
#include "tern/sim.h"

static inline uint64_t ktu_rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), rounded to dtype's value set (so the reference sees exactly what the device sees). */
static inline void ktu_fill(float *x, size_t n, tern_dtype dt, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        float v = (float)((double)(ktu_rng(&s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        x[i] = tern_num_round_f32(dt, v, NULL, 0);
    }
}

static inline tern_core *ktu_core(const char *machine, tern_core_config *cfg)
{
    tern_error err;
    if (tern_core_config_load(machine, cfg, &err)) {
        fprintf(stderr, "cannot load %s: %s\n", machine, err.msg);
        exit(2);
    }
    tern_core *core = NULL;
    tern_core_options o = {0};
    o.fill_nan = 1;
    if (tern_core_create(cfg, &o, &core, &err)) {
        fprintf(stderr, "cannot create core: %s\n", err.msg);
        exit(2);
    }
    return core;
}

#endif
