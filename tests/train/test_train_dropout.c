/* test_train_dropout.c - te.ops Dropout in training: the trainer drops with
 * the seeded Philox mask (offset rule: tx_train_rng_offset), backward applies
 * the forward's mask, and an inference session keeps Dropout the identity.
 * Model (in memory, FP64, every operand a graph input so the trainer
 * reports its gradient): x [1, K] -> Linear(w1 [H, K]) -> Dropout(p 0.5)
 * -> Linear(w2 [N, H]) -> y [1, N], loss mean((y - target)^2). One batch
 * row makes row j of d w1 equal dh1[j] * x, so a dropped position j shows
 * as an all-zero row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "../import/model_builder.h"

#include "exec/train_internal.h"
#include "format/te_schema.h"
#include "kernels/cpu/te_args.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DBL ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE
enum { K = 8, H = 64, N = 3, DROP_SEED = 7, N_NODES = 3, DROP_NODE = 1 };

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

static teexec_model *build(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("dropout");
    m->graph = g;
    mb_node(g, "fc1", "Linear", "te.ops", "x,w1", "h1");
    Onnx__NodeProto *d = mb_node(g, "drop", "Dropout", "te.ops", "h1", "h2");
    mb_attr_float(d, "p", 0.5f);
    mb_attr_int(d, "seed", DROP_SEED);
    mb_node(g, "fc2", "Linear", "te.ops", "h2,w2", "y");
    mb_input(g, "x", DBL, "1,8");
    mb_input(g, "w1", DBL, "64,8");
    mb_input(g, "w2", DBL, "3,64");
    mb_output(g, "y", DBL, "1,3");
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_model *model;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &model));
    free(bytes);
    mb_free_all();
    return model;
}

typedef struct data {
    double x[K], w1[H * K], w2[N * H], tg[N];
    teexec_tensor *ts[4];
    const char *names[4];
} data;

static void make_data(data *dd)
{
    for (int i = 0; i < K; i++) dd->x[i] = urand();
    for (int i = 0; i < H * K; i++) dd->w1[i] = urand();
    for (int i = 0; i < N * H; i++) dd->w2[i] = urand();
    for (int i = 0; i < N; i++) dd->tg[i] = urand();
    static const int64_t dx[2] = {1, K}, dw1[2] = {H, K}, dw2[2] = {N, H}, dt[2] = {1, N};
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 2, dx, dd->x, sizeof dd->x, &dd->ts[0]));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 2, dw1, dd->w1, sizeof dd->w1, &dd->ts[1]));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 2, dw2, dd->w2, sizeof dd->w2, &dd->ts[2]));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 2, dt, dd->tg, sizeof dd->tg, &dd->ts[3]));
    dd->names[0] = "x";
    dd->names[1] = "w1";
    dd->names[2] = "w2";
    dd->names[3] = "target";
}

static void free_data(data *dd)
{
    for (int i = 0; i < 4; i++) teexec_tensor_destroy(dd->ts[i]);
}

static teexec_trainer *trainer(const teexec_model *m, uint64_t seed)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    o.weight_decay = 0;
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    o.seed = seed;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    return tr;
}

/* The mask of step `step` drawn by calling the Dropout forward directly
 * with the trainer's offset rule: keep[j] = 1 when kept. */
static void mask_for(uint64_t seed, uint64_t step, int keep[H])
{
    const tx_te_op_schema *s = tx_te_schema_find("Dropout");
    assert_non_null(s);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    attrs[TX_TE_A_DROPOUT_P].f = 0.5;
    attrs[TX_TE_A_DROPOUT_SEED].i = DROP_SEED;
    int64_t dims[2] = {1, H}, mdims[1] = {(H + 7) / 8};
    tx_tensor in, out, mask;
    ok(tx_tensor_alloc(&in, TEEXEC_DTYPE_DOUBLE, 2, dims));
    ok(tx_tensor_alloc(&out, TEEXEC_DTYPE_DOUBLE, 2, dims));
    ok(tx_tensor_alloc(&mask, TEEXEC_DTYPE_UINT8, 1, mdims));
    for (int j = 0; j < H; j++) ((double *)in.data)[j] = 1.0;
    tx_tensor *auxp[1] = {&mask};
    tx_te_fwd_args a;
    memset(&a, 0, sizeof a);
    a.op = s->id;
    a.attrs = attrs;
    a.input = &in;
    a.output = &out;
    a.aux = auxp;
    a.n_aux = 1;
    a.training = true;
    a.rng_offset = tx_train_rng_offset(seed, step, N_NODES, DROP_NODE);
    ok(tx_te_cpu_forward(&a));
    const uint8_t *mb = mask.data;
    for (int j = 0; j < H; j++) {
        keep[j] = (mb[j / 8] >> (j % 8)) & 1;
        /* the applied output agrees with the saved mask: 1/(1-p) or 0 */
        assert_true(((double *)out.data)[j] == (keep[j] ? 2.0 : 0.0));
    }
    tx_tensor_release(&in);
    tx_tensor_release(&out);
    tx_tensor_release(&mask);
}

static void check_grad(teexec_trainer *tr, const char *name, const double *want, size_t n)
{
    teexec_tensor *g;
    ok(teexec_trainer_grad(tr, name, &g));
    assert_int_equal(teexec_tensor_element_count(g), n);
    const double *got = teexec_tensor_data_const(g);
    for (size_t i = 0; i < n; i++) {
        if (!(fabs(got[i] - want[i]) <= 1e-12 * (1 + fabs(want[i]))))
            fprintf(stderr, "%s[%zu]: got %.17g want %.17g\n", name, i, got[i], want[i]);
        assert_true(fabs(got[i] - want[i]) <= 1e-12 * (1 + fabs(want[i])));
    }
    teexec_tensor_destroy(g);
}

