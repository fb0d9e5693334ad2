/*
 * api_te_ops.c - the public te.ops spec text (teexec_te_ops_text), built
 * once from the registry (format/te_schema.h) and kept for the process.
 */
#include "format/te_schema.h"
#include "teexec/teexec.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *texts[2];

static void build(void)
{
    /* On failure the slot stays NULL; the status carries only "out of memory". */
    teexec_status_destroy(tx_te_schema_table(&texts[TEEXEC_TE_OPS_TABLE]));
    teexec_status_destroy(tx_te_schema_markdown(&texts[TEEXEC_TE_OPS_MARKDOWN]));
}

const char *teexec_te_ops_text(teexec_te_ops_format format)
{
    if (format != TEEXEC_TE_OPS_TABLE && format != TEEXEC_TE_OPS_MARKDOWN) return NULL;
    pthread_once(&once, build);
    return texts[format];
}
