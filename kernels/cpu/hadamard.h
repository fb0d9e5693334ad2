/*
 * hadamard.h - the 16-point random Hadamard transform (RHT) NVFP4 applies
 * to its columnwise (wgrad) operands (te-ops.md 4.7).
 *
 * H = (1/4) * diag(s) * H16, H16 the Sylvester Hadamard matrix
 * (H16[i][j] = (-1)^popcount(i & j)), s Transformer Engine's fixed sign
 * vector. A 16-vector v becomes w = v * H: w[j] = sum_i v[i] * H[i][j].
 * The sum is accumulated in double in the order i = 0..15 (exact unless
 * the 16 terms span more than ~2^45 in magnitude) and rounded once, to
 * nearest even, to `out_type` (BFLOAT16 like TE's unfused transform, or
 * FLOAT), and returned as floats. Pure functions; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_HADAMARD_H
#define TEEXEC_KERNELS_CPU_HADAMARD_H

#include "teexec/teexec.h"

extern const signed char tx_rht_sign[16];

/* H[i][j] (+-0.25). */
float tx_rht_entry(int i, int j);

/* w = round(v * H). v and w may alias. out_type: FLOAT or BFLOAT16
 * (anything else is treated as FLOAT). */
void tx_rht16(const float v[16], float w[16], teexec_dtype out_type);

#endif
