/* dtype.c - the element-type table. */
#include "base/dtype.h"

#include "base/checked.h"

#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
    unsigned char is_float, is_int, is_signed;
} dtype_table[TEEXEC_DTYPE_COUNT] = {
    [TEEXEC_DTYPE_UNDEFINED] = {"undefined", 0, 0, 0, 0},
    [TEEXEC_DTYPE_FLOAT] = {"float", 32, 1, 0, 1},
    [TEEXEC_DTYPE_UINT8] = {"uint8", 8, 0, 1, 0},
    [TEEXEC_DTYPE_INT8] = {"int8", 8, 0, 1, 1},
    [TEEXEC_DTYPE_UINT16] = {"uint16", 16, 0, 1, 0},
    [TEEXEC_DTYPE_INT16] = {"int16", 16, 0, 1, 1},
    [TEEXEC_DTYPE_INT32] = {"int32", 32, 0, 1, 1},
    [TEEXEC_DTYPE_INT64] = {"int64", 64, 0, 1, 1},
    [TEEXEC_DTYPE_STRING] = {"string", 0, 0, 0, 0},
    [TEEXEC_DTYPE_BOOL] = {"bool", 8, 0, 0, 0},
    [TEEXEC_DTYPE_FLOAT16] = {"float16", 16, 1, 0, 1},
    [TEEXEC_DTYPE_DOUBLE] = {"double", 64, 1, 0, 1},
    [TEEXEC_DTYPE_UINT32] = {"uint32", 32, 0, 1, 0},
    [TEEXEC_DTYPE_UINT64] = {"uint64", 64, 0, 1, 0},
    [TEEXEC_DTYPE_COMPLEX64] = {"complex64", 64, 0, 0, 1},
    [TEEXEC_DTYPE_COMPLEX128] = {"complex128", 128, 0, 0, 1},
    [TEEXEC_DTYPE_BFLOAT16] = {"bfloat16", 16, 1, 0, 1},
    [TEEXEC_DTYPE_FLOAT8E4M3FN] = {"float8e4m3fn", 8, 1, 0, 1},
    [TEEXEC_DTYPE_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 8, 1, 0, 1},
    [TEEXEC_DTYPE_FLOAT8E5M2] = {"float8e5m2", 8, 1, 0, 1},
    [TEEXEC_DTYPE_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 8, 1, 0, 1},
    [TEEXEC_DTYPE_UINT4] = {"uint4", 4, 0, 1, 0},
    [TEEXEC_DTYPE_INT4] = {"int4", 4, 0, 1, 1},
    [TEEXEC_DTYPE_FLOAT4E2M1] = {"float4e2m1", 4, 1, 0, 1},
    [TEEXEC_DTYPE_FLOAT8E8M0] = {"float8e8m0", 8, 1, 0, 0},
    [TEEXEC_DTYPE_UINT2] = {"uint2", 2, 0, 1, 0},
    [TEEXEC_DTYPE_INT2] = {"int2", 2, 0, 1, 1},
};

bool tx_dtype_valid(int dtype)
{
    return dtype > 0 && dtype < TEEXEC_DTYPE_COUNT;
}

const char *teexec_dtype_name(teexec_dtype dtype)
{
    if ((int)dtype < 0 || dtype >= TEEXEC_DTYPE_COUNT) return "undefined";
    return dtype_table[dtype].name;
}

unsigned teexec_dtype_bits(teexec_dtype dtype)
{
    if (!tx_dtype_valid((int)dtype)) return 0;
    return dtype_table[dtype].bits;
}

bool tx_dtype_is_float(teexec_dtype dt)
{
    return tx_dtype_valid((int)dt) && dtype_table[dt].is_float;
}

bool tx_dtype_is_real(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_FLOAT16 || dt == TEEXEC_DTYPE_BFLOAT16 ||
           dt == TEEXEC_DTYPE_DOUBLE;
}

teexec_dtype tx_dtype_stat(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_DOUBLE ? TEEXEC_DTYPE_DOUBLE : TEEXEC_DTYPE_FLOAT;
}

bool tx_dtype_is_integer(teexec_dtype dt)
{
    return tx_dtype_valid((int)dt) && dtype_table[dt].is_int;
}

bool tx_dtype_is_signed(teexec_dtype dt)
{
    return tx_dtype_valid((int)dt) && dtype_table[dt].is_signed;
}

bool tx_dtype_is_subbyte(teexec_dtype dt)
{
    return tx_dtype_valid((int)dt) && dtype_table[dt].bits < 8 && dtype_table[dt].bits > 0;
}

uint64_t tx_dtype_storage_bytes(teexec_dtype dt, uint64_t elements, int *ok)
{
    unsigned bits = teexec_dtype_bits(dt);
    uint64_t total_bits;
    if (bits == 0 || !tx_mul_u64(elements, bits, &total_bits)) {
        if (ok) *ok = 0;
        return 0;
    }
    if (ok) *ok = 1;
    return total_bits / 8 + (total_bits % 8 != 0);
}

int tx_dtype_from_name(const char *name)
{
    if (!name) return -1;
    for (int i = 1; i < TEEXEC_DTYPE_COUNT; i++)
        if (strcmp(dtype_table[i].name, name) == 0) return i;
    return -1;
}
