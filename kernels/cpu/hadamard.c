/* hadamard.c - 16-point random Hadamard transform (see hadamard.h). */
#include "kernels/cpu/hadamard.h"

#include "base/half.h"
#include "kernels/cpu/convert.h"

/* nvfp4_tensor.py::get_wgrad_sign_vector, as te-ops.md 4.7 lists it. */
const signed char tx_rht_sign[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

float tx_rht_entry(int i, int j)
{
    int neg = __builtin_popcount((unsigned)(i & j)) & 1;
    float h = neg ? -0.25f : 0.25f;
    return tx_rht_sign[i] < 0 ? -h : h;
}

void tx_rht16(const float v[16], float w[16], teexec_dtype out_type)
{
    double acc[16];
    for (int j = 0; j < 16; j++) {
        double s = 0.0;
        for (int i = 0; i < 16; i++) s += (double)v[i] * (double)tx_rht_entry(i, j);
        acc[j] = s;
    }
    if (out_type == TEEXEC_DTYPE_BFLOAT16) {
        uint16_t b[16];
        /* tx_convert rounds double -> bf16 correctly (no double rounding);
         * it cannot fail for these types */
        teexec_status *st = tx_convert(acc, TEEXEC_DTYPE_DOUBLE, b, TEEXEC_DTYPE_BFLOAT16, 16, NULL);
        teexec_status_destroy(st);
        for (int j = 0; j < 16; j++) w[j] = tx_bf16_to_f32(b[j]);
    } else {
        teexec_status *st = tx_convert(acc, TEEXEC_DTYPE_DOUBLE, w, TEEXEC_DTYPE_FLOAT, 16, NULL);
        teexec_status_destroy(st);
    }
}
