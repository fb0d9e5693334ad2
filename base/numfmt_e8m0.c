/* numfmt_e8m0.c - FLOAT8E8M0 (power-of-two scale) encode/decode.
 *
 * Rounding works on the float's exponent field and mantissa directly: a
 * normal float 2^(E-127) * (1 + m/2^23) lies between codes E and E+1.
 * Float subnormals (E = 0) lie below 2^-126; 2^-127 (code 0) is the
 * subnormal with m = 0x400000, which is why they are handled separately.
 */
#include "base/numfmt.h"

#include "base/half.h"

#include <string.h>

float tx_e8m0_to_f32(uint8_t b)
{
    if (b == 0xFF) return tx_bits_f32(0x7fc00000u);
    if (b == 0) return tx_bits_f32(0x00400000u); /* 2^-127, a float subnormal */
    return tx_bits_f32((uint32_t)b << 23);
}

uint8_t tx_f32_to_e8m0(float x, int saturate, tx_e8m0_round mode)
{
    uint32_t a = tx_f32_bits(x) & 0x7fffffffu;
    if (a > 0x7f800000u) return 0xFF;
    if (a == 0x7f800000u) return saturate ? 0xFE : 0xFF;
    if (a == 0) return saturate ? 0x00 : 0xFF;

    uint32_t e = a >> 23;
    uint32_t m = a & 0x7fffffu;
    int code; /* -1: below 2^-127 after rounding */
    if (e == 0) {
        switch (mode) {
        case TX_E8M0_ROUND_UP: code = m <= 0x400000u ? 0 : 1; break;
        case TX_E8M0_ROUND_DOWN: code = m >= 0x400000u ? 0 : -1; break;
        default: /* nearest; midpoints 2^-128 and 1.5*2^-127 go up */
            if (m >= 0x600000u) code = 1;
            else if (m >= 0x200000u) code = 0;
            else code = -1;
            break;
        }
    } else {
        switch (mode) {
        case TX_E8M0_ROUND_UP: code = (int)e + (m != 0); break;
        case TX_E8M0_ROUND_DOWN: code = (int)e; break;
        default: code = (int)e + (m >= 0x400000u); break;
        }
    }
    if (code > 254) return saturate ? 0xFE : 0xFF;
    if (code < 0) return saturate ? 0x00 : 0xFF;
    return (uint8_t)code;
}

int tx_e8m0_round_from_name(const char *name)
{
    if (!name) return -1;
    if (strcmp(name, "up") == 0) return TX_E8M0_ROUND_UP;
    if (strcmp(name, "down") == 0) return TX_E8M0_ROUND_DOWN;
    if (strcmp(name, "nearest") == 0) return TX_E8M0_ROUND_NEAREST;
    return -1;
}
