/* Golden plan tests: the JSON plan (tx_fuser_plan_json) of each te.ops
 * sample model in models/ for a training step under recipes none (bf16),
 * fp8-current, mxfp8 and nvfp4 on devices sm_90 and sm_100, compared byte
 * for byte with tests/planner/golden/<model>.<recipe>.<device>.json; the
 * same for the PyTorch exports (mlp, mlp_tanh, mlp_opset14, gpt2_block, llama_block)
 * after lowering to te.ops (golden/lowered_<model>.*.json).
 *
 * After a deliberate change to the planner, rewrite the files with
 *     TEEXEC_UPDATE_GOLDEN=1 meson test -C <build> test_plan_golden
 * and review the diff before committing it.
 *
 * Also here: a HYBRID recipe on te_mlp declines BackwardActivationBias
 * naming the E5M2 grad format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "import/infer_graph.h"
#include "exec/model_lower.h"
#include "planner/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct loaded {
    tx_onnx_file *file;
    tx_ir_model *ir;
    tx_infer_value *vals;
    teexec_model *model, *lowered; /* lowered PyTorch exports: ir/file borrowed from lowered */
} loaded;

static const char *root(void)
{
    const char *r = getenv("TEEXEC_SOURCE_ROOT");
    return r ? r : ".";
}

static void check(teexec_status *st, const char *what)
{
    if (!st) return;
    fprintf(stderr, "%s: %s\n", what, teexec_status_message(st));
    teexec_status_destroy(st);
    fail_msg("%s failed", what);
}

static void load_model(const char *name, loaded *l)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", root(), name);
    memset(l, 0, sizeof *l);
    check(tx_onnx_load_file(path, NULL, &l->file), path);
    check(tx_ir_build(l->file, &l->ir), "ir build");
    check(tx_ir_validate(l->ir), "ir validate");
    check(tx_infer_graph(l->ir->graph, l->file, NULL, NULL, 0, &l->vals), "infer graph");
}

/* A PyTorch export (standard ONNX), lowered to te.ops first. */
static void load_lowered(const char *name, loaded *l)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", root(), name);
    memset(l, 0, sizeof *l);
    check(teexec_model_load_file(path, NULL, &l->model), path);
    check(tx_model_lower(l->model, NULL, &l->lowered), "lower");
    l->ir = l->lowered->ir;
    l->file = l->lowered->file;
    check(tx_infer_graph(l->ir->graph, l->file, NULL, NULL, 0, &l->vals), "infer graph");
}

static void unload(loaded *l)
{
    tx_infer_values_free(l->vals, l->ir->graph->n_values);
    if (l->lowered) {
        teexec_model_destroy(l->lowered);
        teexec_model_destroy(l->model);
        return;
    }
    tx_ir_model_free(l->ir);
    tx_onnx_file_free(l->file);
}

static tx_fuser_plan *plan(const loaded *l, const char *recipe, const char *device, bool training)
{
    tx_plan_request req;
    memset(&req, 0, sizeof req);
    check(tx_recipe_parse(recipe, &req.recipe), recipe);
    check(tx_device_caps_parse(device, &req.device), device);
    req.training = training;
    req.vals = l->vals;
    req.n_vals = l->ir->graph->n_values;
    tx_fuser_plan *p = NULL;
    check(tx_fuser_plan_build(l->ir->graph, &req, &p), "plan");
    return p;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0) break;
    }
    fclose(fp);
    *len = n;
    return buf;
}

static const struct {
    const char *recipe, *file;
} recipes[] = {
    {"none,dtype=bf16", "none-bf16"},
    {"fp8-current", "fp8-current"},
    {"mxfp8", "mxfp8"},
    {"nvfp4", "nvfp4"},
};
static const char *devices[] = {"sm_90", "sm_100"};

