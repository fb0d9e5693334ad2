/* te_collective.c - the thread's tensor-parallel binding (te_collective.h). */
#include "kernels/cpu/te_collective.h"

static _Thread_local tx_te_collective current = {NULL, NULL, NULL, NULL, 1};

tx_te_collective tx_te_collective_bind(const tx_te_collective *c)
{
    tx_te_collective prev = current;
    if (c) current = *c;
    else current = (tx_te_collective){NULL, NULL, NULL, NULL, 1};
    return prev;
}

const tx_te_collective *tx_te_collective_current(void) { return &current; }
