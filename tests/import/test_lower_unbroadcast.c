/* test_lower_unbroadcast.c - import/lower_unbroadcast.c on a real export:
 * the dynamo exporter stores OPT's position rows, expanded over the batch,
 * as one [2, 16, 32] initializer ("embedding_1" of models/zoo/opt_dynamo).
 * Lowered, it is one [1, 16, 32] parameter (broadcast back by its reader,
 * or by an Expand where the reader's other shape is not known); the model
 * computes the same output; a trainer updates one
 * tensor and hands the user back their [2, 16, 32] layout with equal
 * copies. A tensor whose slices differ is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec/model_internal.h"
#include "import/lower.h"
#include "rw_util.h"

#include <stdio.h>
#include <string.h>

#define OPT "models/zoo/opt_dynamo"

static teexec_model *load(const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", rw_source_root(), rel);
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &m), path);
    return m;
}

static void test_opt_positions_become_one_parameter(void **state)
{
    (void)state;
    teexec_model *m = load(OPT);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "rewrite graph");
    tx_tensor before;
    assert_true(tx_rw_constant(g, "embedding_1", &before));
    assert_int_equal(before.rank, 3);
    assert_int_equal(before.dims[0], 2);
    tx_lower_report r = {0};
    rw_ok(tx_lower_unbroadcast(g, &r), "unbroadcast");
    tx_tensor after;
    assert_true(tx_rw_constant(g, "embedding_1", &after));
    assert_int_equal(after.rank, 3);
    assert_int_equal(after.dims[0], 1);
    assert_int_equal(after.dims[1], before.dims[1]);
    assert_int_equal(after.dims[2], before.dims[2]);
    assert_memory_equal(after.data, before.data, after.nbytes);
    bool noted = false;
    for (size_t i = 0; i < r.n_notes; i++)
        noted |= !strcmp(r.notes[i].pattern, "Unbroadcast") && !strcmp(r.notes[i].node, "embedding_1");
    assert_true(noted);
    /* the same numbers */
    teexec_model *lm = rw_emit_load(g);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s/inputs", rw_source_root(), OPT);
    rw_inputs in;
    rw_inputs_npy(m, dir, &in);
    teexec_tensor *oa[RW_MAX_IO], *ob[RW_MAX_IO];
    size_t na = 0, nb = 0;
    rw_ok(rw_run(m, &in, oa, &na), "original");
    rw_ok(rw_run(lm, &in, ob, &nb), "lowered");
    assert_true(rw_rel_l2(ob[0], oa[0]) < 1e-6);
    rw_outputs_free(oa, na);
    rw_outputs_free(ob, nb);
    rw_inputs_free(&in);
    teexec_model_destroy(lm);
    for (size_t i = 0; i < r.n_notes; i++) {
        free(r.notes[i].pattern);
        free(r.notes[i].node);
        free(r.notes[i].reason);
    }
    free(r.notes);
    tx_tensor_release(&before);
    tx_tensor_release(&after);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* A trainer of the user's model: "embedding_1" is one parameter; its value
 * and gradient come back as [2, 16, 32] with both copies equal. */
static void test_trainer_speaks_the_users_layout(void **state)
{
    (void)state;
    teexec_model *m = load(OPT);
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.loss = TEEXEC_LOSS_CROSS_ENTROPY;
    teexec_trainer *t;
    rw_ok(teexec_trainer_create(m, &o, &t), "trainer");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/train.npz", rw_source_root(), OPT);
    teexec_dataset *ds;
    rw_ok(teexec_dataset_load_npz(path, &ds), "train.npz");
    /* rows 0..1 of every array */
    const char *names[4];
    teexec_tensor *ts[4];
    size_t n = teexec_dataset_count(ds);
    assert_true(n <= 4);
    for (size_t i = 0; i < n; i++) {
        const teexec_tensor *a = teexec_dataset_tensor(ds, i);
        int64_t dims[2] = {2, teexec_tensor_dims(a)[1]};
        rw_ok(teexec_tensor_create_copy(teexec_tensor_dtype(a), 2, dims,
                                        teexec_tensor_data_const(a),
                                        teexec_tensor_byte_size(a) / 4, &ts[i]),
              "batch");
        names[i] = teexec_dataset_name(ds, i);
    }
    double loss;
    rw_ok(teexec_trainer_step(t, n, names, (const teexec_tensor *const *)ts, &loss), "step");
    for (int what = 0; what < 2; what++) {
        teexec_tensor *x = NULL;
        rw_ok(what ? teexec_trainer_grad(t, "embedding_1", &x)
                   : teexec_trainer_param(t, "embedding_1", &x),
              "embedding_1");
        assert_int_equal(teexec_tensor_rank(x), 3);
        assert_int_equal(teexec_tensor_dims(x)[0], 2);
        size_t half = teexec_tensor_byte_size(x) / 2;
        const char *p = teexec_tensor_data_const(x);
        assert_memory_equal(p, p + half, half);
        teexec_tensor_destroy(x);
    }
    for (size_t i = 0; i < n; i++) teexec_tensor_destroy(ts[i]);
    teexec_dataset_destroy(ds);
    teexec_trainer_destroy(t);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opt_positions_become_one_parameter),
        cmocka_unit_test(test_trainer_speaks_the_users_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
