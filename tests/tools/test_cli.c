/* Tests for the teexec command line: runs the built binary (path in argv[1])
 * and checks exit statuses, the one-line error reports, `inspect` text and
 * JSON output (JSON checked by a small validator below), and that every
 * model of the malformed corpus is refused cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "teexec/teexec.h"
#include "../import/model_builder.h"

extern char **environ;

static const char *teexec_bin;

typedef struct run_result {
    int exit_code; /* -1 when killed by a signal */
    int signal;
    char *out;
    char *err;
} run_result;

static char *slurp_fd(int fd)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r <= 0) break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

/* Runs teexec with the NULL-terminated args (after argv[0]). */
static run_result run(const char *const *args)
{
    char out_path[] = "/tmp/teexec-cli-out-XXXXXX";
    char err_path[] = "/tmp/teexec-cli-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    assert_true(out_fd >= 0 && err_fd >= 0);
    unlink(out_path);
    unlink(err_path);

    const char *argv[32];
    size_t n = 0;
    argv[n++] = teexec_bin;
    for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
    argv[n] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, teexec_bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(rc, 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);

    run_result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    r.out = slurp_fd(out_fd);
    r.err = slurp_fd(err_fd);
    close(out_fd);
    close(err_fd);
    return r;
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (*s == '\n') n++;
    return n;
}

/* stderr is exactly one line starting "teexec: ". */
static void assert_one_error_line(const run_result *r)
{
    if (count_lines(r->err) != 1 || strncmp(r->err, "teexec: ", 8) != 0)
        fprintf(stderr, "stderr was: <<%s>>\n", r->err);
    assert_int_equal(count_lines(r->err), 1);
    assert_int_equal(strncmp(r->err, "teexec: ", 8), 0);
    assert_int_equal(r->err[strlen(r->err) - 1], '\n');
}

/* Asserts `needle` occurs in `hay`, showing the whole output if not. */
static void expect_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle)) fprintf(stderr, "missing <<%s>> in:\n%s\n", needle, hay);
    assert_non_null(strstr(hay, needle));
}

/* ---- a strict JSON validator (RFC 8259), enough to prove --json output
 * parses: one value, nothing after it but whitespace. */

typedef struct jp {
    const char *p;
    int depth;
} jp;

static void jws(jp *j)
{
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static int jvalue(jp *j);

static int jstring(jp *j)
{
    if (*j->p != '"') return 0;
    j->p++;
    for (;;) {
        unsigned char c = (unsigned char)*j->p;
        if (c == '\0' || c < 0x20) return 0;
        if (c == '"') {
            j->p++;
            return 1;
        }
        if (c == '\\') {
            j->p++;
            char e = *j->p;
            if (e == 'u') {
                for (int i = 1; i <= 4; i++) {
                    char h = j->p[i];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return 0;
                }
                j->p += 5;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == '\0') return 0;
            j->p++;
            continue;
        }
        /* UTF-8: a lead byte and the right number of continuation bytes. */
        int extra = c < 0x80 ? 0 : (c >= 0xc2 && c <= 0xdf) ? 1 : (c >= 0xe0 && c <= 0xef) ? 2
                                 : (c >= 0xf0 && c <= 0xf4) ? 3 : -1;
        if (extra < 0) return 0;
        j->p++;
        for (int i = 0; i < extra; i++, j->p++)
            if (((unsigned char)*j->p & 0xc0) != 0x80) return 0;
    }
}

static int jnumber(jp *j)
{
    const char *p = j->p;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return 0;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    j->p = p;
    return 1;
}

static int jcontainer(jp *j, char close, int object)
{
    if (++j->depth > 100) return 0;
    j->p++;
    jws(j);
    if (*j->p == close) {
        j->p++;
        j->depth--;
        return 1;
    }
    for (;;) {
        jws(j);
        if (object) {
            if (!jstring(j)) return 0;
            jws(j);
            if (*j->p != ':') return 0;
            j->p++;
        }
        if (!jvalue(j)) return 0;
        jws(j);
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == close) {
            j->p++;
            j->depth--;
            return 1;
        }
        return 0;
    }
}

static int jvalue(jp *j)
{
    jws(j);
    switch (*j->p) {
    case '{': return jcontainer(j, '}', 1);
    case '[': return jcontainer(j, ']', 0);
    case '"': return jstring(j);
    case 't': if (strncmp(j->p, "true", 4) == 0) { j->p += 4; return 1; } return 0;
    case 'f': if (strncmp(j->p, "false", 5) == 0) { j->p += 5; return 1; } return 0;
    case 'n': if (strncmp(j->p, "null", 4) == 0) { j->p += 4; return 1; } return 0;
    default: return jnumber(j);
    }
}

static int json_valid(const char *s)
{
    jp j = {s, 0};
    if (!jvalue(&j)) return 0;
    jws(&j);
    return *j.p == '\0';
}

