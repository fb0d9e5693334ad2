/* Tests for planner/groups.c: chains of te.ops ops with residuals (internal
 * channels) and forks, chain breaks at standard nodes, attention and
 * multi-reader values, the ancestor rule for extra inputs (groups the same
 * in every valid node order, no cycle between groups), the chain's
 * extra inputs/outputs, and first_op_requiring_backward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan_fixture.h"

static const char *gname(const fx *f, const tx_plan_group *grp, int32_t i)
{
    return f->ir->graph->nodes[grp->nodes[i]].name;
}

static const char *vname(const fx *f, int32_t v)
{
    return v >= 0 ? f->ir->graph->values[v].name : "-";
}

static void residual_stays_inside_one_chain(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "res");
    mb_input(g, "x", FX_FLOAT, "2,4,32");
    mb_output(g, "y", FX_FLOAT, "2,4,32");
    fx_param(g, "ln_w", "32");
    fx_param(g, "ln_b", "32");
    fx_param(g, "w", "32,32");
    fx_te(g, "fork", "MakeExtraOutput", "x", "h0,res");
    fx_te(g, "ln", "LayerNorm", "h0,ln_w,ln_b", "h1");
    fx_te(g, "fc", "Linear", "h1,w", "h2");
    fx_te(g, "add", "AddExtraInput", "h2,res", "y");
    fx f;
    fx_open_model(&f, m);
    fx_plan(&f, &(fx_req){.recipe = "none"});
    assert_int_equal(f.plan->n_groups, 1);
    const tx_plan_group *grp = &f.plan->groups[0];
    assert_int_equal(grp->kind, TX_GROUP_CHAIN);
    assert_int_equal(grp->n_nodes, 4);
    assert_int_equal(grp->ops[0], TX_TE_MAKE_EXTRA_OUTPUT);
    assert_int_equal(grp->ops[3], TX_TE_ADD_EXTRA_INPUT);
    assert_string_equal(vname(&f, grp->main_input), "x");
    assert_string_equal(vname(&f, grp->main_output), "y");
    assert_int_equal(grp->n_extra_inputs, 0);  /* res is made inside */
    assert_int_equal(grp->n_extra_outputs, 0); /* and read inside only */
    assert_int_equal(grp->first_op_requiring_backward, 4); /* inference */
    fx_free(&f);
    mb_free_all();
}

/* The fork's extra output is a graph output: it leaves the chain. */
static void fork_read_outside_is_an_extra_output(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "fork");
    mb_input(g, "x", FX_FLOAT, "2,32");
    mb_output(g, "y", FX_FLOAT, "2,32");
    mb_output(g, "res", FX_FLOAT, "2,32");
    fx_param(g, "w", "32,32");
    fx_te(g, "fork", "MakeExtraOutput", "x", "h0,res");
    fx_te(g, "fc", "Linear", "h0,w", "y");
    fx f;
    fx_open_model(&f, m);
    fx_plan(&f, &(fx_req){.recipe = "none"});
    assert_int_equal(f.plan->n_groups, 1);
    const tx_plan_group *grp = &f.plan->groups[0];
    assert_int_equal(grp->n_extra_outputs, 1);
    assert_string_equal(vname(&f, grp->extra_outputs[0]), "res");
    fx_free(&f);
    mb_free_all();
}

/* rms's output has two readers: the chain ends there. fq's chain may not
 * take add, whose other input (from fk) is no ancestor of fq: in one of the
 * two node orders below fk runs after fq, so add starts a chain of its own
 * in both (the groups may not depend on the node order). */
