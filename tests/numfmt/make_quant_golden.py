#!/usr/bin/python3
"""Writes quant_golden.h: FNV-1a hashes of the bytes an independent NumPy
implementation of the recipes (te-ops.md section 4) produces for a fixed
pseudo-random 64x64 input, for the C quantizers to reproduce exactly.

Independent of teexec's C code: FP8 / E2M1 encoding is a brute-force
nearest search (ties to the even code) over values decoded from the bit
fields; fl32 arithmetic is NumPy float32; E8M0 round-up uses exact
rationals. Layouts follow te-ops.md 4.4-4.7 (compact scales, padding 0).

Run: /usr/bin/python3 tests/numfmt/make_quant_golden.py > tests/numfmt/quant_golden.h
"""
import struct
from fractions import Fraction

import numpy as np

f32 = np.float32
M = K = 64


def lcg_input():
    s = 2463534242
    x = np.zeros(M * K, dtype=np.float32)
    for i in range(M * K):
        s = (s * 1664525 + 1013904223) % 2 ** 32
        mant = ((s >> 8) & 0xFFFFFF) / 2.0 ** 24 - 0.5
        x[i] = f32(mant * 2.0 ** ((s % 13) - 6))
    x[5] = 0.0
    x[100] = 56.0
    x[777] = f32(1e-40)
    x[1000] = -3e4
    x[2049] = 17.0 / 256.0
    return x.reshape(M, K)


def minifloat_values(exp_bits, man_bits, bias, nan_codes, n):
    vals = []
    for b in range(n):
        if b in nan_codes:
            vals.append(None)
            continue
        sign = -1 if b >> (exp_bits + man_bits) & 1 else 1
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        m = b & ((1 << man_bits) - 1)
        if e == 0:
            v = Fraction(m, 1 << man_bits) * Fraction(2) ** (1 - bias)
        else:
            v = (1 + Fraction(m, 1 << man_bits)) * Fraction(2) ** (e - bias)
        vals.append(sign * v)
    return vals


E4M3 = minifloat_values(4, 3, 7, {0x7F, 0xFF}, 256)
E2M1 = minifloat_values(2, 1, 1, set(), 16)


def encode_nearest(table, y):
    """Round-to-nearest-even onto the finite values of `table`, saturating."""
    y = Fraction(float(y))
    best, best_d = None, None
    for b, v in enumerate(table):
        if v is None:
            continue
        if v == 0 and (b != 0):
            continue  # the +0 code is enough for the search; sign fixed below
        d = abs(v - y)
        if best is None or d < best_d or (d == best_d and b % 2 == 0 and best % 2 == 1):
            best, best_d = b, d
    if table[best] == 0 and y < 0:
        best |= 0x80 if len(table) == 256 else 0x8  # negative zero keeps its sign
    return best


def e8m0_up(v):
    v = Fraction(float(v))
    if v == 0:
        return 0
    k = -127
    while Fraction(2) ** k < v:
        k += 1
    return min(k + 127, 254)


def e4m3_val(b):
    return f32(float(E4M3[b]))


def scale_from_amax(amax, fmt_max, vfi):
    if amax == 0 or np.isinf(amax):
        return f32(1.0)
    s = f32(fmt_max) / f32(amax)
    if np.isinf(s):
        s = vfi
    return f32(s)


def fnv(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) % 2 ** 64
    return h


def fp8_current(x):
    amax = f32(np.max(np.abs(x)))
    s = scale_from_amax(amax, 448.0, f32(3.4028234663852886e38))
    q = bytes(encode_nearest(E4M3, f32(v * s)) for v in x.reshape(-1))
    qt = bytes(encode_nearest(E4M3, f32(v * s)) for v in x.T.reshape(-1))
    return {'fp8_current_row': q, 'fp8_current_col': qt,
            'fp8_current_scale_inv': struct.pack('<f', f32(1.0) / s)}