static void golden_model(const char *model, bool lower)
{
    bool update = getenv("TEEXEC_UPDATE_GOLDEN") && strcmp(getenv("TEEXEC_UPDATE_GOLDEN"), "1") == 0;
    loaded l;
    if (lower) load_lowered(model, &l);
    else load_model(model, &l);
    int mismatches = 0;
    for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++)
        for (size_t d = 0; d < sizeof devices / sizeof devices[0]; d++) {
            tx_fuser_plan *p = plan(&l, recipes[r].recipe, devices[d], true);
            char *json = NULL;
            check(tx_fuser_plan_json(p, l.ir->graph, &json), "json");
            tx_fuser_plan_free(p);
            char path[1024];
            snprintf(path, sizeof path, "%s/tests/planner/golden/%s%s.%s.%s.json", root(),
                     lower ? "lowered_" : "", model, recipes[r].file, devices[d]);
            size_t jlen = strlen(json);
            if (update) {
                FILE *fp = fopen(path, "wb");
                if (!fp || fwrite(json, 1, jlen, fp) != jlen) fail_msg("cannot write %s", path);
                fclose(fp);
                fprintf(stderr, "rewrote %s\n", path);
            } else {
                size_t len = 0;
                char *want = read_all(path, &len);
                if (!want) {
                    fprintf(stderr, "missing golden file %s (run with TEEXEC_UPDATE_GOLDEN=1)\n", path);
                    mismatches++;
                } else if (len != jlen || memcmp(want, json, len) != 0) {
                    size_t i = 0;
                    while (i < len && i < jlen && want[i] == json[i]) i++;
                    fprintf(stderr, "%s differs at byte %zu: got \"%.60s\"\n", path, i, json + i);
                    mismatches++;
                }
                free(want);
            }
            free(json);
        }
    unload(&l);
    assert_int_equal(mismatches, 0);
}

static void golden_te_mlp(void **state) { (void)state; golden_model("te_mlp", false); }
static void golden_te_gpt2_block(void **state) { (void)state; golden_model("te_gpt2_block", false); }
static void golden_te_llama_block(void **state) { (void)state; golden_model("te_llama_block", false); }
static void golden_te_moe_block(void **state) { (void)state; golden_model("te_moe_block", false); }
/* PyTorch 1.13 exports, lowered to te.ops (import/lower.h) before planning. */
static void golden_lowered_mlp(void **state) { (void)state; golden_model("mlp", true); }
static void golden_lowered_mlp_tanh(void **state) { (void)state; golden_model("mlp_tanh", true); }
static void golden_lowered_mlp_opset14(void **state) { (void)state; golden_model("mlp_opset14", true); }
static void golden_lowered_gpt2_block(void **state) { (void)state; golden_model("gpt2_block", true); }
static void golden_lowered_llama_block(void **state) { (void)state; golden_model("llama_block", true); }

/* te_mlp: Linear fc1, Bias, GELU. Under mxfp8:hybrid the fused dact+dbias
 * kernel (E4M3 only) must not write fc1's E5M2 grad. */
static void hybrid_declines_backward_activation_bias(void **state)
{
    (void)state;
    loaded l;
    load_model("te_mlp", &l);
    tx_fuser_plan *p = plan(&l, "mxfp8:hybrid", "sm_100", true);
    int found = 0;
    for (size_t i = 0; i < p->n_declines; i++)
        if (p->declines[i].fusion == TX_FUSION_BWD_ACT_BIAS) {
            assert_non_null(strstr(p->declines[i].reason, "E5M2"));
            assert_non_null(strstr(p->declines[i].reason, "E4M3 only"));
            found++;
        }
    assert_int_equal(found, 1);
    for (size_t g = 0; g < p->n_groups; g++)
        for (int32_t k = 0; k < p->groups[g].n_backward; k++)
            assert_int_not_equal(p->groups[g].backward[k].fusion, TX_FUSION_BWD_ACT_BIAS);
    char *text = NULL;
    check(tx_fuser_plan_text(p, l.ir->graph, true, &text), "text");
    assert_non_null(strstr(text, "BackwardActivationBias (backward) not used: recipe mxfp8:hybrid"));
    free(text);
    tx_fuser_plan_free(p);
    unload(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_te_mlp),
        cmocka_unit_test(golden_te_gpt2_block),
        cmocka_unit_test(golden_te_llama_block),
        cmocka_unit_test(golden_te_moe_block),
        cmocka_unit_test(golden_lowered_mlp),
        cmocka_unit_test(golden_lowered_mlp_tanh),
        cmocka_unit_test(golden_lowered_mlp_opset14),
        cmocka_unit_test(golden_lowered_gpt2_block),
        cmocka_unit_test(golden_lowered_llama_block),
        cmocka_unit_test(hybrid_declines_backward_activation_bias),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
