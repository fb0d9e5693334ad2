/* numfmt_fp4.c - FLOAT4E2M1 encode/decode (bias 1, no Inf/NaN, max 6). */
#include "base/numfmt.h"

#include "base/half.h"

static const float e2m1_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float tx_e2m1_to_f32(uint8_t nibble)
{
    float v = e2m1_values[nibble & 7u];
    return (nibble & 8u) ? -v : v;
}

uint8_t tx_f32_to_e2m1(float x)
{
    uint32_t u = tx_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 28) & 8u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7; /* NaN -> +6 (ONNX float4.md) */
    float m = tx_bits_f32(a);
    /* Decision points are the midpoints between neighbours; at a midpoint
     * the code with an even mantissa bit (even code) wins. */
    uint8_t code;
    if (m < 0.25f) code = 0;
    else if (m == 0.25f) code = 0;        /* tie 0 / 0.5 -> 0 */
    else if (m < 0.75f) code = 1;
    else if (m == 0.75f) code = 2;        /* tie 0.5 / 1 -> 1 */
    else if (m < 1.25f) code = 2;
    else if (m == 1.25f) code = 2;        /* tie 1 / 1.5 -> 1 */
    else if (m < 1.75f) code = 3;
    else if (m == 1.75f) code = 4;        /* tie 1.5 / 2 -> 2 */
    else if (m < 2.5f) code = 4;
    else if (m == 2.5f) code = 4;         /* tie 2 / 3 -> 2 */
    else if (m < 3.5f) code = 5;
    else if (m == 3.5f) code = 6;         /* tie 3 / 4 -> 4 */
    else if (m <= 5.0f) code = 6;         /* tie 4 / 6 -> 4 */
    else code = 7;                        /* saturate, Inf included */
    return (uint8_t)(sign | code);
}