static void json_checker_rejects_bad_json(void **state)
{
    (void)state;
    /* The checker itself must be able to fail. */
    assert_true(json_valid("{\"a\": [1, -2.5e3, \"x\\u00e9\", true, null]}\n"));
    assert_false(json_valid("{\"a\": [1, 2,]}"));
    assert_false(json_valid("{\"a\" 1}"));
    assert_false(json_valid("\"raw\ttab\""));
    assert_false(json_valid("\"bad \\x escape\""));
    assert_false(json_valid("{} {}"));
    assert_false(json_valid("01"));
    assert_false(json_valid("\"\xff\""));
}

/* ---- global options */

static void version_and_help(void **state)
{
    (void)state;
    const char *v[] = {"--version", NULL};
    run_result r = run(v);
    assert_int_equal(r.exit_code, 0);
    char want[64];
    snprintf(want, sizeof want, "teexec %s\n", teexec_version_string());
    assert_string_equal(r.out, want);
    assert_string_equal(r.err, "");
    run_free(&r);

    const char *h[] = {"--help", NULL};
    r = run(h);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "usage: teexec");
    expect_contains(r.out, "inspect");
    assert_string_equal(r.err, "");
    run_free(&r);

    const char *hi[] = {"help", "inspect", NULL};
    r = run(hi);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "usage: teexec inspect MODEL.onnx [--json]");
    run_free(&r);

    const char *ih[] = {"inspect", "--help", NULL};
    r = run(ih);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "usage: teexec inspect");
    run_free(&r);
}

static void usage_errors_exit_2(void **state)
{
    (void)state;
    const char *cases[][4] = {
        {NULL},
        {"--bogus", NULL},
        {"inspect", NULL},
        {"inspect", "--frob", "m.onnx", NULL},
        {"inspect", "a.onnx", "b.onnx", NULL},
        {"frobnicate", NULL},
        {"help", "frobnicate", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run(cases[i]);
        if (r.exit_code != 2) fprintf(stderr, "case %zu: exit %d\n", i, r.exit_code);
        assert_int_equal(r.exit_code, 2);
        assert_one_error_line(&r);
        assert_string_equal(r.out, "");
        run_free(&r);
    }
}

/* ---- plan and convert -------------------------------------------------- */

static char *model_path(const char *name)
{
    const char *src = getenv("TEEXEC_SOURCE_ROOT");
    assert_non_null(src);
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 1024, "%s/models/%s/model.onnx", src, name);
    return p;
}

static void plan_explains_gpt2_block(void **state)
{
    (void)state;
    const char *c[] = {"plan", model_path("gpt2_block"), "--explain", "--train", "--recipe", "mxfp8",
                       "--device", "sm_90", NULL};
    run_result r = run(c);
    if (r.exit_code) fprintf(stderr, "%s", r.err);
    assert_int_equal(r.exit_code, 0);
    /* lowered patterns, distinct forward / backward layouts, a decline with
     * its reason, the quantization and memory sections */
    assert_non_null(strstr(r.out, "lowered  DotProductAttention"));
    assert_non_null(strstr(r.out, "forward:  ForwardLinearBiasAdd"));
    assert_non_null(strstr(r.out, "BackwardAddNorm"));
    assert_non_null(strstr(r.out, "not used: device sm_90 has no native MXFP8 GEMM"));
    assert_non_null(strstr(r.out, "mxfp8 float8e4m3fn 1x32"));
    assert_non_null(strstr(r.out, "peak training"));
    run_free(&r);
    const char *j[] = {"plan", model_path("mlp"), "--json", "--recipe", "fp8-current", NULL};
    r = run(j);
    assert_int_equal(r.exit_code, 0);
    assert_true(r.out[0] == '{');
    assert_non_null(strstr(r.out, "\"lowering\""));
    run_free(&r);
    /* --dot prints the graph alone (structure: tests/planner/test_plan_dot.c) */
    const char *g[] = {"plan", model_path("mlp"), "--dot", "--train", NULL};
    r = run(g);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(strncmp(r.out, "digraph plan {\n", 15), 0);
    assert_non_null(strstr(r.out, "subgraph cluster_g0 {"));
    run_free(&r);
    const char *h[] = {"plan", "--help", NULL};
    r = run(h);
    assert_int_equal(r.exit_code, 0);
    assert_non_null(strstr(r.out, "--dot             print a Graphviz graph of the plan"));
    run_free(&r);
}