def fp8_block_1d(x):
    vfi = f32(3.4028234663852886e38)
    out = {}
    for name, mat in (('row', x), ('col', x.T)):
        R, C = mat.shape
        nb = (C + 127) // 128
        sc = np.zeros((nb, (R + 3) // 4 * 4), dtype=np.float32)
        q = bytearray(R * C)
        for r in range(R):
            for j in range(nb):
                blk = mat[r, j * 128:(j + 1) * 128]
                s = scale_from_amax(f32(np.max(np.abs(blk))), 448.0, vfi)
                sc[j, r] = f32(1.0) / s
                for t, v in enumerate(blk):
                    q[r * C + j * 128 + t] = encode_nearest(E4M3, f32(v * s))
        out['block_' + name] = bytes(q)
        out['block_' + name + '_scale'] = sc.tobytes()
    return out


def mxfp8(x):
    rcp = f32(1.0) / f32(448.0)
    out = {}
    rs = np.zeros(((M + 127) // 128 * 128, (K // 32 + 3) // 4 * 4), dtype=np.uint8)
    q = bytearray(M * K)
    for m in range(M):
        for j in range(K // 32):
            blk = x[m, j * 32:(j + 1) * 32]
            e = e8m0_up(f32(f32(np.max(np.abs(blk))) * rcp))
            rs[m, j] = e
            mult = f32(2.0 ** (127 - e))
            for t, v in enumerate(blk):
                q[m * K + j * 32 + t] = encode_nearest(E4M3, f32(v * mult))
    out['mx_row'] = bytes(q)
    out['mx_row_scale'] = rs.tobytes()
    cs = np.zeros(((M // 32 + 3) // 4 * 4, (K + 127) // 128 * 128), dtype=np.uint8)
    q = bytearray(M * K)
    for i in range(M // 32):
        for k in range(K):
            blk = x[i * 32:(i + 1) * 32, k]
            e = e8m0_up(f32(f32(np.max(np.abs(blk))) * rcp))
            cs[i, k] = e
            mult = f32(2.0 ** (127 - e))
            for t, v in enumerate(blk):
                q[(i * 32 + t) * K + k] = encode_nearest(E4M3, f32(v * mult))
    out['mx_col'] = bytes(q)
    out['mx_col_scale'] = cs.tobytes()
    return out


def nvfp4(x):
    out = {}
    for name, mat in (('row', x), ('col', x.T)):
        R, C = mat.shape
        A = f32(np.max(np.abs(mat)))
        s_enc = f32(np.minimum(f32(2688.0) / A, f32(3.4028234663852886e38)))
        s_dec = f32(1.0) / s_enc
        kk = f32(s_enc * (f32(1.0) / f32(6.0)))
        sc = np.zeros(((R + 127) // 128 * 128, ((C + 15) // 16 + 3) // 4 * 4), dtype=np.uint8)
        nib = []
        for r in range(R):
            for j in range((C + 15) // 16):
                blk = mat[r, j * 16:(j + 1) * 16]
                sb = encode_nearest(E4M3, f32(f32(np.max(np.abs(blk))) * kk))
                sc[r, j] = sb
                mult = f32(np.minimum(f32(1.0) / f32(e4m3_val(sb) * s_dec), f32(3.4028234663852886e38)))
                for v in blk:
                    nib.append(encode_nearest(E2M1, f32(v * mult)))
        packed = bytes(nib[2 * i] | (nib[2 * i + 1] << 4) for i in range(len(nib) // 2))
        out['fp4_' + name] = packed
        out['fp4_' + name + '_scale'] = sc.tobytes()
    return out


def rht_input():
    """bf16-exact values: 8-bit mantissas times powers of two."""
    s = 88172645
    x = np.zeros(64 * 32, dtype=np.float32)
    for i in range(64 * 32):
        s = (s * 1664525 + 1013904223) % 2 ** 32
        x[i] = f32(((s >> 24) - 128) / 256.0 * 2.0 ** ((s % 7) - 3))
    x[3 * 32 + 7] = 40.0
    return x.reshape(64, 32)


SIGN = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]


def h_entry(i, j):
    neg = bin(i & j).count('1') % 2
    return Fraction(SIGN[i] * (-1 if neg else 1), 4)


def round_bf16(v):
    if v == 0:
        return f32(0.0)
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (e - 7)
    n = a / quantum
    fl = n.numerator // n.denominator
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    r = fl * quantum
    return f32(float(-r if v < 0 else r))


def nvfp4_rht_col(x):
    Mx, Kx = x.shape
    w = np.zeros((Kx, Mx), dtype=np.float32)
    for k in range(Kx):
        for g in range(Mx // 16):
            v = [Fraction(float(x[g * 16 + i, k])) for i in range(16)]
            for j in range(16):
                w[k, g * 16 + j] = round_bf16(sum(v[i] * h_entry(i, j) for i in range(16)))
    res = nvfp4_rows(w)
    return {'fp4_rht_col': res[0], 'fp4_rht_col_scale': res[1],
            'fp4_rht_col_amax': struct.pack('<f', f32(np.max(np.abs(w))))}


def nvfp4_rows(mat):
    R, C = mat.shape
    A = f32(np.max(np.abs(mat)))
    s_enc = f32(np.minimum(f32(2688.0) / A, f32(3.4028234663852886e38)))
    s_dec = f32(1.0) / s_enc
    kk = f32(s_enc * (f32(1.0) / f32(6.0)))
    sc = np.zeros(((R + 127) // 128 * 128, ((C + 15) // 16 + 3) // 4 * 4), dtype=np.uint8)
    nib = []
    for r in range(R):
        for j in range((C + 15) // 16):
            blk = mat[r, j * 16:(j + 1) * 16]
            sb = encode_nearest(E4M3, f32(f32(np.max(np.abs(blk))) * kk))
            sc[r, j] = sb
            mult = f32(np.minimum(f32(1.0) / f32(e4m3_val(sb) * s_dec), f32(3.4028234663852886e38)))
            for v in blk:
                nib.append(encode_nearest(E2M1, f32(v * mult)))
    packed = bytes(nib[2 * i] | (nib[2 * i + 1] << 4) for i in range(len(nib) // 2))
    return packed, sc.tobytes()


def nvfp4_2d(x):
    A = f32(np.max(np.abs(x)))
    s_enc = f32(np.minimum(f32(2688.0) / A, f32(3.4028234663852886e38)))
    s_dec = f32(1.0) / s_enc
    kk = f32(s_enc * (f32(1.0) / f32(6.0)))
    sc = np.zeros(((M + 127) // 128 * 128, (K // 16 + 3) // 4 * 4), dtype=np.uint8)
    nib = [0] * (M * K)
    for i in range(M // 16):
        for j in range(K // 16):
            tile = x[i * 16:(i + 1) * 16, j * 16:(j + 1) * 16]
            sb = encode_nearest(E4M3, f32(f32(np.max(np.abs(tile))) * kk))
            mult = f32(np.minimum(f32(1.0) / f32(e4m3_val(sb) * s_dec), f32(3.4028234663852886e38)))
            for m in range(i * 16, (i + 1) * 16):
                sc[m, j] = sb
                for k in range(j * 16, (j + 1) * 16):
                    nib[m * K + k] = encode_nearest(E2M1, f32(x[m, k] * mult))
    packed = bytes(nib[2 * i] | (nib[2 * i + 1] << 4) for i in range(len(nib) // 2))
    return {'fp4_2d_row': packed, 'fp4_2d_row_scale': sc.tobytes()}


def main():
    x = lcg_input()
    res = {}
    res.update(fp8_current(x))
    res.update(fp8_block_1d(x))
    res.update(mxfp8(x))
    res.update(nvfp4(x))
    res.update(nvfp4_2d(x))
    res.update(nvfp4_rht_col(rht_input()))
    print('/* quant_golden.h - generated by tests/numfmt/make_quant_golden.py; do not edit.')
    print(' * FNV-1a 64 of each array an independent NumPy reference produced. */')
    print('#ifndef TEEXEC_TESTS_QUANT_GOLDEN_H')
    print('#define TEEXEC_TESTS_QUANT_GOLDEN_H')
    print('#include <stdint.h>')
    for k, v in res.items():
        print('#define GOLDEN_%s 0x%016xull /* %d bytes */' % (k.upper(), fnv(v), len(v)))
    print('#endif')


if __name__ == '__main__':
    main()
