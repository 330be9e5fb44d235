/* The counter-based generator behind stochastic rounding, exported for tests and for the simulator's own
 * stochastic engines. The arithmetic lives in num_internal.h so the conversion loops inline it; the SIMD kernels
 * compute the same function lane-wise. A draw is a pure function of (seed, counter): no state, no order. */
#include "num/num_internal.h"

uint32_t tern_num_sr_draw(uint64_t seed, uint64_t counter) { return num_draw(num_key_of(seed), counter); }
