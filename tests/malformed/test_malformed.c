/*
 * Loads every file of the malformed-model corpus (tests/malformed, made by
 * make_corpus.py) and checks the answer that expected.txt gives for it:
 *
 *   FILE<TAB>CODE<TAB>substring     CODE is OK, BAD_MODEL, LIMIT, IO, ...
 *
 * A format-level case goes through the loader (tx_onnx_load_file, then
 * tx_tensor_from_proto on every tensor in the model, since payload and
 * external-data errors surface only when a tensor is decoded) and through
 * the public teexec_model_load_file; both must give the code and a message
 * containing the substring. An "ir:" case is valid at the format level (the
 * loader must accept it) and must be refused by teexec_model_load_file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/model_check.h"
#include "format/onnx_load.h"
#include "format/tensor_proto.h"
#include "teexec_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    teexec_code code;
} codes[] = {
    {"OK", TEEXEC_OK},
    {"INVALID_ARGUMENT", TEEXEC_ERR_INVALID_ARGUMENT},
    {"BAD_MODEL", TEEXEC_ERR_BAD_MODEL},
    {"LIMIT", TEEXEC_ERR_LIMIT},
    {"IO", TEEXEC_ERR_IO},
    {"UNSUPPORTED", TEEXEC_ERR_UNSUPPORTED},
};

static int parse_code(const char *s, teexec_code *out)
{
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
        if (!strcmp(codes[i].name, s)) {
            *out = codes[i].code;
            return 1;
        }
    return 0;
}

static teexec_status *decode_visit(void *ctx, const Onnx__TensorProto *tp,
                                   const tx_tensor_site *site)
{
    (void)site;
    tx_tensor t;
    teexec_status *st = tx_tensor_from_proto(tp, ctx, &t);
    tx_tensor_release(&t);
    return st;
}

/* The loader alone: parse, check, decode every tensor. */
static teexec_status *load_and_decode(const char *path)
{
    tx_onnx_file *f = NULL;
    teexec_status *st = tx_onnx_load_file(path, NULL, &f);
    if (!st) st = tx_model_for_each_tensor(f->model, decode_visit, f);
    tx_onnx_file_free(f);
    return st;
}

static teexec_status *load_public(const char *path)
{
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st && m) {
        teexec_status_destroy(st);
        teexec_model_destroy(m);
        return tx_error(TEEXEC_ERR_INTERNAL, "an error status came with a model");
    }
    teexec_model_destroy(m);
    return st;
}

/* 1 when st matches; otherwise prints why. Consumes st. */
static int check(const char *file, const char *via, teexec_status *st, teexec_code code,
                 const char *substr)
{
    int ok;
    if (code == TEEXEC_OK)
        ok = st == NULL;
    else
        ok = st && teexec_status_code(st) == code && strstr(teexec_status_message(st), substr);
    if (!ok)
        print_message("MISMATCH %s via %s: expected %s '%s', got %s: %s\n", file, via,
                      teexec_code_name(code), substr,
                      st ? teexec_code_name(teexec_status_code(st)) : "success",
                      teexec_status_message(st));
    teexec_status_destroy(st);
    return ok;
}

static void corpus(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    if (!root || !*root) root = TEEXEC_SOURCE_ROOT;
    char dir[4096], manifest[4200];
    snprintf(dir, sizeof dir, "%s/tests/malformed", root);
    snprintf(manifest, sizeof manifest, "%s/expected.txt", dir);
    FILE *fp = fopen(manifest, "r");
    if (!fp) fail_msg("cannot open %s", manifest);
    char line[2048];
    unsigned cases = 0, refused = 0, graph_level = 0, bad = 0;
    while (fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char *file = line, *code_s = strchr(line, '\t'), *substr;
        if (!code_s) fail_msg("bad manifest line: %s", line);
        *code_s++ = 0;
        substr = strchr(code_s, '\t');
        if (!substr) fail_msg("bad manifest line for %s", file);
        *substr++ = 0;
        teexec_code code = TEEXEC_OK;
        if (!parse_code(code_s, &code)) fail_msg("unknown code %s", code_s);
        int ir = !strncmp(file, "ir:", 3);
        if (ir) file += 3;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        cases++;
        if (code != TEEXEC_OK) refused++;
        if (ir) {
            graph_level++;
            /* valid at the format level, refused by the public loader */
            bad += !check(file, "loader", load_and_decode(path), TEEXEC_OK, "");
            bad += !check(file, "teexec_model_load_file", load_public(path), code, substr);
        } else {
            bad += !check(file, "loader", load_and_decode(path), code, substr);
            bad += !check(file, "teexec_model_load_file", load_public(path), code, substr);
        }
    }
    fclose(fp);
    print_message("malformed corpus: %u files, %u must be refused (%u graph-level), "
                  "%u mismatches\n",
                  cases, refused, graph_level, bad);
    assert_int_equal(bad, 0);
    assert_true(refused >= 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
