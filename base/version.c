/* version.c - the library version. */
#include "teexec/teexec.h"

#define TX_STR2(x) #x
#define TX_STR(x) TX_STR2(x)

unsigned teexec_version(void)
{
    return (TEEXEC_VERSION_MAJOR << 16) | (TEEXEC_VERSION_MINOR << 8) | TEEXEC_VERSION_PATCH;
}

const char *teexec_version_string(void)
{
    return TX_STR(TEEXEC_VERSION_MAJOR) "." TX_STR(TEEXEC_VERSION_MINOR) "." TX_STR(TEEXEC_VERSION_PATCH);
}
