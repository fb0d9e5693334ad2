/*
 * generate.c - greedy generation with the generator API on the CPU: two
 * prompts of different lengths in one batch, 8 new tokens each, printed;
 * then a rewind and the same 8 tokens again, as a check that the generator
 * is deterministic.
 *
 *   generate MODEL.onnx
 *   generate models/zoo/gpt2_dynamo/model.onnx
 *
 * MODEL is any decoder with input_ids and logits (and, for the KV cache,
 * past_key_values / present); the prompts use ids below 32.
 */
#include <teexec/teexec.h>

#include <stdio.h>
#include <string.h>

#define NEW 8

static int failed(teexec_status *st, const char *what)
{
    if (!st) return 0;
    fprintf(stderr, "generate: %s: %s [%s]\n", what, teexec_status_message(st),
            teexec_code_name(teexec_status_code(st)));
    teexec_status_destroy(st);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: generate MODEL.onnx\n");
        return 2;
    }
    static const int64_t p0[] = {5, 11, 2, 7, 19, 3}, p1[] = {8, 1, 30};
    teexec_model *model = NULL;
    teexec_generator *g = NULL;
    int rc = 1;
    if (failed(teexec_model_load_file(argv[1], NULL, &model), "loading the model")) return 1;

    teexec_generator_options o;
    teexec_generator_options_init(&o); /* greedy, KV cache when the model has one */
    o.device = TEEXEC_DEVICE_CPU;
    o.max_batch = 2;
    if (failed(teexec_generator_create(model, &o, &g), "creating the generator")) goto done;
    printf("mode: %s\n", teexec_generator_mode(g) == TEEXEC_GENERATE_KV_CACHE ? "kv cache"
                                                                               : "recompute");
    if (failed(teexec_generator_append(g, 0, p0, 6), "prompt 0") ||
        failed(teexec_generator_append(g, 1, p1, 3), "prompt 1"))
        goto done;

    int64_t first[2][NEW], again[2][NEW];
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < NEW; s++) {
            int64_t ids[2];
            if (failed(teexec_generator_step(g, ids, 2), "step")) goto done;
            (pass ? again : first)[0][s] = ids[0];
            (pass ? again : first)[1][s] = ids[1];
        }
        /* back to the prompts: the longer one is 6 tokens, so rewinding to 6
         * cuts only the generated tokens of row 0 and 3 of row 1's */
        if (pass == 0 && failed(teexec_generator_rewind(g, 6), "rewind")) goto done;
    }
    for (int r = 0; r < 2; r++) {
        printf("sequence %d:", r);
        for (int s = 0; s < NEW; s++) printf(" %lld", (long long)first[r][s]);
        printf("\n");
    }
    /* row 1 kept 3 of its generated tokens through the rewind */
    if (memcmp(again[0], first[0], sizeof again[0]) != 0 ||
        memcmp(again[1], first[1] + 3, (NEW - 3) * sizeof(int64_t)) != 0) {
        fprintf(stderr, "generate: decoding after the rewind gave other tokens\n");
        goto done;
    }
    printf("after the rewind: the same tokens again (%llu model runs)\n",
           (unsigned long long)teexec_generator_run_count(g));
    rc = 0;
done:
    teexec_generator_destroy(g);
    teexec_model_destroy(model);
    return rc;
}
