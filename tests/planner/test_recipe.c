/* Tests for planner/recipe.c: recipe parsing, defaults, names that parse
 * back to the same recipe, refusals naming the accepted list; device
 * capability parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "planner/plan.h"

static tx_recipe parse_ok(const char *text)
{
    tx_recipe r;
    memset(&r, 0xab, sizeof r);
    teexec_status *st = tx_recipe_parse(text, &r);
    if (st) fail_msg("%s: %s", text, teexec_status_message(st));
    return r;
}

static void expect_refused(const char *text, const char *needle)
{
    tx_recipe r;
    memset(&r, 0, sizeof r);
    r.kind = TX_RECIPE_MXFP8;
    teexec_status *st = tx_recipe_parse(text, &r);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("message for %s lacks \"%s\": %s", text, needle, teexec_status_message(st));
    /* every refusal lists the accepted recipes */
    assert_non_null(strstr(teexec_status_message(st), "fp8-block"));
    teexec_status_destroy(st);
    assert_int_equal(r.kind, TX_RECIPE_MXFP8); /* untouched on failure */
}

static void defaults_follow_te(void **state)
{
    (void)state;
    tx_recipe r = parse_ok("none");
    assert_int_equal(r.kind, TX_RECIPE_NONE);
    assert_int_equal(r.compute_dtype, TEEXEC_DTYPE_UNDEFINED);
    assert_false(r.hybrid);

    r = parse_ok("fp8-delayed");
    assert_int_equal(r.kind, TX_RECIPE_FP8_DELAYED);
    assert_int_equal(r.amax_history_len, 1024);
    assert_int_equal(r.compute_dtype, TEEXEC_DTYPE_BFLOAT16);
    /* TE: DelayedScaling and Float8CurrentScaling default to
     * Format.HYBRID (E5M2 grads); MXFP8BlockScaling to E4M3 */
    assert_true(r.hybrid);
    assert_true(parse_ok("fp8-current").hybrid);
    assert_false(parse_ok("fp8-block").hybrid);
    assert_false(parse_ok("nvfp4").hybrid);

    r = parse_ok("nvfp4");
    assert_true(r.nvfp4_rht);
    assert_true(r.nvfp4_stochastic);
    assert_true(r.nvfp4_2d_weights);

    r = parse_ok("mxfp8");
    assert_false(r.mxfp8_2d_weights);
    assert_false(r.hybrid);

    /* TE: Float8BlockScaling's scales are powers of two unless
     * NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1; current scaling's are not */
    assert_true(parse_ok("fp8-block").pow2_scales);
    assert_false(parse_ok("fp8-current").pow2_scales);
    assert_false(parse_ok("fp8-delayed").pow2_scales);
}

static void options_and_hybrid(void **state)
{
    (void)state;
    tx_recipe r = parse_ok("fp8-current:hybrid");
    assert_int_equal(r.kind, TX_RECIPE_FP8_CURRENT);
    assert_true(r.hybrid);
    r = parse_ok("fp8-delayed:hybrid,history=16");
    assert_true(r.hybrid);
    assert_int_equal(r.amax_history_len, 16);
    /* ":e4m3": E4M3 grads too */
    assert_false(parse_ok("fp8-current:e4m3").hybrid);
    assert_false(parse_ok("fp8-delayed:E4M3,history=8").hybrid);
    assert_false(parse_ok("mxfp8:e4m3").hybrid);
    r = parse_ok("nvfp4,rht=0,sr=0,2d=0");
    assert_false(r.nvfp4_rht);
    assert_false(r.nvfp4_stochastic);
    assert_false(r.nvfp4_2d_weights);
    r = parse_ok("mxfp8,2d=1");
    assert_true(r.mxfp8_2d_weights);
    assert_false(parse_ok("fp8-block,pow2=0").pow2_scales);
    assert_true(parse_ok("fp8-current:hybrid,pow2=1").pow2_scales);
    r = parse_ok("none,dtype=bf16");
    assert_int_equal(r.compute_dtype, TEEXEC_DTYPE_BFLOAT16);
    r = parse_ok("fp8-block,dtype=fp16");
    assert_int_equal(r.compute_dtype, TEEXEC_DTYPE_FLOAT16);
}