static void multi_reader_value_ends_the_chain(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        Onnx__GraphProto *g;
        Onnx__ModelProto *m = fx_model(&g, "qk");
        mb_input(g, "x", FX_FLOAT, "2,32");
        mb_output(g, "y", FX_FLOAT, "2,32");
        fx_param(g, "nw", "32");
        fx_param(g, "wq", "32,32");
        fx_param(g, "wk", "32,32");
        fx_te(g, "rms", "RMSNorm", "x,nw", "h");
        if (order == 0) {
            fx_te(g, "fk", "Linear", "h,wk", "k");
            fx_te(g, "fq", "Linear", "h,wq", "q");
        } else {
            fx_te(g, "fq", "Linear", "h,wq", "q");
            fx_te(g, "fk", "Linear", "h,wk", "k");
        }
        fx_te(g, "add", "AddExtraInput", "q,k", "y");
        fx f;
        fx_open_model(&f, m);
        fx_plan(&f, &(fx_req){.recipe = "none"});
        assert_int_equal(f.plan->n_groups, 4);
        assert_int_equal(fx_group_of(&f, "rms")->n_nodes, 1);
        assert_int_equal(fx_group_of(&f, "fk")->n_nodes, 1);
        assert_int_equal(fx_group_of(&f, "fq")->n_nodes, 1);
        const tx_plan_group *a = fx_group_of(&f, "add");
        assert_int_equal(a->n_nodes, 1);
        assert_string_equal(vname(&f, a->main_input), "q");
        assert_int_equal(a->n_extra_inputs, 1);
        assert_string_equal(vname(&f, a->extra_inputs[0]), "k");
        /* groups in the order of their first nodes: a topological order */
        for (size_t i = 1; i < f.plan->n_groups; i++)
            assert_true(f.plan->groups[i - 1].nodes[0] < f.plan->groups[i].nodes[0]);
        fx_free(&f);
        mb_free_all();
    }
}

/* "a,b,c": the names of the nodes of the group holding node `name`, in the
 * group's order. */
static void group_text(const fx *f, const char *name, char *buf, size_t size)
{
    const tx_plan_group *grp = fx_group_of(f, name);
    assert_non_null(grp);
    size_t len = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < grp->n_nodes; i++) {
        int w = snprintf(buf + len, size - len, "%s%s", i ? "," : "", gname(f, grp, i));
        assert_true(w > 0 && (size_t)w < size - len);
        len += (size_t)w;
    }
}

/* A parallel residual (GPT-NeoX, Phi: x + attn(ln1(x)) + mlp(ln2(x))) in
 * two valid node orders: branch a first, or branch m first. With "made
 * before the chain's first node" in node order, the second order let a's
 * chain take add1 (its other input, m1, came first) and the first did not,
 * so converting a model, which moves nodes, changed its groups. m1 is no
 * ancestor of a's chain: add1 starts a chain in both orders, and add2 joins
 * it, res (from fork) being an ancestor of add1. Same groups, same count,
 * same numbering where the first nodes keep their order. */