/* One step at lr 0: loss and gradients equal an FP64 computation with the
 * directly drawn mask; dropped positions get zero gradient. */
static void test_grads_use_mask(void **st)
{
    (void)st;
    teexec_model *m = build();
    data dd;
    make_data(&dd);
    const uint64_t seed = 1234;
    int keep[H];
    mask_for(seed, 0, keep);
    int dropped = 0;
    for (int j = 0; j < H; j++) dropped += !keep[j];
    /* p = 0.5 over 64 elements: far outside [16, 48] would mean a broken draw */
    assert_in_range(dropped, 16, 48);

    double h1[H], h2[H], y[N], dy[N], dh1[H], gw1[H * K], gw2[N * H], gx[K];
    for (int j = 0; j < H; j++) {
        h1[j] = 0;
        for (int k = 0; k < K; k++) h1[j] += dd.x[k] * dd.w1[j * K + k];
        h2[j] = keep[j] ? h1[j] * 2.0 : 0.0;
    }
    double loss = 0;
    for (int o = 0; o < N; o++) {
        y[o] = 0;
        for (int j = 0; j < H; j++) y[o] += h2[j] * dd.w2[o * H + j];
        loss += (y[o] - dd.tg[o]) * (y[o] - dd.tg[o]) / N;
        dy[o] = 2.0 * (y[o] - dd.tg[o]) / N;
    }
    for (int j = 0; j < H; j++) {
        double dh2 = 0;
        for (int o = 0; o < N; o++) {
            dh2 += dy[o] * dd.w2[o * H + j];
            gw2[o * H + j] = dy[o] * h2[j];
        }
        dh1[j] = keep[j] ? dh2 * 2.0 : 0.0;
        for (int k = 0; k < K; k++) gw1[j * K + k] = dh1[j] * dd.x[k];
    }
    for (int k = 0; k < K; k++) {
        gx[k] = 0;
        for (int j = 0; j < H; j++) gx[k] += dh1[j] * dd.w1[j * K + k];
    }

    teexec_trainer *tr = trainer(m, seed);
    double got_loss;
    ok(teexec_trainer_step(tr, 4, dd.names, (const teexec_tensor *const *)dd.ts, &got_loss));
    assert_true(fabs(got_loss - loss) <= 1e-12 * (1 + loss));
    check_grad(tr, "w1", gw1, H * K);
    check_grad(tr, "w2", gw2, N * H);
    check_grad(tr, "x", gx, K);
    /* dropped positions: the trainer's d w1 rows are exactly zero, kept
     * ones are not (x has no zero entry) */
    teexec_tensor *g;
    ok(teexec_trainer_grad(tr, "w1", &g));
    const double *gd = teexec_tensor_data_const(g);
    for (int j = 0; j < H; j++) {
        bool zero = true;
        for (int k = 0; k < K; k++) zero = zero && gd[j * K + k] == 0.0;
        assert_true(zero == !keep[j]);
    }
    teexec_tensor_destroy(g);

    /* the second step draws another mask (the offset moves with the step) */
    int keep1[H], same = 1;
    mask_for(seed, 1, keep1);
    for (int j = 0; j < H; j++) same = same && keep1[j] == keep[j];
    assert_false(same);

    teexec_trainer_destroy(tr);
    free_data(&dd);
    teexec_model_destroy(m);
}

static void losses(const teexec_model *m, data *dd, uint64_t seed, double out[3])
{
    teexec_trainer *tr = trainer(m, seed);
    for (int s = 0; s < 3; s++)
        ok(teexec_trainer_step(tr, 4, dd->names, (const teexec_tensor *const *)dd->ts, &out[s]));
    teexec_trainer_destroy(tr);
}

/* Same seed: identical losses over 3 steps; another seed: different ones
 * (and the steps differ from each other, since each draws its own mask). */
static void test_seed_reproducible(void **st)
{
    (void)st;
    teexec_model *m = build();
    data dd;
    make_data(&dd);
    double a[3], b[3], c[3];
    losses(m, &dd, 42, a);
    losses(m, &dd, 42, b);
    losses(m, &dd, 43, c);
    for (int s = 0; s < 3; s++) {
        assert_true(a[s] == b[s]);
        assert_true(a[s] != c[s]);
    }
    assert_true(a[0] != a[1] && a[1] != a[2]);
    free_data(&dd);
    teexec_model_destroy(m);
}

/* An inference session keeps Dropout the identity: y = w2 · (w1 · x). */
static void test_session_identity(void **st)
{
    (void)st;
    teexec_model *m = build();
    data dd;
    make_data(&dd);
    teexec_session *sess;
    teexec_session_options *so;
    ok(teexec_session_options_create(&so));
    ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU));
    ok(teexec_session_create(m, so, &sess));
    teexec_session_options_destroy(so);
    teexec_tensor *y;
    ok(teexec_session_run(sess, 3, dd.names, (const teexec_tensor *const *)dd.ts, 1, NULL, &y));
    const double *got = teexec_tensor_data_const(y);
    for (int o = 0; o < N; o++) {
        double want = 0;
        for (int j = 0; j < H; j++) {
            double h = 0;
            for (int k = 0; k < K; k++) h += dd.x[k] * dd.w1[j * K + k];
            want += h * dd.w2[o * H + j];
        }
        assert_true(fabs(got[o] - want) <= 1e-12 * (1 + fabs(want)));
    }
    teexec_tensor_destroy(y);
    teexec_session_destroy(sess);
    free_data(&dd);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grads_use_mask),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_session_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
