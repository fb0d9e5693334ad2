/*
 * gpu_main.h - the main() of each GPU test program: skip without a GPU,
 * then one cmocka test per entry of the program's case table.
 * Test code; include once per test program, after defining `cases`.
 */
#ifndef TEEXEC_TESTS_GPU_MAIN_H
#define TEEXEC_TESTS_GPU_MAIN_H

static void run_case_test(void **state)
{
    tg_run_case((const tg_case *)*state);
}

#define TG_MAIN(program, cases)                                                       \
    int main(void)                                                                    \
    {                                                                                 \
        tg_require_gpu(program);                                                      \
        enum { N = sizeof(cases) / sizeof(cases[0]) };                               \
        struct CMUnitTest tests[N];                                                   \
        size_t total = 0;                                                             \
        for (size_t i = 0; i < N; i++) {                                              \
            struct CMUnitTest t = {cases[i].name, run_case_test, NULL, NULL,          \
                                   (void *)&cases[i]};                                \
            tests[i] = t;                                                             \
            total += cases[i].rows * cases[i].cols;                                   \
        }                                                                             \
        fprintf(stderr, "%s: %zu cases, %zu elements in all\n", program, (size_t)N,   \
                total);                                                               \
        return _cmocka_run_group_tests(program, tests, N, NULL, NULL);                \
    }

#endif
