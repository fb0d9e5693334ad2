/*
 * mlp_model.h - the in-memory MLP the serving GPU tests run (test_gpu_device_io,
 * test_gpu_shared_weights): y = relu(... relu(x W0) ... W{L-1}), x [N, d]
 * with N symbolic, square fp32 weights of small deterministic values
 * (hash of the index and the layer, times `scale`; `salt` keeps the two
 * tests' weights apart). Header-only, over tests/import/model_builder.h,
 * which the including test includes once; fails the test (cmocka) if the
 * model does not load. Not thread-safe (model_builder's arena).
 */
#ifndef TEEXEC_TESTS_GPU_MLP_MODEL_H
#define TEEXEC_TESTS_GPU_MLP_MODEL_H

#include "teexec/teexec.h"
#include "tests/import/model_builder.h"

#include <stdio.h>
#include <stdlib.h>

static teexec_model *tg_mlp_model(const char *graph_name, int d, int layers, unsigned salt,
                                  float scale)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph(graph_name);
    m->graph = g;
    char dims[64];
    snprintf(dims, sizeof dims, "N,%d", d);
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims);
    mb_output(g, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims);
    const int64_t wd[2] = {d, d};
    for (int l = 0; l < layers; l++) {
        char w[16], in[16], mm[16], out[16], name[16], ins[40];
        snprintf(w, sizeof w, "w%d", l);
        snprintf(in, sizeof in, l ? "h%d" : "x", l);
        snprintf(mm, sizeof mm, "m%d", l);
        snprintf(out, sizeof out, l == layers - 1 ? "y" : "h%d", l + 1);
        mb_init(g, w, wd, 2);
        /* small deterministic weights (mb_init's are 0, 1, 2, ...) */
        Onnx__TensorProto *t = g->initializer[g->n_initializer - 1];
        float *v = (float *)t->raw_data.data;
        for (size_t i = 0; i < (size_t)d * (size_t)d; i++)
            v[i] = (float)((int)((i * 2654435761u + (size_t)l * salt) % 2001u) - 1000) * scale;
        snprintf(ins, sizeof ins, "%s,%s", in, w);
        snprintf(name, sizeof name, "mm%d", l);
        mb_node(g, name, "MatMul", NULL, ins, mm);
        snprintf(name, sizeof name, "relu%d", l);
        mb_node(g, name, "Relu", NULL, mm, out);
    }
    size_t size = 0;
    uint8_t *buf = mb_pack(m, &size);
    mb_free_all();
    teexec_model *model = NULL;
    teexec_status *st = teexec_model_load_memory(buf, size, NULL, NULL, &model);
    free(buf);
    if (st) {
        fprintf(stderr, "loading the built model: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
    return model;
}

#endif
