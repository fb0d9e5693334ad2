/* quant_operand.c - a GEMM operand's quantizer config from the plan
 * (quant_operand.h). */
#include "exec/quant_operand.h"

#include <string.h>

const tx_plan_quant *tx_quant_entry(const tx_plan_quant *quant, size_t n_quant, int32_t node,
                                    tx_qoperand operand)
{
    for (size_t i = 0; quant && i < n_quant; i++)
        if (quant[i].node == node && quant[i].operand == operand) return &quant[i];
    return NULL;
}

unsigned tx_quant_usage(tx_qoperand operand, bool dx, bool dparams)
{
    switch (operand) {
    case TX_QOP_INPUT: return TX_QUSAGE_ROWWISE | (dparams ? TX_QUSAGE_COLUMNWISE : 0u);
    case TX_QOP_WEIGHT: return TX_QUSAGE_ROWWISE | (dx ? TX_QUSAGE_COLUMNWISE : 0u);
    default: return (dx ? TX_QUSAGE_ROWWISE : 0u) | (dparams ? TX_QUSAGE_COLUMNWISE : 0u);
    }
}

const tx_plan_quant *tx_quant_operand_config(const tx_plan_quant *quant, size_t n_quant,
                                             const tx_recipe *recipe, int32_t node,
                                             tx_qoperand operand, bool dx, bool dparams,
                                             uint64_t seed, uint64_t step, tx_quant_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (recipe->kind == TX_RECIPE_NONE) return NULL;
    const tx_plan_quant *q = tx_quant_entry(quant, n_quant, node, operand);
    if (!q || !q->quantized) return NULL;
    cfg->kind = q->kind;
    cfg->fmt = q->data_dtype;
    cfg->usage = tx_quant_usage(operand, dx, dparams);
    cfg->block_2d = q->block_rows > 1 && q->block_cols > 1;
    cfg->scale_layout = TX_SCALE_COMPACT;
    /* per-tensor current and block scales may be rounded down to a power
     * of two (delayed scaling's come from its amax history, unrounded) */
    if (q->kind == TX_QKIND_FP8_BLOCK ||
        (q->kind == TX_QKIND_FP8_TENSOR && recipe->kind == TX_RECIPE_FP8_CURRENT))
        cfg->power_2_scale = recipe->pow2_scales;
    if (q->kind == TX_QKIND_NVFP4) {
        cfg->rht = recipe->nvfp4_rht && operand != TX_QOP_WEIGHT;
        cfg->stochastic_rounding = recipe->nvfp4_stochastic && operand == TX_QOP_GRAD_OUTPUT;
        cfg->seed = seed ^ ((uint64_t)(uint32_t)node * 0x9E3779B97F4A7C15ull + (uint64_t)operand);
        cfg->sr_offset = step;
    }
    return q;
}
