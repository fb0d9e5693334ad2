/*
 * cmd_inspect.c - `teexec inspect MODEL.onnx [--json]`: what a model holds,
 * as aligned text for a person or as JSON for a program. Loading runs the
 * full validation, so a model that inspects cleanly is one teexec accepts.
 */
#include "cli_common.h"
#include "commands.h"
#include "json_out.h"
#include "text_table.h"
#include "teexec/teexec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void inspect_usage(FILE *f)
{
    fprintf(f, "usage: teexec inspect MODEL.onnx [--json]\n"
               "\n"
               "Shows a model's producer, IR version, opset imports, inputs and outputs\n"
               "(dtype and shape; symbolic dims by name, unknown dims as ?), the op\n"
               "histogram per domain (subgraphs and model-local functions included),\n"
               "initializers (count and bytes by dtype), external-data files and\n"
               "model-local functions.\n"
               "\n"
               "options:\n"
               "  --json     print one JSON object instead of text\n"
               "  -h, --help show this help\n");
}

static const char *domain_name(const char *d)
{
    return d && d[0] ? d : "ai.onnx";
}

static const char *kind_name(teexec_value_kind k)
{
    switch (k) {
    case TEEXEC_VALUE_TENSOR: return "tensor";
    case TEEXEC_VALUE_SEQUENCE: return "sequence";
    case TEEXEC_VALUE_OPTIONAL: return "optional";
    case TEEXEC_VALUE_MAP: return "map";
    case TEEXEC_VALUE_SPARSE_TENSOR: return "sparse_tensor";
    case TEEXEC_VALUE_OTHER: break;
    }
    return "other";
}

static const char *dtype_or_unknown(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_UNDEFINED ? "?" : teexec_dtype_name(dt);
}

/* "float", "sequence(float)", ... */
static void format_type(const teexec_value_info *v, char *buf, size_t size)
{
    if (v->kind == TEEXEC_VALUE_TENSOR)
        snprintf(buf, size, "%s", dtype_or_unknown(v->dtype));
    else
        snprintf(buf, size, "%s(%s)", kind_name(v->kind), dtype_or_unknown(v->dtype));
}

/* "[batch, 3, ?]"; "[]" for a scalar; "?" for an unknown rank. */
static void format_shape(const teexec_value_info *v, char *buf, size_t size)
{
    if (v->rank < 0) {
        snprintf(buf, size, "?");
        return;
    }
    size_t at = 0;
    at += (size_t)snprintf(buf, size, "[");
    for (int32_t d = 0; d < v->rank && at < size; d++) {
        const char *sep = d ? ", " : "";
        if (v->dims[d] >= 0)
            at += (size_t)snprintf(buf + at, size - at, "%s%" PRId64, sep, v->dims[d]);
        else if (v->dim_params && v->dim_params[d])
            at += (size_t)snprintf(buf + at, size - at, "%s%s", sep, v->dim_params[d]);
        else
            at += (size_t)snprintf(buf + at, size - at, "%s?", sep);
    }
    if (at < size) snprintf(buf + at, size - at, "]");
}

static void human_bytes(uint64_t b, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, size, "%" PRIu64 " B", b);
    else snprintf(buf, size, "%.1f %s", v, units[u]);
}

static void value_rows(text_table *t, const teexec_value_info *v)
{
    char type[96], shape[1024];
    format_type(v, type, sizeof type);
    format_shape(v, shape, sizeof shape);
    const char *row[] = {v->name, type, shape};
    text_table_row(t, row);
}

static void print_values(const char *title, const teexec_model *m, int outputs)
{
    size_t n = outputs ? teexec_model_output_count(m) : teexec_model_input_count(m);
    printf("\n%s (%zu):\n", title, n);
    if (!n) return;
    text_table t;
    text_table_init(&t, 3);
    const char *head[] = {"name", "type", "shape"};
    text_table_row(&t, head);
    for (size_t i = 0; i < n; i++)
        value_rows(&t, outputs ? teexec_model_output(m, i) : teexec_model_input(m, i));
    text_table_print(&t, stdout, 2);
    text_table_free(&t);
}

