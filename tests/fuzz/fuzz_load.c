/*
 * fuzz_load.c - libFuzzer target for the ONNX loader.
 *
 * The input bytes are loaded as a ModelProto from memory without an
 * external-data folder, every tensor in the model (initializers, attribute
 * tensors, subgraphs, functions, sparse parts) is decoded, and the same
 * bytes are parsed as a TensorProto and decoded too. Errors are expected;
 * crashes, leaks and sanitizer reports are the findings.
 */
#include "format/model_check.h"
#include "format/onnx_load.h"
#include "format/tensor_proto.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static teexec_status *decode_visit(void *ctx, const Onnx__TensorProto *tp,
                                   const tx_tensor_site *site)
{
    (void)site;
    tx_tensor t;
    teexec_status_destroy(tx_tensor_from_proto(tp, ctx, &t));
    tx_tensor_release(&t);
    return NULL; /* keep going: every tensor gets decoded */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tx_onnx_file *f = NULL;
    teexec_status *st = tx_onnx_load_memory(data, size, NULL, NULL, &f);
    if (!st) {
        teexec_status_destroy(tx_model_for_each_tensor(f->model, decode_visit, f));
        tx_external_stat *stats = NULL;
        size_t n = 0;
        teexec_status_destroy(tx_external_stats(f, &stats, &n));
        tx_external_stats_free(stats, n);
    }
    teexec_status_destroy(st);
    tx_onnx_file_free(f);

    Onnx__TensorProto *tp = NULL;
    st = tx_tensor_proto_parse(data, size, NULL, &tp);
    if (!st) {
        tx_tensor t;
        teexec_status_destroy(tx_tensor_from_proto(tp, NULL, &t));
        tx_tensor_release(&t);
    }
    teexec_status_destroy(st);
    tx_tensor_proto_free(tp);
    return 0;
}
