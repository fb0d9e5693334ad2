/* numfmt_int.c - float to small/saturated integers (QuantizeLinear rule). */
#include "base/numfmt.h"

#include <math.h>

int64_t tx_f64_to_int_rne_sat(double x, int64_t lo, int64_t hi)
{
    if (isnan(x)) return 0;
    /* Clamp before converting so the C conversion is always defined. */
    if (x <= (double)lo) return lo;
    if (x >= (double)hi) return hi;
    double r = nearbyint(x); /* default rounding mode: ties to even */
    int64_t v = (int64_t)r;
    if (v < lo) return lo;
    if (v > hi) return hi;
    return v;
}

bool tx_subbyte_int_range(teexec_dtype dt, int *lo, int *hi)
{
    switch (dt) {
    case TEEXEC_DTYPE_INT4: *lo = -8; *hi = 7; return true;
    case TEEXEC_DTYPE_UINT4: *lo = 0; *hi = 15; return true;
    case TEEXEC_DTYPE_INT2: *lo = -2; *hi = 1; return true;
    case TEEXEC_DTYPE_UINT2: *lo = 0; *hi = 3; return true;
    default: return false;
    }
}
