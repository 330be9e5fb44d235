/* Private to sim: ScalarE's activation functions. act_eval is the definition (exec_scalar.c: each function in
 * double from the fp32 affine result, rounded once to fp32 by the caller); act_row_simd (act_simd.c) computes
 * rows of the affine step and the function with AVX-512, giving exactly act_eval's values (an exhaustive test
 * over every fp32 input checks each vectorised function: tests/sim/test_act_exhaustive.c). */
#ifndef TERN_SIM_ACT_H
#define TERN_SIM_ACT_H

#include <stddef.h>

#include "tern/isa.h"

/* func(x) in double; x is the fp32 affine result. NaN in gives NaN out for every function. */
double act_eval(tern_act_func f, double x);

/* Can this host (and TERN_SIMD) run act_row_simd: AVX-512 F and DQ? Ask once per instruction, not per row. */
int act_simd_enabled(void);
/* Does act_row_simd compute f? */
int act_simd_has(tern_act_func f);
/* out[i] = (float)act_eval(f, (double)(in[i] * sc + b)) for i < n, the product and the sum each rounded to fp32
 * (never fused; for copy the fp32 sum itself, as the scalar loop); in and out may be the same row. Only when
 * act_simd_enabled() and act_simd_has(f). */
void act_row_simd(tern_act_func f, const float *in, float *out, size_t n, float sc, float b);
/* sums[q] = the fp32 sum of rows[q][0, n) from +0 in element order, for sixteen rows at once (AVX-512; the same
 * condition as act_row_simd: act_simd_enabled()). 0, with nothing written, when a row holds a NaN. */
int act_row_sums16(const float *const rows[16], size_t n, float *sums);

#endif