static void plan_bad_options_exit_2(void **state)
{
    (void)state;
    const char *a[] = {"plan", model_path("mlp"), "--recipe", "fp9", NULL};
    const char *b[] = {"plan", model_path("mlp"), "--device", "sm_7", NULL};
    const char *d[] = {"plan", model_path("mlp"), "--dim", "novalue", NULL};
    const char *e[] = {"plan", model_path("mlp"), "--dot", "--json", NULL};
    const char *const *cases[] = {a, b, d, e};
    for (size_t i = 0; i < 4; i++) {
        run_result r = run(cases[i]);
        assert_int_equal(r.exit_code, 2);
        assert_one_error_line(&r);
        run_free(&r);
    }
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Converting twice gives the same bytes; the converted model holds te.fused
 * functions and runs (inlined) to the original's outputs. */
static void convert_is_idempotent_and_runs(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec-convert-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s/a.onnx", dir);
    snprintf(b, sizeof b, "%s/b.onnx", dir);
    const char *models[] = {"mlp", "gpt2_block", "llama_block"};
    for (size_t m = 0; m < 3; m++) {
        const char *c1[] = {"convert", model_path(models[m]), a, "--recipe", "mxfp8", "--train", NULL};
        run_result r = run(c1);
        if (r.exit_code) fprintf(stderr, "%s", r.err);
        assert_int_equal(r.exit_code, 0);
        assert_non_null(strstr(r.out, "te.fused functions"));
        run_free(&r);
        const char *c2[] = {"convert", a, b, "--recipe", "mxfp8", "--train", NULL};
        r = run(c2);
        assert_int_equal(r.exit_code, 0);
        run_free(&r);
        size_t la, lb;
        char *da = slurp(a, &la), *db = slurp(b, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(da, db, la);
        free(da);
        free(db);
        const char *ins[] = {"inspect", a, NULL};
        r = run(ins);
        assert_int_equal(r.exit_code, 0);
        assert_non_null(strstr(r.out, "te.fused"));
        run_free(&r);
        const char *runc[] = {"run", a, "--device", "cpu", "--output-dir", dir, NULL};
        r = run(runc);
        if (r.exit_code) fprintf(stderr, "%s", r.err);
        assert_int_equal(r.exit_code, 0);
        run_free(&r);
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* --external-data: the weights go to OUT.data beside OUT (ONNX external
 * data, named relative to it); converting that again writes the same data,
 * and the converted model runs to the original's outputs bit for bit. */
static void convert_external_data(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec-convert-ext-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[1100], b[1100], ad[1200], bd[1200], o1[1100], o2[1100];
    snprintf(a, sizeof a, "%s/a.onnx", dir);
    snprintf(b, sizeof b, "%s/b.onnx", dir);
    snprintf(ad, sizeof ad, "%s.data", a);
    snprintf(bd, sizeof bd, "%s.data", b);
    snprintf(o1, sizeof o1, "%s/orig", dir);
    snprintf(o2, sizeof o2, "%s/conv", dir);
    assert_int_equal(mkdir(o1, 0755), 0);
    assert_int_equal(mkdir(o2, 0755), 0);
    const char *c1[] = {"convert", model_path("gpt2_block"), a, "--external-data", NULL};
    run_result r = run(c1);
    if (r.exit_code) fprintf(stderr, "%s", r.err);
    assert_int_equal(r.exit_code, 0);
    assert_non_null(strstr(r.out, "weights as external data"));
    run_free(&r);
    const char *c2[] = {"convert", a, b, "--external-data", NULL};
    r = run(c2);
    assert_int_equal(r.exit_code, 0);
    run_free(&r);
    size_t la, lb, lm;
    char *da = slurp(ad, &la), *db = slurp(bd, &lb), *dm = slurp(a, &lm);
    assert_true(la > 100000); /* the block's weights, out of the model */
    assert_true(lm < 100000);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    free(da);
    free(db);
    free(dm);
    const char *r1[] = {"run", model_path("gpt2_block"), "--device", "cpu", "--output-dir", o1, NULL};
    const char *r2[] = {"run", a, "--device", "cpu", "--output-dir", o2, NULL};
    r = run(r1);
    assert_int_equal(r.exit_code, 0);
    run_free(&r);
    r = run(r2);
    if (r.exit_code) fprintf(stderr, "%s", r.err);
    assert_int_equal(r.exit_code, 0);
    run_free(&r);
    char y1[1200], y2[1200];
    snprintf(y1, sizeof y1, "%s/y.npy", o1);
    snprintf(y2, sizeof y2, "%s/y.npy", o2);
    size_t l1, l2;
    char *d1 = slurp(y1, &l1), *d2 = slurp(y2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(d1, d2, l1);
    free(d1);
    free(d2);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* --kv-cache BATCH,CAPACITY: an export with past_key_values becomes the
 * cache form (no past, present or attention_mask; state caches and a
 * cache_len input), and `teexec generate` prints the same greedy ids on it
 * as on the export. Bad counts are usage errors; a model with no
 * KV-cache attention is refused with the reason. */
static void convert_kv_cache(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec-convert-kv-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[1100];
    snprintf(out, sizeof out, "%s/cache.onnx", dir);
    const char *c[] = {"convert", model_path("kv/gpt2_kv"), out, "--kv-cache", "2,40", NULL};
    run_result r = run(c);
    if (r.exit_code) fprintf(stderr, "%s", r.err);
    assert_int_equal(r.exit_code, 0);
    assert_non_null(strstr(r.out, "KV cache: "));
    run_free(&r);
    const char *ins[] = {"inspect", out, NULL};
    r = run(ins);
    assert_int_equal(r.exit_code, 0);
    assert_non_null(strstr(r.out, "kv_cache.0.key"));
    assert_non_null(strstr(r.out, "cache_len"));
    assert_null(strstr(r.out, "past_key_values"));
    assert_null(strstr(r.out, "attention_mask"));
    run_free(&r);
    const char *g1[] = {"generate", model_path("kv/gpt2_kv"), "--prompt-ids", "5,9,2,7",
                        "--max-new-tokens", "6", "--device", "cpu", NULL};
    const char *g2[] = {"generate", out, "--prompt-ids", "5,9,2,7", "--max-new-tokens", "6",
                        "--device", "cpu", NULL};
    run_result a = run(g1), b = run(g2);
    if (a.exit_code || b.exit_code) fprintf(stderr, "%s%s", a.err, b.err);
    assert_int_equal(a.exit_code, 0);
    assert_int_equal(b.exit_code, 0);
    assert_true(strlen(a.out) > 6);
    assert_string_equal(a.out, b.out);
    run_free(&a);
    run_free(&b);
    /* a prompt past the capacity: a clear status, exit 2 or 3, not a crash */
    const char *g3[] = {"generate", out, "--prompt-ids", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,"
                        "17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38",
                        "--max-new-tokens", "6", "--device", "cpu", NULL};
    r = run(g3);
    assert_true(r.exit_code != 0 && r.signal == 0);
    assert_one_error_line(&r);
    run_free(&r);
    const char *bad[][6] = {{"convert", model_path("kv/gpt2_kv"), out, "--kv-cache", "0,40", NULL},
                            {"convert", model_path("kv/gpt2_kv"), out, "--kv-cache", "2", NULL},
                            {"convert", model_path("kv/gpt2_kv"), out, "--kv-cache", "2,x", NULL}};
    for (size_t i = 0; i < 3; i++) {
        r = run(bad[i]);
        assert_int_equal(r.exit_code, 2);
        assert_non_null(strstr(r.err, "--kv-cache"));
        run_free(&r);
    }
    const char *none[] = {"convert", model_path("gpt2_block"), out, "--kv-cache", "2,40", NULL};
    r = run(none);
    assert_true(r.exit_code != 0 && r.signal == 0);
    assert_one_error_line(&r);
    assert_non_null(strstr(r.err, "not a KV-cache attention"));
    run_free(&r);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void missing_file_exits_1(void **state)
{
    (void)state;
    const char *c[] = {"inspect", "/nonexistent/teexec/model.onnx", NULL};
    run_result r = run(c);
    assert_int_equal(r.exit_code, 1);
    assert_one_error_line(&r);
    assert_int_equal(strncmp(r.err, "teexec: /nonexistent/teexec/model.onnx: ", 40), 0);
    run_free(&r);
}

/* ---- inspect on models written here */

static char *write_temp_model(const Onnx__ModelProto *m)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/teexec-cli-model-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    assert_int_equal(write(fd, bytes, size), (ssize_t)size);
    close(fd);
    free(bytes);
    return path;
}

static void validation_error_one_line_with_node(void **state)
{
    (void)state;
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 13);
    Onnx__GraphProto *g = mb_graph("main");
    m->graph = g;
    mb_input(g, "x", 1, "4");
    mb_node(g, "n3", "MatMul", "", "x,x7", "y");
    mb_output(g, "y", 1, "4");
    char *path = write_temp_model(m);
    mb_free_all();
    const char *c[] = {"inspect", path, NULL};
    run_result r = run(c);
    unlink(path);
    assert_int_equal(r.exit_code, 1);
    assert_one_error_line(&r);
    char want[256];
    snprintf(want, sizeof want,
             "teexec: %s: node \"n3\" (MatMul) reads \"x7\", which nothing defines\n", path);
    assert_string_equal(r.err, want);
    assert_string_equal(r.out, "");
    run_free(&r);
}

/* Names with quotes, a backslash, a control character and non-ASCII
 * letters, symbolic and unknown dims, a function: text aligns and JSON
 * stays valid. */
static Onnx__ModelProto *odd_model(void)
{
    Onnx__ModelProto *m = mb_model(10);
    mb_opset(m, "", 18);
    mb_opset(m, "com.te", 1);
    Onnx__GraphProto *g = mb_graph("main");
    m->graph = g;
    mb_input(g, "in\"put\\\x01", 1, "batch,3,?");
    mb_input(g, "größe", 7, NULL);
    int64_t d[] = {2, 3};
    mb_init(g, "weight", d, 2);
    mb_node(g, "a", "Relu", "", "in\"put\\\x01", "t");
    mb_node(g, "b", "Fused", "com.te", "t,größe", "out");
    mb_output(g, "out", 1, "batch,?");
    Onnx__FunctionProto *f = mb_function(m, "com.te", "Fused", "A,B", "C");
    f->node[f->n_node++] = mb_node_new("f1", "Neg", "", "A", "C");
    return m;
}

static void inspect_text_and_json_of_odd_names(void **state)
{
    (void)state;
    char *path = write_temp_model(odd_model());
    mb_free_all();

    const char *t[] = {"inspect", path, NULL};
    run_result r = run(t);
    assert_int_equal(r.exit_code, 0);
    assert_string_equal(r.err, "");
    expect_contains(r.out, "ir version:  10\n");
    expect_contains(r.out, "opsets:      ai.onnx 18, com.te 1\n");
    /* Control character shown as '?', columns aligned on code points. */
    expect_contains(r.out, "  name      type   shape\n");
    expect_contains(r.out, "  in\"put\\?  float  [batch, 3, ?]\n");
    expect_contains(r.out, "  größe     int64  ?\n");
    expect_contains(r.out, "  dtype  tensors  elements  bytes\n");
    expect_contains(r.out, "  out   float  [batch, ?]\n");
    expect_contains(r.out, "  com.te   Fused      1\n");
    expect_contains(r.out, "initializers: 1 tensors, 6 elements, 24 bytes (24 B)\n");
    expect_contains(r.out, "  com.te  Fused  -             1       2        1\n");
    run_free(&r);

    const char *j[] = {"inspect", path, "--json", NULL};
    r = run(j);
    unlink(path);
    assert_int_equal(r.exit_code, 0);
    assert_string_equal(r.err, "");
    if (!json_valid(r.out)) fprintf(stderr, "invalid JSON:\n%s\n", r.out);
    assert_true(json_valid(r.out));
    expect_contains(r.out, "\"name\": \"in\\\"put\\\\\\u0001\"");
    expect_contains(r.out, "\"name\": \"größe\"");
    expect_contains(r.out, "\"shape\": [\n        \"batch\",\n        3,\n        null\n");
    expect_contains(r.out, "\"ir_version\": 10,");
    run_free(&r);
}

/* ---- inspect on a model of the ONNX test corpus */

static void inspect_testdata_model(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_TESTDATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/pytorch-converted/test_Linear/model.onnx",
             root && root[0] ? root : "/usr/share/libonnx-testdata/data");
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "skipping: %s not present (libonnx-testdata)\n", path);
        skip();
    }
    const char *t[] = {"inspect", path, NULL};
    run_result r = run(t);
    assert_int_equal(r.exit_code, 0);
    assert_string_equal(r.err, "");
    static const char *const golden[] = {
        "producer:    pytorch 0.3\n",
        "ir version:  3\n",
        "opsets:      ai.onnx 6\n",
        "nodes:       1 in the main graph, 1 in all\n",
        "inputs (1):\n  name  type   shape\n  0     float  [4, 10]\n",
        "outputs (1):\n  name  type   shape\n  3     float  [4, 8]\n",
        "ops (1 kinds, 1 nodes):\n  domain   op    count\n  ai.onnx  Gemm      1\n",
        "initializers: 2 tensors, 88 elements, 352 bytes (352 B)\n",
        "  float        2        88    352  352 B\n",
        "external data files (0):\n",
        "functions (0):\n",
    };
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        expect_contains(r.out, golden[i]);
    }
    run_free(&r);

    const char *j[] = {"inspect", "--json", path, NULL};
    r = run(j);
    assert_int_equal(r.exit_code, 0);
    assert_true(json_valid(r.out));
    expect_contains(r.out, "\"op_type\": \"Gemm\"");
    expect_contains(r.out, "\"producer_name\": \"pytorch\"");
    run_free(&r);
}

/* ---- the malformed corpus: every model refused, one line, no crash.
 * tests/malformed/expected.txt (FILE<TAB>CODE<TAB>substring, FILE maybe
 * prefixed "ir:") says what each file should give; OK files must inspect
 * cleanly, the rest exit with the status their code maps to and name the
 * reason. Files it does not list must still be refused. */

typedef struct expectation {
    char file[256];
    char code[32];
    char substr[256];
} expectation;

static size_t read_expected(const char *dir, expectation *out, size_t max)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = 0;
    char line[1024];
    while (n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        char *t1 = strchr(line, '\t');
        if (!t1) continue;
        *t1++ = '\0';
        char *t2 = strchr(t1, '\t');
        if (t2) *t2++ = '\0';
        const char *file = strncmp(line, "ir:", 3) == 0 ? line + 3 : line;
        snprintf(out[n].file, sizeof out[n].file, "%.255s", file);
        snprintf(out[n].code, sizeof out[n].code, "%.31s", t1);
        snprintf(out[n].substr, sizeof out[n].substr, "%.255s", t2 ? t2 : "");
        n++;
    }
    fclose(f);
    return n;
}

