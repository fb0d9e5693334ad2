/*
 * philox.cuh - Philox4x32-10 on the device, the same function as
 * kernels/cpu/philox.c (same constants, same round order), so a GPU kernel
 * that feeds it the CPU's counter and key gets the CPU's 128 bits.
 * Pure device functions; no state.
 */
#ifndef TEEXEC_KERNELS_CUDA_PHILOX_CUH
#define TEEXEC_KERNELS_CUDA_PHILOX_CUH

#include <stdint.h>

/* out = Philox4x32-10(counter {lo(c), hi(c), lo(stream), hi(stream)},
 * key {lo(seed), hi(seed)}): tx_philox_draw's mapping. */
static __device__ __forceinline__ void tx_dev_philox_draw(uint64_t seed, uint64_t stream,
                                                         uint64_t counter, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int round = 0; round < 10; round++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

#endif
