/* Quantized golden models: each models/quant_* folder (written by
 * models/make_quant_models.py from a NumPy reference of the Q/DQ formulas)
 * runs through the public session API on the CPU. Outputs named y* are
 * after a GEMM and must be within rel-L2 1e-6 of expected/<name>.npy (fp32
 * summation order); every other output (quantized bytes, E8M0 scales,
 * dequantized values, computed scales) must equal it byte for byte.
 * The annotation pass (import/quant_annotate.h) must find one annotation
 * per GEMM operand with the format, scale source and block each model was
 * built with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/model_internal.h"
#include "import/quant_annotate.h"
#include "teexec/teexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *source_root(void)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    return root ? root : ".";
}

static teexec_tensor *load(const char *path)
{
    teexec_tensor *t = NULL;
    teexec_status *st = teexec_tensor_load_file(path, &t);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    return t;
}

static double rel_l2(const teexec_tensor *got, const teexec_tensor *want)
{
    teexec_tensor *g = NULL, *w = NULL;
    assert_null(teexec_tensor_cast(got, TEEXEC_DTYPE_DOUBLE, &g));
    assert_null(teexec_tensor_cast(want, TEEXEC_DTYPE_DOUBLE, &w));
    const double *a = teexec_tensor_data_const(g), *b = teexec_tensor_data_const(w);
    double num = 0, den = 0;
    for (uint64_t k = 0; k < teexec_tensor_element_count(w); k++) {
        num += (a[k] - b[k]) * (a[k] - b[k]);
        den += b[k] * b[k];
    }
    teexec_tensor_destroy(g);
    teexec_tensor_destroy(w);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void run_folder(void **state)
{
    const char *folder = *state;
    char dir[4200], path[8192];
    snprintf(dir, sizeof(dir), "%s/models/%s", source_root(), folder);
    snprintf(path, sizeof(path), "%s/model.onnx", dir);
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    teexec_session_options *opt = NULL;
    assert_null(teexec_session_options_create(&opt));
    assert_null(teexec_session_options_set_device(opt, TEEXEC_DEVICE_CPU));
    teexec_session *s = NULL;
    st = teexec_session_create(m, opt, &s);
    teexec_session_options_destroy(opt);
    if (st) fail_msg("%s: session: %s", path, teexec_status_message(st));

    size_t n_in = teexec_model_input_count(m), n_out = teexec_model_output_count(m);
    assert_int_equal(n_in, 1);
    assert_true(n_out >= 2);
    const char *name = teexec_model_input(m, 0)->name;
    snprintf(path, sizeof(path), "%s/inputs/%s.npy", dir, name);
    teexec_tensor *in = load(path);
    teexec_tensor **outs = calloc(n_out, sizeof(*outs));
    assert_non_null(outs);
    st = teexec_session_run(s, 1, &name, (const teexec_tensor *const *)&in, n_out, NULL, outs);
    if (st) fail_msg("%s: run: %s", dir, teexec_status_message(st));

    for (size_t j = 0; j < n_out; j++) {
        const char *on = teexec_model_output(m, j)->name;
        snprintf(path, sizeof(path), "%s/expected/%s.npy", dir, on);
        teexec_tensor *want = load(path);
        int32_t rank = teexec_tensor_rank(want);
        assert_int_equal(teexec_tensor_rank(outs[j]), rank);
        assert_memory_equal(teexec_tensor_dims(outs[j]), teexec_tensor_dims(want),
                            (size_t)rank * sizeof(int64_t));
        if (on[0] == 'y') {
            double r = rel_l2(outs[j], want);
            printf("# %s %s: rel-L2 %.3g\n", folder, on, r);
            if (!(r < 1e-6)) fail_msg("%s output %s: rel-L2 %g >= 1e-6", folder, on, r);
        } else {
            if (teexec_tensor_dtype(outs[j]) != teexec_tensor_dtype(want))
                fail_msg("%s output %s: dtype %d, expected %d", folder, on,
                         (int)teexec_tensor_dtype(outs[j]), (int)teexec_tensor_dtype(want));
            size_t nb = teexec_tensor_byte_size(want);
            assert_int_equal(teexec_tensor_byte_size(outs[j]), nb);
            const uint8_t *a = teexec_tensor_data_const(outs[j]), *b = teexec_tensor_data_const(want);
            size_t diff = 0, first = 0;
            for (size_t k = 0; k < nb; k++)
                if (a[k] != b[k] && diff++ == 0) first = k;
            if (diff)
                fail_msg("%s output %s: %zu bytes differ (first at byte %zu: %u vs %u)", folder, on,
                         diff, first, a[first], b[first]);
            printf("# %s %s: %zu bytes equal\n", folder, on, nb);
        }
        teexec_tensor_destroy(want);
    }
    for (size_t j = 0; j < n_out; j++) teexec_tensor_destroy(outs[j]);
    free(outs);
    teexec_tensor_destroy(in);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

typedef struct ann_want {
    const char *folder;
    tx_qann_format fmt[2];
    tx_qann_scale src[2];
    int64_t block[2];
    bool has_q[2];
} ann_want;

static const ann_want ann_table[] = {
    {"quant_fp8_trt", {TX_QANN_FP8_TENSOR, TX_QANN_FP8_TENSOR},
     {TX_QANN_SCALE_CONSTANT, TX_QANN_SCALE_CONSTANT}, {0, 0}, {true, true}},
    {"quant_fp8_current_trt", {TX_QANN_FP8_TENSOR, TX_QANN_FP8_TENSOR},
     {TX_QANN_SCALE_COMPUTED, TX_QANN_SCALE_COMPUTED}, {0, 0}, {true, true}},
    {"quant_mxfp8_trt", {TX_QANN_MXFP8, TX_QANN_MXFP8},
     {TX_QANN_SCALE_COMPUTED, TX_QANN_SCALE_COMPUTED}, {32, 32}, {true, true}},
    {"quant_std_fp8_int4", {TX_QANN_FP8_TENSOR, TX_QANN_BLOCKED},
     {TX_QANN_SCALE_CONSTANT, TX_QANN_SCALE_CONSTANT}, {0, 16}, {true, false}},
    {"quant_nvfp4", {TX_QANN_NVFP4, TX_QANN_NVFP4},
     {TX_QANN_SCALE_COMPUTED, TX_QANN_SCALE_COMPUTED}, {16, 16}, {true, false}},
};

static void annotate_folder(void **state)
{
    const ann_want *w = *state;
    char path[8192];
    snprintf(path, sizeof(path), "%s/models/%s/model.onnx", source_root(), w->folder);
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    tx_quant_annotation *a = NULL;
    size_t n = 0;
    assert_null(tx_quant_annotate(m->ir->graph, m->file, &a, &n));
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        int k = a[i].operand;
        printf("# %s operand %d: %s block %lld axis %lld scale %s", w->folder, k,
               tx_qann_format_name(a[i].format), (long long)a[i].block_size,
               (long long)a[i].axis,
               a[i].scale_source == TX_QANN_SCALE_CONSTANT ? "constant" : "computed");
        if (a[i].has_scale_value) printf(" = %g", (double)a[i].scale_value);
        printf("\n");
        assert_int_equal(k, (int)i);
        assert_int_equal(a[i].format, w->fmt[k]);
        assert_int_equal(a[i].scale_source, w->src[k]);
        assert_int_equal(a[i].block_size, w->block[k]);
        assert_int_equal(a[i].q_node >= 0, w->has_q[k]);
    }
    if (!strcmp(w->folder, "quant_fp8_trt")) {
        assert_true(a[0].has_scale_value && a[0].scale_value == 2.0f / 448 * 4);
        assert_true(a[1].has_scale_value && a[1].scale_value == 0.75f / 448);
    }
    free(a);
    teexec_model_destroy(m);
}

int main(void)
{
    static const char *folders[] = {"quant_fp8_trt", "quant_fp8_current_trt", "quant_mxfp8_trt",
                                    "quant_std_fp8_int4", "quant_nvfp4"};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(run_folder, (void *)folders[0]),
        cmocka_unit_test_prestate(run_folder, (void *)folders[1]),
        cmocka_unit_test_prestate(run_folder, (void *)folders[2]),
        cmocka_unit_test_prestate(run_folder, (void *)folders[3]),
        cmocka_unit_test_prestate(run_folder, (void *)folders[4]),
        cmocka_unit_test_prestate(annotate_folder, (void *)&ann_table[0]),
        cmocka_unit_test_prestate(annotate_folder, (void *)&ann_table[1]),
        cmocka_unit_test_prestate(annotate_folder, (void *)&ann_table[2]),
        cmocka_unit_test_prestate(annotate_folder, (void *)&ann_table[3]),
        cmocka_unit_test_prestate(annotate_folder, (void *)&ann_table[4]),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
