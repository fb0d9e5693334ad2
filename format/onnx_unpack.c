/* onnx_unpack.c - pre-scan then budgeted protobuf-c unpack. */
#include "format/onnx_unpack.h"

#include "base/checked.h"
#include "format/wire_scan.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct budget {
    uint64_t left;
    bool exceeded;
    bool oom;
} budget;

/* Frees go straight to free(): the budget caps what unpack may take in
 * total, it is not a live-bytes gauge, so nothing is given back. That lets
 * the message be freed later without this allocator. */
static void *budget_alloc(void *data, size_t size)
{
    budget *b = data;
    if (size > b->left) {
        b->exceeded = true;
        return NULL;
    }
    b->left -= size;
    void *p = malloc(size ? size : 1);
    if (!p) b->oom = true;
    return p;
}

static void budget_free(void *data, void *ptr)
{
    (void)data;
    free(ptr);
}

uint64_t tx_unpack_budget(size_t size)
{
    uint64_t b;
    if (!tx_mul_u64((uint64_t)size, TX_UNPACK_BUDGET_FACTOR, &b) ||
        !tx_add_u64(b, TX_UNPACK_BUDGET_SLACK, &b))
        return UINT64_MAX;
    return b;
}

teexec_status *tx_protobuf_unpack(const ProtobufCMessageDescriptor *desc, const void *data,
                                  size_t size, const teexec_load_options *limits,
                                  ProtobufCMessage **out)
{
    *out = NULL;
    TX_TRY(tx_wire_scan(data, size, desc, limits, NULL));
    budget b = {tx_unpack_budget(size), false, false};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    ProtobufCMessage *msg = protobuf_c_message_unpack(desc, &alloc, size, data);
    if (!msg) {
        if (b.exceeded)
            return tx_error(TEEXEC_ERR_LIMIT,
                            "unpacking %zu bytes needs more than the unpack memory budget of "
                            "%llu bytes (%dx the input + 64 MiB)",
                            size, (unsigned long long)tx_unpack_budget(size),
                            TX_UNPACK_BUDGET_FACTOR);
        if (b.oom) return tx_oom();
        return tx_error(TEEXEC_ERR_BAD_MODEL, "protobuf-c could not parse the %s message",
                        desc->short_name);
    }
    *out = msg;
    return NULL;
}