static uint64_t total_op_count(const teexec_model *m)
{
    uint64_t total = 0;
    for (size_t i = 0; i < teexec_model_op_count(m); i++) total += teexec_model_op(m, i)->count;
    return total;
}

static void print_text(const teexec_model *m, const char *path)
{
    char buf[1024], num[64];
    text_table h;
    text_table_init(&h, 2);
    const char *r1[] = {"model:", path};
    text_table_row(&h, r1);
    const char *pn = teexec_model_producer_name(m), *pv = teexec_model_producer_version(m);
    if (pn[0] || pv[0]) snprintf(buf, sizeof buf, "%s%s%s", pn, pn[0] && pv[0] ? " " : "", pv);
    else snprintf(buf, sizeof buf, "(not recorded)");
    const char *r2[] = {"producer:", buf};
    text_table_row(&h, r2);
    snprintf(num, sizeof num, "%" PRId64, teexec_model_ir_version(m));
    const char *r3[] = {"ir version:", num};
    text_table_row(&h, r3);
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < teexec_model_opset_count(m) && at < sizeof buf; i++) {
        const teexec_opset *o = teexec_model_opset(m, i);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s %" PRId64, i ? ", " : "",
                               domain_name(o->domain), o->version);
    }
    const char *r4[] = {"opsets:", buf[0] ? buf : "(none)"};
    text_table_row(&h, r4);
    char nodes[128];
    snprintf(nodes, sizeof nodes, "%" PRIu64 " in the main graph, %" PRIu64 " in all",
             teexec_model_node_count(m), total_op_count(m));
    const char *r5[] = {"nodes:", nodes};
    text_table_row(&h, r5);
    text_table_print(&h, stdout, 0);
    text_table_free(&h);

    print_values("inputs", m, 0);
    print_values("outputs", m, 1);

    size_t nops = teexec_model_op_count(m);
    printf("\nops (%zu kinds, %" PRIu64 " nodes):\n", nops, total_op_count(m));
    if (nops) {
        text_table t;
        text_table_init(&t, 3);
        t.right[2] = true;
        const char *head[] = {"domain", "op", "count"};
        text_table_row(&t, head);
        for (size_t i = 0; i < nops; i++) {
            const teexec_op_count *o = teexec_model_op(m, i);
            snprintf(num, sizeof num, "%" PRIu64, o->count);
            const char *row[] = {domain_name(o->domain), o->op_type, num};
            text_table_row(&t, row);
        }
        text_table_print(&t, stdout, 2);
        text_table_free(&t);
    }

    teexec_param_stats ps;
    teexec_model_param_stats(m, &ps);
    char hb[32];
    human_bytes(ps.bytes, hb, sizeof hb);
    printf("\ninitializers: %" PRIu64 " tensors, %" PRIu64 " elements, %" PRIu64 " bytes (%s)\n",
           ps.count, ps.elements, ps.bytes, hb);
    if (ps.count) {
        text_table t;
        text_table_init(&t, 5);
        t.right[1] = t.right[2] = t.right[3] = t.right[4] = true;
        const char *head[] = {"dtype", "tensors", "elements", "bytes", ""};
        text_table_row(&t, head);
        for (int d = 0; d < TEEXEC_DTYPE_COUNT; d++) {
            if (!ps.count_by_dtype[d]) continue;
            char c[32], e[32], b[32], hbd[32];
            snprintf(c, sizeof c, "%" PRIu64, ps.count_by_dtype[d]);
            snprintf(e, sizeof e, "%" PRIu64, ps.elements_by_dtype[d]);
            snprintf(b, sizeof b, "%" PRIu64, ps.bytes_by_dtype[d]);
            human_bytes(ps.bytes_by_dtype[d], hbd, sizeof hbd);
            const char *row[] = {dtype_or_unknown((teexec_dtype)d), c, e, b, hbd};
            text_table_row(&t, row);
        }
        text_table_print(&t, stdout, 2);
        text_table_free(&t);
    }

    size_t next = teexec_model_external_file_count(m);
    printf("\nexternal data files (%zu):\n", next);
    if (next) {
        text_table t;
        text_table_init(&t, 3);
        t.right[1] = t.right[2] = true;
        const char *head[] = {"location", "tensors", "bytes"};
        text_table_row(&t, head);
        for (size_t i = 0; i < next; i++) {
            const teexec_external_file *x = teexec_model_external_file(m, i);
            char c[32], b[32];
            snprintf(c, sizeof c, "%" PRIu64, x->tensors);
            snprintf(b, sizeof b, "%" PRIu64, x->bytes);
            const char *row[] = {x->location, c, b};
            text_table_row(&t, row);
        }
        text_table_print(&t, stdout, 2);
        text_table_free(&t);
    }

    size_t nf = teexec_model_function_count(m);
    printf("\nfunctions (%zu):\n", nf);
    if (nf) {
        text_table t;
        text_table_init(&t, 6);
        t.right[3] = t.right[4] = t.right[5] = true;
        const char *head[] = {"domain", "name", "overload", "nodes", "inputs", "outputs"};
        text_table_row(&t, head);
        for (size_t i = 0; i < nf; i++) {
            const teexec_function_info *f = teexec_model_function(m, i);
            char a[32], b[32], c[32];
            snprintf(a, sizeof a, "%" PRIu64, f->node_count);
            snprintf(b, sizeof b, "%" PRIu64, f->input_count);
            snprintf(c, sizeof c, "%" PRIu64, f->output_count);
            const char *row[] = {domain_name(f->domain), f->name,
                                 f->overload[0] ? f->overload : "-", a, b, c};
            text_table_row(&t, row);
        }
        text_table_print(&t, stdout, 2);
        text_table_free(&t);
    }
}

