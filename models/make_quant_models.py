#!/usr/bin/python3
"""Writes models/quant_*/ : small ONNX models with TE's `trt` Q/DQ ops and
standard FP8/INT4/FP4 Q/DQ, their inputs, and expected outputs computed by
a NumPy reference of the formulas in kernels/cpu/qdq.h (float32 arithmetic,
one rounding per operation; GEMMs in float64). ONNX 1.12's helper lacks the
dtype enums 17..24, so tensors and value infos are built by hand.

Outputs named q_* / dq_* / s_* are quantized or dequantized tensors that
must match bit for bit; `y` is after the GEMM (rel-L2 < 1e-6).
Run: /usr/bin/python3 models/make_quant_models.py
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32
E4M3, E8M0, FP4, INT4 = 17, 24, 23, 22

# ---- NumPy reference codecs -------------------------------------------------


def _grid_e4m3():
    v = []
    for code in range(127):  # 0x7F is NaN
        e, m = code >> 3, code & 7
        v.append(m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.array(v)


GRID_E4M3 = _grid_e4m3()
GRID_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def _encode_grid(x, grid, nan_code, sign_shift):
    """RNE onto a positive grid (codes = indices), saturating to the top."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    out = np.zeros(x.shape, dtype=np.uint8)
    for idx, v in np.ndenumerate(x):
        if np.isnan(v):
            out[idx] = nan_code
            continue
        a = min(abs(v), grid[-1])
        hi = int(np.searchsorted(grid, a))
        if hi == 0 or grid[hi] == a:
            code = hi
        else:
            lo = hi - 1
            dl, dh = a - grid[lo], grid[hi] - a
            code = lo if dl < dh else hi if dh < dl else (lo if lo % 2 == 0 else hi)
        out[idx] = code | ((1 << sign_shift) if np.signbit(v) else 0)
    return out


def e4m3_encode(x):
    return _encode_grid(x, GRID_E4M3, 0x7F, 7)


def e4m3_decode(b):
    b = np.asarray(b, dtype=np.uint8)
    mag = GRID_E4M3[np.minimum(b & 0x7F, 126)]
    mag = np.where((b & 0x7F) == 0x7F, np.nan, mag)
    return np.where(b & 0x80, -mag, mag).astype(F32)


def e2m1_encode(x):
    return _encode_grid(x, GRID_E2M1, 0x7, 3)


def e2m1_decode(n):
    n = np.asarray(n, dtype=np.uint8)
    mag = GRID_E2M1[n & 7]
    return np.where(n & 8, -mag, mag).astype(F32)


def e8m0_up_sat(v):
    v = np.asarray(v, dtype=np.float32).astype(np.float64)
    out = np.zeros(v.shape, dtype=np.uint8)
    for idx, a in np.ndenumerate(v):
        if a == 0:
            continue
        m, ex = np.frexp(a)
        e = ex - 1 if m == 0.5 else ex
        out[idx] = min(max(e + 127, 0), 254)
    return out


def e8m0_decode(b):
    return (2.0 ** (np.asarray(b, dtype=np.float64) - 127)).astype(F32)


def pack4(n):
    n = np.asarray(n, dtype=np.uint8).reshape(-1)
    if n.size % 2:
        n = np.append(n, 0)
    return (n[0::2] & 15) | ((n[1::2] & 15) << 4)


# ---- reference quantizers (qdq.h formulas) ------------------------------------


def trt_fp8_q(x, s):
    return e4m3_encode(F32(x) / F32(s))


def trt_fp8_dq(q, s):
    return e4m3_decode(q) * F32(s)


