/* half.c - binary16 conversions (bit manipulation, no FPU half support needed). */
#include "base/half.h"

float tx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf or NaN (payload kept) */
    } else if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: value = man * 2^-24, exact in float */
            float f = (float)man * 5.9604644775390625e-08f;
            u = sign | tx_f32_bits(f);
        }
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return tx_bits_f32(u);
}

uint16_t tx_f32_to_f16(float f)
{
    uint32_t u = tx_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u; /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24 rounded to an integer */
        if (a < 0x33000000u) return sign; /* below half the smallest subnormal */
        uint32_t exp = a >> 23;
        uint32_t man = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp; /* man * 2^(exp-150) / 2^-24 = man >> (126-exp) */
        uint32_t q = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias exponent, round mantissa 23 -> 10 bits, ties to even */
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    r -= (112u << 23);
    return sign | (uint16_t)(r >> 13);
}
