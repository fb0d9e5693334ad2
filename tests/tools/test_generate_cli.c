/* Tests for `teexec generate` (tools/cmd_generate.c), running the built
 * binary (its path in argv[1]) on the tiny KV-cache decoder of
 * tests/exec/kv_model.h written to a temporary file, and on a zoo export:
 * KV and recompute print the same greedy ids, --json carries the ids and
 * the timings, a .npy prompt of rows of different lengths, seeded
 * sampling repeats, --stop-ids, and bad input's exit statuses with one
 * error line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../exec/kv_model.h"
#include "teexec/teexec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *bin;
static char model_path[256], npy_path[256], err_path[256];

typedef struct result {
    int code;
    char out[65536];
    char err[4096];
} result;

/* Runs `teexec generate ARGS` through the shell; args are trusted test text. */
static result *gen(const char *args)
{
    static result r;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' generate %s 2>'%s'", bin, args, err_path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = '\0';
    int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    FILE *e = fopen(err_path, "r");
    assert_non_null(e);
    n = fread(r.err, 1, sizeof r.err - 1, e);
    r.err[n] = '\0';
    fclose(e);
    return &r;
}

static void expect_ok(const result *r)
{
    if (r->code != 0) fail_msg("exit %d, stderr: %s", r->code, r->err);
}

static void expect_error(const result *r, int code, const char *needle)
{
    if (r->code != code || !strstr(r->err, needle) || strncmp(r->err, "teexec: ", 8) != 0 ||
        strchr(r->err, '\n') != r->err + strlen(r->err) - 1)
        fail_msg("expected exit %d and one line with \"%s\"; got exit %d: %s", code, needle,
                 r->code, r->err);
}

static int setup(void **state)
{
    (void)state;
    snprintf(model_path, sizeof model_path, "/tmp/teexec-gen-cli-%d.onnx", (int)getpid());
    snprintf(npy_path, sizeof npy_path, "/tmp/teexec-gen-cli-%d.npy", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/teexec-gen-cli-%d.err", (int)getpid());
    size_t size = 0;
    uint8_t *bytes = kv_model_bytes(true, &size);
    FILE *f = fopen(model_path, "wb");
    if (!f || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) return -1;
    free(bytes);
    mb_free_all();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(model_path);
    unlink(npy_path);
    unlink(err_path);
    return 0;
}

static void help_lists_the_options(void **state)
{
    (void)state;
    result *r = gen("--help");
    expect_ok(r);
    const char *opts[] = {"--prompt-ids", "--prompt", "--max-new-tokens", "--temperature",
                          "--top-k", "--top-p", "--seed", "--batch", "--stop-ids", "--device",
                          "--json"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strstr(r->out, opts[i])) fail_msg("help lacks %s", opts[i]);
}

static void kv_and_recompute_print_the_same_ids(void **state)
{
    (void)state;
    char args[1024], kv[4096];
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,17,5,29,11 --max-new-tokens 32", model_path);
    result *r = gen(args);
    expect_ok(r);
    snprintf(kv, sizeof kv, "%.4000s", r->out);
    /* one line of 32 ids */
    size_t spaces = 0;
    for (const char *c = kv; *c; c++) spaces += *c == ' ';
    assert_int_equal(spaces, 31);
    assert_true(strchr(kv, '\n') == kv + strlen(kv) - 1);
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,17,5,29,11 --max-new-tokens 32 --mode recompute",
             model_path);
    r = gen(args);
    expect_ok(r);
    assert_string_equal(r->out, kv);
    /* the exact past (no buckets) prints the same */
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,17,5,29,11 --max-new-tokens 32 --past-bucket 1",
             model_path);
    r = gen(args);
    expect_ok(r);
    assert_string_equal(r->out, kv);
    /* --json: mode, the same ids, the timings */
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,17,5,29,11 --max-new-tokens 32 --json",
             model_path);
    r = gen(args);
    expect_ok(r);
    const char *keys[] = {"\"mode\": \"kv\"", "\"prefill_ms\"", "\"decode_ms\"",
                          "\"per_token_ms\"", "\"tokens_per_s\"", "\"model_runs\": 32",
                          "\"steps\": 32", "\"plans\": 3"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strstr(r->out, keys[i])) fail_msg("--json lacks %s:\n%s", keys[i], r->out);
    char first[32];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(kv, " "), kv);
    assert_non_null(strstr(r->out, first));
}