static int exit_for_code(const char *code)
{
    if (strcmp(code, "OK") == 0) return 0;
    if (strcmp(code, "UNSUPPORTED") == 0) return 3;
    if (strcmp(code, "DEVICE") == 0) return 4;
    return 1;
}

static size_t check_malformed_dir(const char *dir, const expectation *ex, size_t n_ex)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t checked = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".onnx") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        const expectation *x = NULL;
        for (size_t i = 0; i < n_ex; i++)
            if (strcmp(ex[i].file, e->d_name) == 0) x = &ex[i];
        const char *c[] = {"inspect", path, NULL};
        run_result r = run(c);
        int want = x ? exit_for_code(x->code) : -1;
        int ok = r.signal == 0 && (want >= 0 ? r.exit_code == want : r.exit_code > 0);
        if (ok && r.exit_code != 0)
            ok = count_lines(r.err) == 1 && (!x || strstr(r.err, x->substr));
        if (!ok)
            fprintf(stderr, "%s: want exit %d, got exit %d signal %d, stderr <<%s>>\n", path, want,
                    r.exit_code, r.signal, r.err);
        assert_true(ok);
        if (r.exit_code == 0) assert_string_equal(r.err, "");
        else assert_one_error_line(&r);
        run_free(&r);
        checked++;
    }
    closedir(d);
    return checked;
}

