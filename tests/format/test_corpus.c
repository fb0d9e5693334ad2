/*
 * Walks the libonnx-testdata corpus: every model.onnx under node/, simple/,
 * pytorch-converted/ and pytorch-operator/ must load, and every
 * test_data_set_K/input_N.pb and output_N.pb must match graph input/output N:
 * a tensor-typed value decodes with exactly the declared elem_type and fixed
 * dims; sequence/optional/map values are recognized and counted, not decoded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/onnx_load.h"
#include "format/tensor_proto.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct totals {
    unsigned models, tensors, sequences, optionals, maps, others, failures;
    unsigned known_bf16, known_like; /* tolerated corpus defects, see check_tensor_file */
} totals;

static void note_failure(totals *t, const char *fmt, ...) TX_PRINTF(2, 3);
static void note_failure(totals *t, const char *fmt, ...)
{
    if (t->failures++ < 40) {
        char buf[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        print_message("FAIL %s\n", buf);
    }
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    *size = n;
    return buf;
}

static int is_initializer(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name)) return 1;
    return 0;
}

/* Graph input N as the corpus numbers them: inputs that are initializers
 * (old exports list weights as inputs too) are not fed from .pb files. In
 * this corpus (52 such models) they always follow the fed inputs, so this
 * numbering and ONNX's runner's plain graph.input[N] agree. */
static const Onnx__ValueInfoProto *nth_input(const Onnx__GraphProto *g, unsigned n)
{
    unsigned k = 0;
    for (size_t i = 0; i < g->n_input; i++) {
        if (is_initializer(g, g->input[i]->name ? g->input[i]->name : "")) continue;
        if (k++ == n) return g->input[i];
    }
    return NULL;
}

/* Two defects of the ONNX 1.12 test data are tolerated, counted and
 * printed: numpy had no bfloat16 then, so bfloat16 values were saved as
 * uint16 tensors holding the bit patterns; and CastLike's second input
 * ("like", only its type matters) was saved as a one-element tensor while
 * the model declares the full shape. */
static void check_tensor_file(totals *t, const char *path, const Onnx__TypeProto__Tensor *tt)
{
    size_t size = 0;
    uint8_t *bytes = read_file(path, &size);
    if (!bytes) {
        note_failure(t, "%s: cannot read", path);
        return;
    }
    Onnx__TensorProto *tp = NULL;
    teexec_status *st = tx_tensor_proto_parse(bytes, size, NULL, &tp);
    free(bytes);
    if (st) {
        note_failure(t, "%s: %s", path, teexec_status_message(st));
        teexec_status_destroy(st);
        return;
    }
    tx_tensor ten;
    st = tx_tensor_from_proto(tp, NULL, &ten);
    if (st) {
        note_failure(t, "%s: %s", path, teexec_status_message(st));
        teexec_status_destroy(st);
        tx_tensor_proto_free(tp);
        return;
    }
    int like = strstr(path, "/test_castlike_") && strstr(path, "/input_1.pb");
    if (tt->has_elem_type && (int)ten.dtype != tt->elem_type) {
        if (tt->elem_type == TEEXEC_DTYPE_BFLOAT16 && ten.dtype == TEEXEC_DTYPE_UINT16)
            t->known_bf16++;
        else
            note_failure(t, "%s: dtype %s, the model declares %d", path,
                         teexec_dtype_name(ten.dtype), (int)tt->elem_type);
    }
    if (tt->shape && like && ten.rank == 1 && ten.numel == 1 && tt->shape->n_dim != 1) {
        t->known_like++;
    } else if (tt->shape) {
        if ((size_t)ten.rank != tt->shape->n_dim) {
            note_failure(t, "%s: rank %d, the model declares %zu", path, (int)ten.rank,
                 tt->shape->n_dim);
        } else {
            for (size_t d = 0; d < tt->shape->n_dim; d++) {
                const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
                if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                    dim->dim_value != ten.dims[d])
                    note_failure(t, "%s: dim %zu is %lld, the model declares %lld", path, d,
                         (long long)ten.dims[d], (long long)dim->dim_value);
            }
        }
    }
    t->tensors++;
    tx_tensor_release(&ten);
    tx_tensor_proto_free(tp);
}

