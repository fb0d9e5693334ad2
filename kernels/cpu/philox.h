/*
 * philox.h - Philox4x32-10 counter-based random numbers (Salmon et al.,
 * "Parallel random numbers: as easy as 1, 2, 3", SC'11), the generator
 * cuRAND's Philox also uses.
 *
 * A draw is a pure function of (counter, key): any thread, CPU or GPU, that
 * knows an element's counter gets the same 128 bits, which is what lets
 * CUDA dropout and stochastic rounding reproduce the CPU reference bit for
 * bit. How teexec maps elements to counters is documented where the draws
 * are used (kernels/cpu/quant_nvfp4.c: one counter per 16 elements).
 *
 * Pure functions, thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_PHILOX_H
#define TEEXEC_KERNELS_CPU_PHILOX_H

#include <stdint.h>

/* out = Philox4x32-10(ctr, key). */
void tx_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Convenience: counter {lo(c), hi(c), lo(stream), hi(stream)}, key
 * {lo(seed), hi(seed)}. */
void tx_philox_draw(uint64_t seed, uint64_t stream, uint64_t counter, uint32_t out[4]);

#endif