static void malformed_corpus_refused(void **state)
{
    (void)state;
    const char *src = getenv("TEEXEC_SOURCE_ROOT");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/malformed", src ? src : ".");
    static expectation ex[512];
    size_t n_ex = read_expected(dir, ex, sizeof ex / sizeof ex[0]);
    size_t n = check_malformed_dir(dir, ex, n_ex);
    if (n == 0) {
        fprintf(stderr, "skipping: no .onnx files under %s\n", dir);
        skip();
    }
    fprintf(stderr, "%zu corpus models checked (%zu with expectations)\n", n, n_ex);
}

/* ---- bench, and the execution options run / train / bench share */

/* The number after "KEY": in a JSON text, or NAN. */
static double json_number(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    if (!p) return NAN;
    char *end;
    double v = strtod(p + strlen(pat), &end);
    return end == p + strlen(pat) ? NAN : v;
}

/* Parses "time:    min A ms  median B ms  mean C ms  max D ms". */
static void text_times(const char *out, double t[4])
{
    const char *p = strstr(out, "\ntime:    min ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "\ntime: min %lf ms median %lf ms mean %lf ms max %lf ms", &t[0],
                            &t[1], &t[2], &t[3]),
                     4);
}

static void bench_text_on_cpu(void **state)
{
    (void)state;
    const char *c[] = {"bench", model_path("mlp"), "--device", "cpu", "--iters", "2",
                       "--warmup", "1", NULL};
    run_result r = run(c);
    if (r.exit_code != 0) fprintf(stderr, "stderr: %s\n", r.err);
    assert_int_equal(r.exit_code, 0);
    assert_string_equal(r.err, "");
    expect_contains(r.out, "device:  cpu\n");
    expect_contains(r.out, "mode:    inference\n");
    expect_contains(r.out, "recipe:  none\n");
    expect_contains(r.out, "inputs:  x float [2,8,64], random (seed 0)\n");
    expect_contains(r.out, "iters:   2 after 1 warm-up\n");
    double t[4];
    text_times(r.out, t);
    assert_true(t[0] > 0 && t[0] <= t[1] && t[1] <= t[3] && t[0] <= t[2] && t[2] <= t[3]);
    assert_null(strstr(r.out, "loss:"));
    run_free(&r);
}

