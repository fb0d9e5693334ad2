#!/usr/bin/env python3
"""PyTorch's own GEMMs at the MLP training step's shapes (h=4096, ffn=16384,
8192 tokens by default), in the layouts eager autograd runs them: the
forward F.linear calls and the two backward matmuls of each Linear (dgrad
dy @ w, wgrad dy^T @ x), bf16. The companion of bench/gpu/gemm_study.c: same
shapes, same run, so the two can be compared side by side.

Prints one line per GEMM: median ms of 20 calls (CUDA events) after 5
warm-up calls, and TFLOP/s; then the sum over the step's six GEMMs."""
import argparse

import torch
import torch.nn.functional as F


def timed(fn, reps=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=16384)
    a = ap.parse_args()
    T, H, Fd = a.tokens, a.hidden, a.ffn
    dev, dt = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, device=dev, dtype=dt, generator=g)

    x, w1, b1, w2, b2 = r(T, H), r(Fd, H), r(Fd), r(H, Fd), r(H)
    h, dy, dh = r(T, Fd), r(T, H), r(T, Fd)
    cases = [
        ("fc1_fprop (linear+bias)", lambda: F.linear(x, w1, b1), T, Fd, H),
        ("fc2_fprop (linear+bias)", lambda: F.linear(h, w2, b2), T, H, Fd),
        ("fc2_dgrad dy@w2", lambda: dy @ w2, T, Fd, H),
        ("fc2_wgrad dy^T@h", lambda: dy.t() @ h, H, Fd, T),
        ("fc1_dgrad dh@w1", lambda: dh @ w1, T, H, Fd),
        ("fc1_wgrad dh^T@x", lambda: dh.t() @ x, Fd, H, T),
    ]
    print("torch %s, %s, cuBLAS %s" % (torch.__version__, torch.cuda.get_device_name(),
                                        torch.backends.cudnn.version()))
    total = 0.0
    for name, fn, M, N, K in cases:
        ms = timed(fn)
        total += ms
        print("torch gemm %-26s %5dx%5dx%5d %8.4f ms %6.0f TF/s" % (name, M, N, K, ms,
                                                                    2.0 * M * N * K / ms / 1e9))
    print("torch gemm sum of the six: %.4f ms" % total)
    # the six back to back, as a step would run them
    seq = timed(lambda: [fn() for _, fn, _, _, _ in cases], reps=15, warm=3)
    print("torch gemm sequence of the six: %.4f ms (%.0f TF/s)" % (seq, 6 * 2.0 * T * H * Fd / seq / 1e9))


if __name__ == "__main__":
    main()
