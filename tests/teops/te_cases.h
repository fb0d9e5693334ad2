/*
 * te_cases.h - one or more small random instances of every te.ops op, in
 * FP64, shared by the gradient and the dtype tests. Tests only.
 */
#ifndef TEEXEC_TESTS_TEOPS_TE_CASES_H
#define TEEXEC_TESTS_TEOPS_TE_CASES_H

#include "te_case.h"

/* Number of cases. */
int tc_case_count(void);
/* Builds case i (0 <= i < tc_case_count()) into c (tc_free it after). */
void tc_case_build(int i, te_case *c);

#endif