static void bench_json_inference_and_dims(void **state)
{
    (void)state;
    /* a model with a symbolic dim: --dim sets the filled input's shape */
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 13);
    Onnx__GraphProto *g = mb_graph("main");
    m->graph = g;
    mb_input(g, "x", 1, "N,4");
    mb_node(g, "r", "Relu", "", "x", "y");
    mb_output(g, "y", 1, "N,4");
    char *path = write_temp_model(m);
    mb_free_all();
    const char *c[] = {"bench", path, "--device=cpu", "--dim", "N=3", "--iters=3", "--warmup", "0",
                       "--json", NULL};
    run_result r = run(c);
    if (r.exit_code != 0) fprintf(stderr, "stderr: %s\n", r.err);
    assert_int_equal(r.exit_code, 0);
    if (!json_valid(r.out)) fprintf(stderr, "not JSON: %s\n", r.out);
    assert_true(json_valid(r.out));
    expect_contains(r.out, "\"mode\": \"inference\"");
    expect_contains(r.out, "\"device\": \"cpu\"");
    expect_contains(r.out, "\"name\": \"x\"");
    double iters = json_number(r.out, "iters"), warm = json_number(r.out, "warmup");
    double mn = json_number(r.out, "min_ms"), med = json_number(r.out, "median_ms");
    double mean = json_number(r.out, "mean_ms"), mx = json_number(r.out, "max_ms");
    assert_true(iters == 3 && warm == 0);
    assert_true(mn >= 0 && mn <= med && med <= mx && mn <= mean && mean <= mx);
    /* the shape array holds 3 then 4 */
    const char *sh = strstr(r.out, "\"shape\": [");
    assert_non_null(sh);
    long d0 = 0, d1 = 0;
    assert_int_equal(sscanf(sh, "\"shape\": [ %ld , %ld ]", &d0, &d1), 2);
    assert_int_equal(d0, 3);
    assert_int_equal(d1, 4);
    run_free(&r);
    unlink(path);

    /* an input dim nothing names cannot be filled: bad input, one line */
    m = mb_model(8);
    mb_opset(m, "", 13);
    g = mb_graph("main");
    m->graph = g;
    mb_input(g, "x", 1, "?,4");
    mb_node(g, "r", "Relu", "", "x", "y");
    mb_output(g, "y", 1, "?,4");
    path = write_temp_model(m);
    mb_free_all();
    const char *c2[] = {"bench", path, "--device", "cpu", NULL};
    r = run(c2);
    unlink(path);
    assert_int_equal(r.exit_code, 1);
    assert_one_error_line(&r);
    expect_contains(r.err, "input \"x\" has no declared tensor shape");
    run_free(&r);
}

