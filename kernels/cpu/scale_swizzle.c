/* scale_swizzle.c - compact <-> 128x4 swizzled scale layout. */
#include "kernels/cpu/scale_swizzle.h"

static teexec_status *check_shape(uint64_t rows, uint64_t cols, bool transposed)
{
    uint64_t r = transposed ? cols : rows, c = transposed ? rows : cols;
    if (r % 128u != 0 || c % 4u != 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "scale swizzle: %s shape %llu x %llu does not tile into 128x4",
                        transposed ? "transposed" : "compact", (unsigned long long)r,
                        (unsigned long long)c);
    return NULL;
}

teexec_status *tx_scale_swizzle(const uint8_t *compact, uint8_t *swizzled, uint64_t rows,
                                uint64_t cols, bool transposed)
{
    TX_TRY(check_shape(rows, cols, transposed));
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            uint64_t off = transposed ? tx_swizzle_offset(c, r, rows) : tx_swizzle_offset(r, c, cols);
            swizzled[off] = compact[r * cols + c];
        }
    return NULL;
}

teexec_status *tx_scale_unswizzle(const uint8_t *swizzled, uint8_t *compact, uint64_t rows,
                                  uint64_t cols, bool transposed)
{
    TX_TRY(check_shape(rows, cols, transposed));
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            uint64_t off = transposed ? tx_swizzle_offset(c, r, rows) : tx_swizzle_offset(r, c, cols);
            compact[r * cols + c] = swizzled[off];
        }
    return NULL;
}
