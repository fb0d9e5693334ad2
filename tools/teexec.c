/* teexec.c - the command-line tool (placeholder main, replaced by tools/cli). */
#include "teexec/teexec.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("teexec %s\n", teexec_version_string());
        return 0;
    }
    fprintf(stderr, "teexec: usage: teexec --version\n");
    return 2;
}
