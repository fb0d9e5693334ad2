/*
 * half.h - IEEE binary16 (float16) and bfloat16 scalar conversions.
 *
 * float -> half/bfloat16 rounds to nearest, ties to even; NaN stays NaN
 * (quiet), overflow goes to infinity, as IEEE and PyTorch do.
 * half/bfloat16 -> float is exact. Pure functions, thread-safe.
 */
#ifndef TEEXEC_BASE_HALF_H
#define TEEXEC_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tx_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float tx_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float tx_bf16_to_f32(uint16_t h)
{
    return tx_bits_f32((uint32_t)h << 16);
}

static inline uint16_t tx_f32_to_bf16(float f)
{
    uint32_t u = tx_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding) >> 16);
}

float tx_f16_to_f32(uint16_t h);
uint16_t tx_f32_to_f16(float f);

#endif