def mxfp8_q(x):
    K = x.shape[-1]
    x2 = x.reshape(-1, K).astype(F32)
    M = x2.shape[0]
    rcp = F32(1) / F32(448)
    sc = np.zeros(((M + 127) // 128 * 128, (K // 32 + 3) // 4 * 4), dtype=np.uint8)
    q = np.zeros(x2.shape, dtype=np.uint8)
    for m in range(M):
        for j in range(K // 32):
            blk = x2[m, j * 32:(j + 1) * 32]
            e = int(e8m0_up_sat(F32(np.max(np.abs(blk))) * rcp))
            sc[m, j] = e
            mult = F32(2.0 ** (127 - e))  # e in 1..253 here: exact
            q[m, j * 32:(j + 1) * 32] = e4m3_encode(blk * mult)
    return q.reshape(x.shape), sc


def mxfp8_dq(q, sc):
    K = q.shape[-1]
    q2 = q.reshape(-1, K)
    y = np.zeros(q2.shape, dtype=F32)
    for m in range(q2.shape[0]):
        y[m] = e4m3_decode(q2[m]) * np.repeat(e8m0_decode(sc[m, :K // 32]), 32)
    return y.reshape(q.shape)


def nvfp4_q(x, g):
    """TRT_FP4DynamicQuantize / NVFP4 with global decode scale g."""
    K = x.shape[-1]
    x2 = x.reshape(-1, K).astype(F32)
    g = F32(g)
    enc6 = (F32(1) / g) * (F32(1) / F32(6))
    q = np.zeros(x2.shape, dtype=np.uint8)
    sc = np.zeros((x2.shape[0], K // 16), dtype=np.uint8)
    for m in range(x2.shape[0]):
        for j in range(K // 16):
            blk = x2[m, j * 16:(j + 1) * 16]
            sb = e4m3_encode(F32(np.max(np.abs(blk))) * enc6)
            sc[m, j] = sb
            with np.errstate(divide='ignore'):
                mult = F32(1) / (e4m3_decode(sb) * g)
            mult = min(mult, np.finfo(F32).max)
            q[m, j * 16:(j + 1) * 16] = e2m1_encode(blk * F32(mult))
    return q.reshape(x.shape), sc.reshape(x.shape[:-1] + (K // 16,))


def dq_blocked(qvals, scale, axis, block):
    s = np.repeat(scale, block, axis=axis)
    return (qvals.astype(F32) * s.astype(F32)).astype(F32)


# ---- ONNX building helpers ------------------------------------------------------


def tensor(name, dtype, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def f32_init(name, a):
    a = np.asarray(a, dtype=F32)
    return tensor(name, TensorProto.FLOAT, a.shape, a.tobytes())


def i64_init(name, a):
    a = np.asarray(a, dtype=np.int64)
    return tensor(name, TensorProto.INT64, a.shape, a.tobytes())


def vinfo(name, dtype, dims):
    v = onnx.ValueInfoProto()
    v.name = name
    tt = v.type.tensor_type
    tt.elem_type = dtype
    for d in dims:
        tt.shape.dim.add().dim_value = d
    return v


def save(name, nodes, inits, inputs, outputs, feeds, expected, opset=21):
    g = helper.make_graph(nodes, name, [vinfo(*i) for i in inputs],
                          [vinfo(*o) for o in outputs], initializer=inits)
    m = helper.make_model(g, producer_name='make_quant_models.py',
                          opset_imports=[helper.make_opsetid('', opset),
                                         helper.make_opsetid('trt', 1)])
    m.ir_version = 10 if opset >= 21 else 8
    d = os.path.join(HERE, 'quant_' + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, 'inputs'))
    os.makedirs(os.path.join(d, 'expected'))
    with open(os.path.join(d, 'model.onnx'), 'wb') as f:
        f.write(m.SerializeToString())
    for k, v in feeds.items():
        np.save(os.path.join(d, 'inputs', k + '.npy'), v)
    for k, v in expected.items():
        np.save(os.path.join(d, 'expected', k + '.npy'), v)


def te_linear_nodes(x_scale_name, w_scale_name, B, T, K, N):
    """Cast -> TRT_FP8Q -> TRT_FP8DQ -> Cast on both operands, Reshape, Gemm."""
    return [
        helper.make_node('Cast', ['x'], ['xc'], to=1),
        helper.make_node('TRT_FP8QuantizeLinear', ['xc', x_scale_name], ['q_x'], domain='trt'),
        helper.make_node('TRT_FP8DequantizeLinear', ['q_x', x_scale_name], ['dqx'], domain='trt'),
        helper.make_node('Cast', ['dqx'], ['dqxc'], to=1),
        helper.make_node('Reshape', ['dqxc', 'shape2d'], ['x2d']),
        helper.make_node('Cast', ['w'], ['wc'], to=1),
        helper.make_node('TRT_FP8QuantizeLinear', ['wc', w_scale_name], ['q_w'], domain='trt'),
        helper.make_node('TRT_FP8DequantizeLinear', ['q_w', w_scale_name], ['dqw'], domain='trt'),
        helper.make_node('Cast', ['dqw'], ['dqwc'], to=1),
        helper.make_node('Gemm', ['x2d', 'dqwc', 'b'], ['y2d'], transB=1),
        helper.make_node('Reshape', ['y2d', 'shape3d'], ['y']),
    ]


def main():
    rng = np.random.default_rng(5)
    B, T, K, N = 2, 4, 64, 32
    x = (rng.standard_normal((B, T, K)) * 3).astype(F32)
    x[0, 0, :4] = [0.0, -0.0, 1000.0, -1e-9]  # saturation, zeros, tiny
    w = (rng.standard_normal((N, K)) * 0.2).astype(F32)
    b = (rng.standard_normal(N) * 0.1).astype(F32)

    def linear_ref(dqx, dqw):
        y = dqx.reshape(-1, K).astype(np.float64) @ dqw.astype(np.float64).T + b
        return y.reshape(B, T, N).astype(F32)

    # (a) TE FP8 delayed scaling: constant scale_inv.
    sx, sw = F32(2.0 / 448 * 4), F32(0.75 / 448)
    qx, qw = trt_fp8_q(x, sx), trt_fp8_q(w, sw)
    save('fp8_trt', te_linear_nodes('sx', 'sw', B, T, K, N),
         [f32_init('w', w), f32_init('b', b), f32_init('sx', sx), f32_init('sw', sw),
          i64_init('shape2d', [-1, K]), i64_init('shape3d', [B, T, N])],
         [('x', 1, [B, T, K])],
         [('y', 1, [B, T, N]), ('q_x', 2, [B, T, K]), ('q_w', 2, [N, K])],
         {'x': x},
         {'y': linear_ref(trt_fp8_dq(qx, sx), trt_fp8_dq(qw, sw)), 'q_x': qx, 'q_w': qw})

    # (b) current scaling: scale_inv = max(amax, 1e-12) / 448, computed in the graph.
    def cur_scale(v):
        return F32(max(F32(np.max(np.abs(v))), F32(1e-12))) / F32(448)

    xb = x.copy()
    xb[0, 0, 2] = 5.0
    csx, csw = cur_scale(xb), cur_scale(w)
    nodes = []
    for src, dst in (('x', 'sx'), ('w', 'sw')):
        nodes += [helper.make_node('Cast', [src], [src + '_c0'], to=1),
                  helper.make_node('Abs', [src + '_c0'], [src + '_abs']),
                  helper.make_node('ReduceMax', [src + '_abs'], [src + '_amax'], keepdims=0),
                  helper.make_node('Max', [src + '_amax', 'eps'], [src + '_amaxe']),
                  helper.make_node('Div', [src + '_amaxe', 'fp8max'], [dst])]
    save('fp8_current_trt', nodes + te_linear_nodes('sx', 'sw', B, T, K, N),
         [f32_init('w', w), f32_init('b', b), f32_init('eps', F32(1e-12)),
          f32_init('fp8max', F32(448)), i64_init('shape2d', [-1, K]),
          i64_init('shape3d', [B, T, N])],
         [('x', 1, [B, T, K])],
         [('y', 1, [B, T, N]), ('q_x', 2, [B, T, K]), ('q_w', 2, [N, K]), ('sx', 1, [])],
         {'x': xb},
         {'y': linear_ref(trt_fp8_dq(trt_fp8_q(xb, csx), csx), trt_fp8_dq(trt_fp8_q(w, csw), csw)),
          'q_x': trt_fp8_q(xb, csx), 'q_w': trt_fp8_q(w, csw), 'sx': np.array(csx, dtype=F32)})

    # (c) MXFP8 through TRT_MXFP8DynamicQuantize / TRT_MXFP8DequantizeLinear.
    mqx, msx = mxfp8_q(x)
    mqw, msw = mxfp8_q(w)
    nodes = [
        helper.make_node('Cast', ['x'], ['xc'], to=1),
        helper.make_node('TRT_MXFP8DynamicQuantize', ['xc'], ['q_x', 's_x'], domain='trt'),
        helper.make_node('TRT_MXFP8DequantizeLinear', ['q_x', 's_x'], ['dqx'], domain='trt'),
        helper.make_node('Cast', ['dqx'], ['dqxc'], to=1),
        helper.make_node('Reshape', ['dqxc', 'shape2d'], ['x2d']),
        helper.make_node('TRT_MXFP8DynamicQuantize', ['w'], ['q_w', 's_w'], domain='trt'),
        helper.make_node('TRT_MXFP8DequantizeLinear', ['q_w', 's_w'], ['dqw'], domain='trt'),
        helper.make_node('Gemm', ['x2d', 'dqw', 'b'], ['y2d'], transB=1),
        helper.make_node('Reshape', ['y2d', 'shape3d'], ['y']),
    ]
    save('mxfp8_trt', nodes,
         [f32_init('w', w), f32_init('b', b), i64_init('shape2d', [-1, K]),
          i64_init('shape3d', [B, T, N])],
         [('x', 1, [B, T, K])],
         [('y', 1, [B, T, N]), ('q_x', 2, [B, T, K]), ('s_x', 2, list(msx.shape)),
          ('s_w', 2, list(msw.shape))],
         {'x': x},
         {'y': linear_ref(mxfp8_dq(mqx, msx), mxfp8_dq(mqw, msw)), 'q_x': mqx, 's_x': msx,
          's_w': msw})

    # (d) standard QuantizeLinear (E4M3FN) on x; blocked INT4 weight DQ (axis 0, block 16).
    s_std = F32(3.0 / 448)
    q_std = e4m3_encode(x / s_std)
    dqx_std = e4m3_decode(q_std) * s_std
    wkn = rng.integers(-8, 8, size=(K, N)).astype(np.int8)
    wscale = (rng.random((K // 16, N)) * 0.05 + 0.01).astype(F32)
    wzp = rng.integers(-2, 3, size=(K // 16, N)).astype(np.int8)
    dqw_std = ((wkn.astype(F32) - np.repeat(wzp, 16, axis=0).astype(F32)) *
               np.repeat(wscale, 16, axis=0)).astype(F32)
    y_std = (dqx_std.astype(np.float64) @ dqw_std.astype(np.float64)).astype(F32)
    nodes = [
        helper.make_node('QuantizeLinear', ['x', 'sx'], ['qx'], output_dtype=E4M3),
        helper.make_node('DequantizeLinear', ['qx', 'sx'], ['dq_x']),
        helper.make_node('DequantizeLinear', ['w_int4', 'w_scale', 'w_zp'], ['dq_w'], axis=0,
                         block_size=16),
        helper.make_node('MatMul', ['dq_x', 'dq_w'], ['y']),
    ]
    save('std_fp8_int4', nodes,
         [f32_init('sx', s_std),
          tensor('w_int4', INT4, [K, N], pack4(wkn.astype(np.uint8) & 15).tobytes()),
          f32_init('w_scale', wscale),
          tensor('w_zp', INT4, [K // 16, N], pack4(wzp.astype(np.uint8) & 15).tobytes())],
         [('x', 1, [B, T, K])],
         [('y', 1, [B, T, N]), ('dq_x', 1, [B, T, K]), ('dq_w', 1, [K, N])],
         {'x': x}, {'y': y_std, 'dq_x': dqx_std, 'dq_w': dqw_std})

    # (e) NVFP4: FP4 weight initializer + E4M3 scales + FP32 global scale
    # (two DQs), activation through TRT_FP4DynamicQuantize.
    x2 = x.reshape(-1, K)
    gw = F32(np.max(np.abs(w))) / F32(6) / F32(448)
    gx = F32(np.max(np.abs(x2))) / F32(6) / F32(448)
    qw4, sw4 = nvfp4_q(w, gw)
    qx4, sx4 = nvfp4_q(x2, gx)
    dqw4 = dq_blocked(e2m1_decode(qw4), e4m3_decode(sw4) * gw, 1, 16)
    dqx4 = dq_blocked(e2m1_decode(qx4), e4m3_decode(sx4) * gx, 1, 16)
    y4 = (dqx4.astype(np.float64) @ dqw4.astype(np.float64).T).astype(F32)
    nodes = [
        helper.make_node('DequantizeLinear', ['w_scale_e4m3', 'w_global'], ['w_scale_f32']),
        helper.make_node('DequantizeLinear', ['w_fp4', 'w_scale_f32'], ['dq_w'], axis=-1,
                         block_size=16),
        helper.make_node('TRT_FP4DynamicQuantize', ['x', 'x_global'], ['qx', 'qx_scale'],
                         domain='trt', axis=-1, block_size=16, scale_type=E4M3),
        helper.make_node('DequantizeLinear', ['qx_scale', 'x_global'], ['x_scale_f32']),
        helper.make_node('DequantizeLinear', ['qx', 'x_scale_f32'], ['dq_x'], axis=-1,
                         block_size=16),
        helper.make_node('Gemm', ['dq_x', 'dq_w'], ['y'], transB=1),
    ]
    save('nvfp4', nodes,
         [tensor('w_fp4', FP4, [N, K], pack4(qw4).tobytes()),
          tensor('w_scale_e4m3', E4M3, [N, K // 16], sw4.tobytes()),
          f32_init('w_global', gw), f32_init('x_global', gx)],
         [('x', 1, [B * T, K])],
         [('y', 1, [B * T, N]), ('dq_x', 1, [B * T, K]), ('dq_w', 1, [N, K])],
         {'x': x2}, {'y': y4, 'dq_x': dqx4, 'dq_w': dqw4}, opset=23)


if __name__ == '__main__':
    main()