static void npy_prompt_rows_and_batch(void **state)
{
    (void)state;
    /* rows of 5 and 2 tokens, the second padded with -1 */
    int64_t ids[2][5] = {{3, 17, 5, 29, 11}, {30, 2, -1, -1, -1}};
    int64_t dims[2] = {2, 5};
    teexec_tensor *t = NULL;
    assert_null(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 2, dims, ids, sizeof ids, &t));
    assert_null(teexec_tensor_save_file(t, npy_path, NULL));
    teexec_tensor_destroy(t);
    char args[1024], alone0[1024], alone1[1024];
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,17,5,29,11 --max-new-tokens 12", model_path);
    result *r = gen(args);
    expect_ok(r);
    snprintf(alone0, sizeof alone0, "%.1000s", r->out);
    snprintf(args, sizeof args, "'%s' --prompt-ids 30,2 --max-new-tokens 12", model_path);
    r = gen(args);
    expect_ok(r);
    snprintf(alone1, sizeof alone1, "%.1000s", r->out);
    /* --batch 3 repeats the rows: 0, 1, 0 */
    snprintf(args, sizeof args, "'%s' --prompt '%s' --max-new-tokens 12 --batch 3", model_path,
             npy_path);
    r = gen(args);
    expect_ok(r);
    char want[4096];
    snprintf(want, sizeof want, "%s%s%s", alone0, alone1, alone0);
    assert_string_equal(r->out, want);
    /* a stop id ends a row after printing it */
    char stop[32];
    snprintf(stop, sizeof stop, "%.*s", (int)strcspn(alone1, " "), alone1);
    snprintf(args, sizeof args, "'%s' --prompt-ids 30,2 --max-new-tokens 12 --stop-ids %s",
             model_path, stop);
    r = gen(args);
    expect_ok(r);
    snprintf(want, sizeof want, "%s\n", stop);
    assert_string_equal(r->out, want);
}

static void seeded_sampling_repeats(void **state)
{
    (void)state;
    char args[1024], first[4096];
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,17,5 --max-new-tokens 24 --temperature 1.0 "
             "--top-k 10 --top-p 0.95 --seed 11", model_path);
    result *r = gen(args);
    expect_ok(r);
    snprintf(first, sizeof first, "%.4000s", r->out);
    r = gen(args);
    expect_ok(r);
    assert_string_equal(r->out, first);
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,17,5 --max-new-tokens 24 --temperature 1.0 "
             "--top-k 10 --top-p 0.95 --seed 12", model_path);
    r = gen(args);
    expect_ok(r);
    assert_string_not_equal(r->out, first);
}

static void zoo_gpt2_greedy_matches_pytorch(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[2048], args[4096], want[1024] = "";
    snprintf(path, sizeof path, "%s/models/zoo/gpt2_dynamo/expected/greedy_ids.npy",
             root ? root : ".");
    teexec_tensor *t = NULL;
    assert_null(teexec_tensor_load_file(path, &t));
    const int64_t *ref = teexec_tensor_data_const(t);
    char prompt[256] = "";
    for (int i = 0; i < 8; i++)
        snprintf(prompt + strlen(prompt), sizeof prompt - strlen(prompt), "%s%lld", i ? "," : "",
                 (long long)ref[i]);
    for (int i = 8; i < 16; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i > 8 ? " " : "",
                 (long long)ref[i]);
    strcat(want, "\n");
    teexec_tensor_destroy(t);
    snprintf(args, sizeof args, "'%s/models/zoo/gpt2_dynamo/model.onnx' --prompt-ids %s "
             "--max-new-tokens 8 --device cpu", root ? root : ".", prompt);
    result *r = gen(args);
    expect_ok(r);
    assert_string_equal(r->out, want);
}

static void bad_input_exit_statuses(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,32 --max-new-tokens 4", model_path);
    expect_error(gen(args), 1, "vocabulary");
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,4 --max-new-tokens 4 --max-length 3",
             model_path);
    expect_error(gen(args), 1, "max_length");
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,4 --max-new-tokens 4 --top-p 2", model_path);
    expect_error(gen(args), 2, "--top-p");
    snprintf(args, sizeof args, "'%s' --prompt-ids 3,x --max-new-tokens 4", model_path);
    expect_error(gen(args), 2, "--prompt-ids");
    snprintf(args, sizeof args, "'%s' --prompt-ids 3", model_path);
    expect_error(gen(args), 2, "--max-new-tokens");
    snprintf(args, sizeof args, "'%s' --prompt-ids 3 --max-new-tokens 2 --deterministic",
             model_path);
    expect_error(gen(args), 2, "--deterministic");
    expect_error(gen("/nonexistent.onnx --prompt-ids 3 --max-new-tokens 2"), 1, "nonexistent");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_generate_cli PATH/TO/teexec\n");
        return 2;
    }
    bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_lists_the_options),
        cmocka_unit_test(kv_and_recompute_print_the_same_ids),
        cmocka_unit_test(npy_prompt_rows_and_batch),
        cmocka_unit_test(seeded_sampling_repeats),
        cmocka_unit_test(zoo_gpt2_greedy_matches_pytorch),
        cmocka_unit_test(bad_input_exit_statuses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