static double bench_train_loss(const char *seed, run_result *keep)
{
    const char *c[] = {"bench", model_path("mlp"), "--device", "cpu", "--train", "--iters", "2",
                       "--warmup", "1", "--seed", seed, "--json", NULL};
    run_result r = run(c);
    if (r.exit_code != 0) fprintf(stderr, "stderr: %s\n", r.err);
    assert_int_equal(r.exit_code, 0);
    assert_true(json_valid(r.out));
    double loss = json_number(r.out, "loss_first");
    if (keep) *keep = r;
    else run_free(&r);
    return loss;
}

static void bench_train_on_cpu(void **state)
{
    (void)state;
    run_result r;
    double l3 = bench_train_loss("3", &r);
    expect_contains(r.out, "\"mode\": \"train\"");
    expect_contains(r.out, "\"loss\": \"mse\"");
    expect_contains(r.out, "\"name\": \"target\"");
    double last = json_number(r.out, "loss_last");
    /* random inputs in [-1, 1) against a random target: a clearly positive
     * loss, and three AdamW steps at lr 1e-3 keep it finite */
    assert_true(isfinite(l3) && l3 > 0.01);
    assert_true(isfinite(last) && last > 0);
    run_free(&r);
    /* seeded: the same seed gives the same first loss, another seed not */
    assert_true(bench_train_loss("3", NULL) == l3);
    assert_true(bench_train_loss("4", NULL) != l3);

    const char *c[] = {"bench", model_path("mlp"), "--device", "cpu", "--train", "--iters", "1",
                       "--warmup", "0", NULL};
    r = run(c);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "mode:    training step (mse loss, adamw)\n");
    expect_contains(r.out, "\nloss:    first ");
    expect_contains(r.out, "target float [2,8,64], random (seed 0)\n");
    run_free(&r);
}

static void exec_options_usage_errors(void **state)
{
    (void)state;
    const char *mlp = model_path("mlp");
    const char *cases[][8] = {
        {"bench", NULL},
        {"bench", mlp, "--iters", "0", NULL},
        {"bench", mlp, "--iters", NULL},
        {"bench", mlp, "--warmup", "-1", NULL},
        {"bench", mlp, "--frob", NULL},
        {"bench", mlp, mlp, NULL},
        {"bench", mlp, "--dtype", "int8", NULL},
        {"bench", mlp, "--device", "tpu", NULL},
        {"bench", mlp, "--recipe", "fp9", NULL},
        {"bench", mlp, "--loss", "mse", NULL},
        {"bench", mlp, "--train", "--loss", "hinge", NULL},
        {"bench", mlp, "--dim", "N", NULL},
        {"bench", mlp, "--dim", "N=-2", NULL},
        {"bench", mlp, "--seed", "-1", NULL},
        {"run", mlp, "--dtype", "fp64", NULL},
        {"run", mlp, "--recipe", "mxfp9", NULL},
        {"run", mlp, "--device", NULL},
        {"train", mlp, "--data", "d.npz", "--recipe", "bogus", NULL},
        {"train", mlp, "--data", "d.npz", "--dtype", "int4", NULL},
        {"train", mlp, "--data", "d.npz", "--device", "tpu", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run(cases[i]);
        if (r.exit_code != 2) fprintf(stderr, "case %zu: exit %d: %s\n", i, r.exit_code, r.err);
        assert_int_equal(r.exit_code, 2);
        assert_one_error_line(&r);
        assert_string_equal(r.out, "");
        run_free(&r);
    }
    /* a missing model is bad input, not usage */
    const char *missing[] = {"bench", "/nonexistent/model.onnx", "--device", "cpu", NULL};
    run_result r = run(missing);
    assert_int_equal(r.exit_code, 1);
    assert_one_error_line(&r);
    run_free(&r);
}

/* The shared options reach the library: the CPU runs a recipe for
 * inference and for training but refuses a compute dtype (exit 3, as
 * teexec.h documents), profiles one run of run and bench (its per-run
 * profile) but no training step (a note, exit 0), and
 * deterministic mode comes from the flag or the environment. */
static void exec_options_reach_the_library(void **state)
{
    (void)state;
    const char *mlp = model_path("mlp");
    char mlp_data[1100];
    snprintf(mlp_data, sizeof mlp_data, "%s/models/mlp/train.npz", getenv("TEEXEC_SOURCE_ROOT"));
    const char *accepted[][10] = {
        {"bench", mlp, "--device", "cpu", "--iters", "1", "--recipe", "fp8-current", NULL},
        {"run", mlp, "--device", "cpu", "--recipe", "nvfp4", NULL},
        /* the CPU trainer runs every recipe too (issue 16) */
        {"bench", mlp, "--device", "cpu", "--iters", "1", "--train", "--recipe", "mxfp8", NULL},
        {"train", mlp, "--data", mlp_data, "--device", "cpu", "--recipe", "fp8-current", NULL},
    };
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        run_result r = run(accepted[i]);
        if (r.exit_code != 0) fprintf(stderr, "case %zu: exit %d: %s\n", i, r.exit_code, r.err);
        assert_int_equal(r.exit_code, 0);
        run_free(&r);
    }
    const char *refused[][10] = {
        {"bench", mlp, "--device", "cpu", "--iters", "1", "--train", "--dtype", "bf16", NULL},
        {"train", mlp, "--data", mlp_data, "--device", "cpu", "--dtype", "bf16", NULL},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        run_result r = run(refused[i]);
        if (r.exit_code != 3) fprintf(stderr, "case %zu: exit %d: %s\n", i, r.exit_code, r.err);
        assert_int_equal(r.exit_code, 3);
        assert_one_error_line(&r);
        assert_string_equal(r.out, "");
        run_free(&r);
    }

    const char *prof[] = {"bench", mlp, "--device", "cpu", "--iters", "1", "--warmup", "0",
                          "--profile", NULL};
    run_result r = run(prof);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "time:    min ");
    expect_contains(r.err, "teexec: bench: profile:\nrun profile (cpu, wall time of each fuser "
                           "group and standard node)");
    expect_contains(r.err, "fuser group of 7 ops (/ln/LayerNormalization_1..)");
    run_free(&r);
    const char *run_prof[] = {"run", mlp, "--device", "cpu", "--profile", NULL};
    r = run(run_prof);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.err, "teexec: run: profile:\nrun profile (cpu,");
    run_free(&r);
    /* the trainer keeps no CPU profile: a note, and the command succeeds */
    const char *train_prof[] = {"train", mlp, "--data", mlp_data, "--steps", "1", "--device",
                                "cpu", "--profile", NULL};
    r = run(train_prof);
    if (r.exit_code != 0) fprintf(stderr, "train --profile: %s\n", r.err);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.err, "--profile: no profile of this command on the cpu device");
    run_free(&r);

    const char *det[] = {"bench", mlp, "--device", "cpu", "--iters", "1", "--warmup", "0",
                         "--json", NULL};
    r = run(det);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "\"deterministic\": false");
    expect_contains(r.out, "\"cuda_graphs\": false"); /* the CPU has none */
    run_free(&r);
    setenv("TEEXEC_DETERMINISTIC", "1", 1);
    r = run(det);
    unsetenv("TEEXEC_DETERMINISTIC");
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "\"deterministic\": true");
    run_free(&r);
    const char *det_flag[] = {"bench", mlp, "--device", "cpu", "--iters", "1", "--warmup", "0",
                              "--deterministic", "--no-graphs", NULL};
    r = run(det_flag);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "\ndeterministic: on\n");
    run_free(&r);
}