static void groups_do_not_depend_on_node_order(void **state)
{
    (void)state;
    static const char *const names[] = {"fork", "ln1", "fa", "ln2", "fm", "add1", "add2", "fo"};
    static const char *const expect[] = {"fork", "ln1,fa", "ln1,fa", "ln2,fm", "ln2,fm",
                                         "add1,add2,fo", "add1,add2,fo", "add1,add2,fo"};
    char seen[2][8][128];
    size_t n_groups[2];
    for (int order = 0; order < 2; order++) {
        Onnx__GraphProto *g;
        Onnx__ModelProto *m = fx_model(&g, "parallel");
        mb_input(g, "x", FX_FLOAT, "2,32");
        mb_output(g, "y", FX_FLOAT, "2,32");
        fx_param(g, "w1", "32");
        fx_param(g, "b1", "32");
        fx_param(g, "w2", "32");
        fx_param(g, "b2", "32");
        fx_param(g, "wa", "32,32");
        fx_param(g, "wm", "32,32");
        fx_param(g, "wo", "32,32");
        fx_te(g, "fork", "MakeExtraOutput", "x", "h0,res");
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == (order == 0)) {
                fx_te(g, "ln1", "LayerNorm", "h0,w1,b1", "a0");
                fx_te(g, "fa", "Linear", "a0,wa", "a1");
            } else {
                fx_te(g, "ln2", "LayerNorm", "h0,w2,b2", "m0");
                fx_te(g, "fm", "Linear", "m0,wm", "m1");
            }
        }
        fx_te(g, "add1", "AddExtraInput", "a1,m1", "s1");
        fx_te(g, "add2", "AddExtraInput", "s1,res", "s2");
        fx_te(g, "fo", "Linear", "s2,wo", "y");
        fx f;
        fx_open_model(&f, m);
        fx_plan(&f, &(fx_req){.recipe = "none"});
        n_groups[order] = f.plan->n_groups;
        for (size_t i = 0; i < 8; i++) {
            group_text(&f, names[i], seen[order][i], sizeof seen[order][i]);
            assert_string_equal(seen[order][i], expect[i]);
        }
        const tx_plan_group *tail = fx_group_of(&f, "add1");
        assert_string_equal(vname(&f, tail->main_input), "a1");
        assert_int_equal(tail->n_extra_inputs, 2);
        assert_string_equal(vname(&f, tail->extra_inputs[0]), "m1");
        assert_string_equal(vname(&f, tail->extra_inputs[1]), "res");
        for (size_t i = 1; i < f.plan->n_groups; i++)
            assert_true(f.plan->groups[i - 1].nodes[0] < f.plan->groups[i].nodes[0]);
        fx_free(&f);
        mb_free_all();
    }
    assert_int_equal(n_groups[0], 4);
    assert_int_equal(n_groups[1], n_groups[0]);
    for (size_t i = 0; i < 8; i++) assert_string_equal(seen[1][i], seen[0][i]);
}

static void standard_nodes_and_attention_stand_alone(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "mixed");
    mb_input(g, "q", FX_FLOAT, "1,4,2,8");
    mb_input(g, "k", FX_FLOAT, "1,4,2,8");
    mb_input(g, "v", FX_FLOAT, "1,4,2,8");
    mb_output(g, "y", FX_FLOAT, "1,4,16");
    fx_param(g, "w", "16,16");
    fx_param(g, "bias", "16");
    fx_te(g, "attn", "DotProductAttention", "q,k,v", "a");
    fx_te(g, "proj", "Linear", "a,w", "p");
    mb_node(g, "relu", "Relu", "", "p", "r");
    fx_te(g, "b", "Bias", "r,bias", "y");
    fx f;
    fx_open_model(&f, m);
    bool grads[3] = {true, false, false};
    fx_plan(&f, &(fx_req){.recipe = "none", .training = true, .input_needs_grad = grads, .n_inputs = 3});
    assert_int_equal(f.plan->n_groups, 4);
    const tx_plan_group *a = fx_group_of(&f, "attn"), *r = fx_group_of(&f, "relu");
    assert_int_equal(a->kind, TX_GROUP_CHAIN);
    assert_int_equal(a->n_nodes, 1);
    assert_int_equal(a->n_extra_inputs, 2); /* k, v */
    assert_int_equal(a->first_op_requiring_backward, 0); /* q needs a grad */
    assert_int_equal(r->kind, TX_GROUP_STANDARD);
    assert_null(r->ops);
    assert_int_equal(r->n_forward, 1);
    assert_int_equal(r->forward[0].fusion, TX_FUSION_NONE);
    assert_int_equal(r->first_op_requiring_backward, 0);
    assert_int_equal(r->n_backward, 1);
    assert_int_equal(fx_group_of(&f, "b")->n_nodes, 1);
    /* every node in exactly one group, group_of_node agreeing */
    for (size_t gi = 0; gi < f.plan->n_groups; gi++)
        for (int32_t i = 0; i < f.plan->groups[gi].n_nodes; i++)
            assert_int_equal(f.plan->group_of_node[f.plan->groups[gi].nodes[i]], (int32_t)gi);
    fx_free(&f);
    mb_free_all();
}