static void json_value(json_out *j, const teexec_value_info *v)
{
    json_begin_object(j);
    json_key(j, "name");
    json_string(j, v->name);
    json_key(j, "kind");
    json_string(j, kind_name(v->kind));
    json_key(j, "dtype");
    json_string(j, v->dtype == TEEXEC_DTYPE_UNDEFINED ? NULL : teexec_dtype_name(v->dtype));
    json_key(j, "shape");
    if (v->rank < 0) {
        json_null(j);
    } else {
        json_begin_array(j);
        for (int32_t d = 0; d < v->rank; d++) {
            if (v->dims[d] >= 0) json_int(j, v->dims[d]);
            else if (v->dim_params && v->dim_params[d]) json_string(j, v->dim_params[d]);
            else json_null(j);
        }
        json_end_array(j);
    }
    json_end_object(j);
}

static void print_json(const teexec_model *m, const char *path)
{
    json_out j;
    json_init(&j, stdout);
    json_begin_object(&j);
    json_key(&j, "file");
    json_string(&j, path);
    json_key(&j, "producer_name");
    json_string(&j, teexec_model_producer_name(m));
    json_key(&j, "producer_version");
    json_string(&j, teexec_model_producer_version(m));
    json_key(&j, "ir_version");
    json_int(&j, teexec_model_ir_version(m));

    json_key(&j, "opsets");
    json_begin_array(&j);
    for (size_t i = 0; i < teexec_model_opset_count(m); i++) {
        const teexec_opset *o = teexec_model_opset(m, i);
        json_begin_object(&j);
        json_key(&j, "domain");
        json_string(&j, domain_name(o->domain));
        json_key(&j, "version");
        json_int(&j, o->version);
        json_end_object(&j);
    }
    json_end_array(&j);

    json_key(&j, "node_count");
    json_uint(&j, teexec_model_node_count(m));
    json_key(&j, "node_count_all");
    json_uint(&j, total_op_count(m));

    json_key(&j, "inputs");
    json_begin_array(&j);
    for (size_t i = 0; i < teexec_model_input_count(m); i++) json_value(&j, teexec_model_input(m, i));
    json_end_array(&j);
    json_key(&j, "outputs");
    json_begin_array(&j);
    for (size_t i = 0; i < teexec_model_output_count(m); i++)
        json_value(&j, teexec_model_output(m, i));
    json_end_array(&j);

    json_key(&j, "ops");
    json_begin_array(&j);
    for (size_t i = 0; i < teexec_model_op_count(m); i++) {
        const teexec_op_count *o = teexec_model_op(m, i);
        json_begin_object(&j);
        json_key(&j, "domain");
        json_string(&j, domain_name(o->domain));
        json_key(&j, "op_type");
        json_string(&j, o->op_type);
        json_key(&j, "count");
        json_uint(&j, o->count);
        json_end_object(&j);
    }
    json_end_array(&j);

    teexec_param_stats ps;
    teexec_model_param_stats(m, &ps);
    json_key(&j, "initializers");
    json_begin_object(&j);
    json_key(&j, "count");
    json_uint(&j, ps.count);
    json_key(&j, "elements");
    json_uint(&j, ps.elements);
    json_key(&j, "bytes");
    json_uint(&j, ps.bytes);
    json_key(&j, "by_dtype");
    json_begin_array(&j);
    for (int d = 0; d < TEEXEC_DTYPE_COUNT; d++) {
        if (!ps.count_by_dtype[d]) continue;
        json_begin_object(&j);
        json_key(&j, "dtype");
        json_string(&j, d ? teexec_dtype_name((teexec_dtype)d) : NULL);
        json_key(&j, "count");
        json_uint(&j, ps.count_by_dtype[d]);
        json_key(&j, "elements");
        json_uint(&j, ps.elements_by_dtype[d]);
        json_key(&j, "bytes");
        json_uint(&j, ps.bytes_by_dtype[d]);
        json_end_object(&j);
    }
    json_end_array(&j);
    json_end_object(&j);

    json_key(&j, "external_data");
    json_begin_array(&j);
    for (size_t i = 0; i < teexec_model_external_file_count(m); i++) {
        const teexec_external_file *x = teexec_model_external_file(m, i);
        json_begin_object(&j);
        json_key(&j, "location");
        json_string(&j, x->location);
        json_key(&j, "tensors");
        json_uint(&j, x->tensors);
        json_key(&j, "bytes");
        json_uint(&j, x->bytes);
        json_end_object(&j);
    }
    json_end_array(&j);

    json_key(&j, "functions");
    json_begin_array(&j);
    for (size_t i = 0; i < teexec_model_function_count(m); i++) {
        const teexec_function_info *f = teexec_model_function(m, i);
        json_begin_object(&j);
        json_key(&j, "domain");
        json_string(&j, domain_name(f->domain));
        json_key(&j, "name");
        json_string(&j, f->name);
        json_key(&j, "overload");
        json_string(&j, f->overload);
        json_key(&j, "nodes");
        json_uint(&j, f->node_count);
        json_key(&j, "inputs");
        json_uint(&j, f->input_count);
        json_key(&j, "outputs");
        json_uint(&j, f->output_count);
        json_end_object(&j);
    }
    json_end_array(&j);

    json_end_object(&j);
    json_finish(&j);
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0;
    int options_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && cli_is_help(a)) {
            inspect_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!options_done && strcmp(a, "--json") == 0) {
            json = 1;
        } else if (!options_done && strcmp(a, "--") == 0) {
            options_done = 1;
        } else if (!options_done && a[0] == '-' && a[1]) {
            return cli_usage_error("inspect", "unknown option '%s'", a);
        } else if (!path) {
            path = a;
        } else {
            return cli_usage_error("inspect", "unexpected argument '%s' (one model at a time)", a);
        }
    }
    if (!path) return cli_usage_error("inspect", "no model file given");

    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) return cli_report(st, path);
    if (json) print_json(m, path);
    else print_text(m, path);
    teexec_model_destroy(m);
    if (fflush(stdout) != 0 || ferror(stdout))
        return cli_fail(CLI_EXIT_BAD_INPUT, "inspect", "could not write the output");
    return CLI_EXIT_OK;
}