static void check_value_file(totals *t, const char *path, const Onnx__ValueInfoProto *vi)
{
    if (!vi || !vi->type) {
        note_failure(t, "%s: no matching typed graph value", path);
        return;
    }
    switch (vi->type->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        check_tensor_file(t, path, vi->type->tensor_type);
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: t->sequences++; break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: t->optionals++; break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: t->maps++; break;
    default: t->others++; break;
    }
}

static void check_data_set(totals *t, const char *dir, const Onnx__GraphProto *g)
{
    DIR *d = opendir(dir);
    if (!d) {
        note_failure(t, "%s: cannot open", dir);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned n;
        char tail[8];
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        if (sscanf(e->d_name, "input_%u.p%2s", &n, tail) == 2 && !strcmp(tail, "b")) {
            check_value_file(t, path, nth_input(g, n));
        } else if (sscanf(e->d_name, "output_%u.p%2s", &n, tail) == 2 && !strcmp(tail, "b")) {
            check_value_file(t, path, n < g->n_output ? g->output[n] : NULL);
        }
    }
    closedir(d);
}

static void check_case(totals *t, const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/model.onnx", dir) >= (int)sizeof path) {
        note_failure(t, "path too long: %s", dir);
        return;
    }
    tx_onnx_file *f = NULL;
    teexec_status *st = tx_onnx_load_file(path, NULL, &f);
    if (st) {
        note_failure(t, "%s: %s", path, teexec_status_message(st));
        teexec_status_destroy(st);
        return;
    }
    t->models++;
    /* Every initializer decodes too. */
    const Onnx__GraphProto *g = f->model->graph;
    for (size_t i = 0; i < g->n_initializer; i++) {
        tx_tensor ten;
        st = tx_tensor_from_proto(g->initializer[i], f, &ten);
        if (st) {
            note_failure(t, "%s: %s", path, teexec_status_message(st));
            teexec_status_destroy(st);
        }
        tx_tensor_release(&ten);
    }
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "test_data_set_", 14)) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        if (is_dir(path)) check_data_set(t, path, g);
    }
    if (d) closedir(d);
    tx_onnx_file_free(f);
}

static void corpus(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_TESTDATA");
    if (!root || !*root) root = "/usr/share/libonnx-testdata/data";
    if (!is_dir(root)) {
        print_message("libonnx-testdata not found at %s\n", root);
        skip();
    }
    static const char *const cats[] = {"node", "simple", "pytorch-converted", "pytorch-operator"};
    totals t = {0};
    for (size_t c = 0; c < sizeof cats / sizeof *cats; c++) {
        char dir[4096];
        if (snprintf(dir, sizeof dir, "%s/%s", root, cats[c]) >= (int)sizeof dir) continue;
        DIR *d = opendir(dir);
        if (!d) {
            note_failure(&t, "%s: missing", dir);
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char sub[4096];
            if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub) continue;
            if (is_dir(sub)) check_case(&t, sub);
        }
        closedir(d);
    }
    print_message("corpus: %u models, %u tensors decoded, %u sequences, %u optionals, %u maps, "
                  "%u other, %u failures\n",
                  t.models, t.tensors, t.sequences, t.optionals, t.maps, t.others, t.failures);
    print_message("known ONNX 1.12 test-data defects tolerated: %u bfloat16 saved as uint16, "
                  "%u CastLike 'like' inputs saved with one element\n",
                  t.known_bf16, t.known_like);
    assert_int_equal(t.failures, 0);
    assert_true(t.models > 1000);
    assert_true(t.tensors > 3000);
    /* The tolerated defects stay exactly those of the known files. */
    assert_true(t.known_bf16 <= 8 && t.known_like <= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