static void names_round_trip(void **state)
{
    (void)state;
    const char *texts[] = {"none", "none,dtype=bf16", "fp8-delayed", "fp8-delayed,history=16",
                           "fp8-delayed:e4m3", "fp8-current", "fp8-current:e4m3,pow2=1",
                           "fp8-block", "mxfp8", "mxfp8:hybrid,2d=1",
                           "nvfp4", "nvfp4,2d=0,rht=0,sr=0", "fp8-current,dtype=fp32",
                           "mxfp8,first_last_hp=1,dtype=fp16", "fp8-block,pow2=0",
                           "fp8-current,pow2=1"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        tx_recipe r = parse_ok(texts[i]);
        char buf[128];
        const char *name = tx_recipe_name(&r, buf, sizeof buf);
        assert_string_equal(name, texts[i]);
        tx_recipe back = parse_ok(name);
        assert_int_equal(back.kind, r.kind);
        assert_int_equal(back.hybrid, r.hybrid);
        assert_int_equal(back.compute_dtype, r.compute_dtype);
        assert_int_equal(back.amax_history_len, r.amax_history_len);
        assert_int_equal(back.nvfp4_rht, r.nvfp4_rht);
        assert_int_equal(back.keep_first_last_hp, r.keep_first_last_hp);
        assert_int_equal(back.pow2_scales, r.pow2_scales);
    }
    tx_recipe r = parse_ok("mxfp8:hybrid");
    assert_string_equal(tx_recipe_name(&r, NULL, 0), "mxfp8"); /* no buffer: the bare kind */
    /* the default grad format is not written: ":hybrid" of fp8-current is
     * its default */
    char buf[64];
    r = parse_ok("fp8-current:hybrid");
    assert_string_equal(tx_recipe_name(&r, buf, sizeof buf), "fp8-current");
}

static void refusals_say_why(void **state)
{
    (void)state;
    expect_refused("fp9", "unknown recipe");
    expect_refused("", "empty");
    expect_refused("nvfp4:hybrid", ":hybrid applies to");
    expect_refused("fp8-block:hybrid", ":hybrid applies to");
    expect_refused("mxfp8:e5m2", "hybrid or e4m3");
    expect_refused("mxfp8,history=4", "fp8-delayed only");
    expect_refused("fp8-delayed,history=0", "history=0");
    expect_refused("fp8-delayed,history=12x", "history=12x");
    expect_refused("mxfp8,rht=0", "nvfp4 only");
    expect_refused("nvfp4,2d=2", "0 or 1");
    expect_refused("none,dtype=int8", "dtype=int8");
    expect_refused("nvfp4,dtype=fp16", "bf16 only");
    expect_refused("mxfp8,foo=1", "unknown option");
    expect_refused("mxfp8,=1", "key=value");
    expect_refused("mxfp8,2d", "key=value");
    expect_refused("none,first_last_hp=1", "quantized recipes only");
    expect_refused("mxfp8,pow2=1", "fp8-current and fp8-block only");
    expect_refused("fp8-block,pow2=yes", "pow2= takes 0 or 1");
}

static void devices(void **state)
{
    (void)state;
    tx_device_caps c;
    assert_null(tx_device_caps_parse("cpu", &c));
    assert_string_equal(c.name, "cpu");
    assert_int_equal(c.sm, 0);
    assert_false(c.fp8_gemm || c.fp8_block_gemm || c.mx_gemm);

    assert_null(tx_device_caps_parse("h200", &c));
    assert_string_equal(c.name, "sm_90");
    assert_true(c.fp8_gemm);
    assert_true(c.fp8_block_gemm);
    assert_false(c.mx_gemm);

    assert_null(tx_device_caps_parse("sm_100", &c));
    assert_int_equal(c.sm, 100);
    assert_true(c.mx_gemm);

    assert_null(tx_device_caps_parse("b200", &c));
    assert_string_equal(c.name, "sm_100");

    assert_null(tx_device_caps_parse("sm_89", &c));
    assert_true(c.fp8_gemm);
    assert_false(c.fp8_block_gemm);

    assert_null(tx_device_caps_parse("sm_120", &c));
    assert_true(c.fp8_gemm);
    assert_false(c.mx_gemm); /* TE: MXFP8 not on sm_120 yet */

    const char *bad[] = {"gpu", "sm_", "sm_9x", "sm_7", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        teexec_status *st = tx_device_caps_parse(bad[i], &c);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(teexec_status_message(st), "sm_90"));
        teexec_status_destroy(st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_follow_te),
        cmocka_unit_test(options_and_hybrid),
        cmocka_unit_test(names_round_trip),
        cmocka_unit_test(refusals_say_why),
        cmocka_unit_test(devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
