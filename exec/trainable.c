/* trainable.c - the parameter rule shared by the trainers (trainable.h). */
#include "exec/trainable.h"

#include "base/half.h"
#include "base/log.h"

#include <fnmatch.h>
#include <math.h>
#include <string.h>

bool tx_freeze_matches(const char *freeze, const char *name)
{
    if (!freeze || !name) return false;
    const char *p = freeze;
    char pat[512];
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && len < sizeof pat) {
            memcpy(pat, p, len);
            pat[len] = '\0';
            if (strcmp(pat, name) == 0 || fnmatch(pat, name, 0) == 0) return true;
        }
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* Element i of a float tensor as double (float32, float64, fp16, bf16). */
static bool element(const tx_tensor *t, uint64_t i, double *out)
{
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT: *out = ((const float *)t->data)[i]; return true;
    case TEEXEC_DTYPE_DOUBLE: *out = ((const double *)t->data)[i]; return true;
    case TEEXEC_DTYPE_FLOAT16: *out = tx_f16_to_f32(((const uint16_t *)t->data)[i]); return true;
    case TEEXEC_DTYPE_BFLOAT16: *out = tx_bf16_to_f32(((const uint16_t *)t->data)[i]); return true;
    default: return false;
    }
}

bool tx_trainable_initializer(const tx_tensor *t, const char *name, const tx_prepared *prep,
                              const char *freeze)
{
    if (!t || !t->data || t->numel <= 1) return false;
    for (uint64_t i = 0; i < t->numel; i++) {
        double x;
        if (!element(t, i, &x)) return false;
        if (!isfinite(x) || fabs(x) >= TX_MASK_MAGNITUDE) return false;
    }
    if (tx_freeze_matches(freeze, name)) return false;
    for (size_t i = 0; prep && i < prep->n_sources; i++)
        if (strcmp(prep->sources[i].lowered, name) == 0 &&
            tx_freeze_matches(freeze, prep->sources[i].original))
            return false;
    return true;
}

size_t tx_trainable_note_shared_norm(const tx_ir_graph *g, int32_t v)
{
    if (!g || v < 0 || (size_t)v >= g->n_values) return 0;
    const tx_ir_value *val = &g->values[v];
    size_t norms = 0;
    int32_t last = -1;
    for (size_t k = 0; k < val->n_consumers; k++) {
        int32_t node = val->consumers[k].node;
        /* LayerNormalization, RMSNormalization, SimplifiedLayerNormalization,
         * te.ops LayerNorm / RMSNorm; a node reading it twice counts once */
        if (node == last || !strstr(g->nodes[node].op_type, "Norm")) continue;
        last = node;
        norms++;
    }
    if (norms > 1)
        tx_log(TEEXEC_LOG_WARNING,
               "parameter \"%s\" is shared by %zu norms, so training ties them; an exporter "
               "merges initializers of equal value (fresh LayerNorm gains of one, biases of "
               "zero): give each its own value before exporting if they are meant to differ",
               val->name, norms);
    return norms;
}