static void exec_options_in_help(void **state)
{
    (void)state;
    const char *cmds[] = {"run", "train", "bench"};
    for (size_t i = 0; i < 3; i++) {
        const char *c[] = {cmds[i], "--help", NULL};
        run_result r = run(c);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.err, "");
        expect_contains(r.out, "--device auto|cpu|cuda");
        expect_contains(r.out, "--recipe R");
        expect_contains(r.out, "--dtype fp32|bf16|fp16");
        expect_contains(r.out, "--deterministic");
        expect_contains(r.out, "TEEXEC_DETERMINISTIC=1");
        expect_contains(r.out, "--no-graphs");
        expect_contains(r.out, "--profile");
        run_free(&r);
    }
    const char *hb[] = {"help", "bench", NULL};
    run_result r = run(hb);
    assert_int_equal(r.exit_code, 0);
    expect_contains(r.out, "usage: teexec bench MODEL.onnx [options]");
    expect_contains(r.out, "--warmup N");
    expect_contains(r.out, "--train");
    run_free(&r);
    /* no command is listed as unimplemented any more */
    const char *h[] = {"--help", NULL};
    r = run(h);
    expect_contains(r.out, "  bench ");
    assert_null(strstr(r.out, "not implemented"));
    run_free(&r);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli PATH/TO/teexec\n");
        return 2;
    }
    teexec_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_checker_rejects_bad_json),
        cmocka_unit_test(version_and_help),
        cmocka_unit_test(usage_errors_exit_2),
        cmocka_unit_test(bench_text_on_cpu),
        cmocka_unit_test(bench_json_inference_and_dims),
        cmocka_unit_test(bench_train_on_cpu),
        cmocka_unit_test(exec_options_usage_errors),
        cmocka_unit_test(exec_options_reach_the_library),
        cmocka_unit_test(exec_options_in_help),
        cmocka_unit_test(plan_explains_gpt2_block),
        cmocka_unit_test(plan_bad_options_exit_2),
        cmocka_unit_test(convert_is_idempotent_and_runs),
        cmocka_unit_test(convert_external_data),
        cmocka_unit_test(convert_kv_cache),
        cmocka_unit_test(missing_file_exits_1),
        cmocka_unit_test(validation_error_one_line_with_node),
        cmocka_unit_test(inspect_text_and_json_of_odd_names),
        cmocka_unit_test(inspect_testdata_model),
        cmocka_unit_test(malformed_corpus_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