static void first_op_requiring_backward(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "fob");
    mb_input(g, "x", FX_FLOAT, "2,32");
    mb_output(g, "y", FX_FLOAT, "2,32");
    fx_param(g, "w", "32,32");
    fx_param(g, "bias", "32");
    fx_te(g, "gelu", "GELU", "x", "h0");
    fx_te(g, "fc", "Linear", "h0,w", "h1");
    fx_te(g, "b", "Bias", "h1,bias", "y");
    fx f;
    fx_open_model(&f, m);
    bool yes = true, no = false;
    fx_plan(&f, &(fx_req){.recipe = "none", .training = true, .input_needs_grad = &no, .n_inputs = 1});
    assert_int_equal(f.plan->groups[0].first_op_requiring_backward, 1); /* fc's weight */
    assert_int_equal(f.plan->groups[0].n_backward, 2);
    fx_plan(&f, &(fx_req){.recipe = "none", .training = true, .input_needs_grad = &yes, .n_inputs = 1});
    assert_int_equal(f.plan->groups[0].first_op_requiring_backward, 0);
    assert_int_equal(f.plan->groups[0].n_backward, 3);
    fx_plan(&f, &(fx_req){.recipe = "none", .training = true, .params_frozen = true});
    assert_int_equal(f.plan->groups[0].first_op_requiring_backward, 3);
    assert_int_equal(f.plan->groups[0].n_backward, 0);
    fx_plan(&f, &(fx_req){.recipe = "none", .training = false, .input_needs_grad = &yes, .n_inputs = 1});
    assert_int_equal(f.plan->groups[0].first_op_requiring_backward, 3);
    /* a request whose types do not match the graph is refused */
    tx_plan_request req;
    memset(&req, 0, sizeof req);
    assert_null(tx_recipe_parse("none", &req.recipe));
    assert_null(tx_device_caps_parse("cpu", &req.device));
    req.vals = f.vals;
    req.n_vals = f.ir->graph->n_values + 1;
    tx_fuser_plan *p = NULL;
    teexec_status *st = tx_fuser_plan_build(f.ir->graph, &req, &p);
    assert_non_null(st);
    assert_null(p);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    fx_free(&f);
    mb_free_all();
}

static void unknown_te_op_is_refused(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "unknown");
    mb_input(g, "x", FX_FLOAT, "2,32");
    mb_output(g, "y", FX_FLOAT, "2,32");
    fx_te(g, "mystery", "FancyOp", "x", "y");
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    tx_onnx_file *file = NULL;
    tx_ir_model *ir = NULL;
    teexec_status *st = tx_onnx_load_memory(bytes, size, NULL, NULL, &file);
    free(bytes);
    assert_null(st);
    assert_null(tx_ir_build(file, &ir));
    tx_plan_request req;
    memset(&req, 0, sizeof req);
    assert_null(tx_recipe_parse("none", &req.recipe));
    assert_null(tx_device_caps_parse("cpu", &req.device));
    tx_fuser_plan *p = NULL;
    st = tx_fuser_plan_build(ir->graph, &req, &p);
    assert_non_null(st);
    assert_null(p);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "te.ops has no op \"FancyOp\""));
    assert_string_equal(teexec_status_node(st), "mystery");
    teexec_status_destroy(st);
    tx_ir_model_free(ir);
    tx_onnx_file_free(file);
    mb_free_all();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(residual_stays_inside_one_chain),
        cmocka_unit_test(fork_read_outside_is_an_extra_output),
        cmocka_unit_test(multi_reader_value_ends_the_chain),
        cmocka_unit_test(groups_do_not_depend_on_node_order),
        cmocka_unit_test(standard_nodes_and_attention_stand_alone),
        cmocka_unit_test(first_op_requiring_backward),
        cmocka_unit_test(unknown_te_op_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
