/* mountns.h - the job's mount namespace (see mountns.c) */

#ifndef RSA_SHELL_MOUNTNS_H
#define RSA_SHELL_MOUNTNS_H

#include <stddef.h>

/* Move the calling process into a mount namespace of its own: plain if it
 * may (*kind = "plain"), else inside a user namespace of its own user
 * (*kind = "user").  No mount propagates out of it.  On failure -1 is
 * returned and why[] says what failed, with the value and the cause.
 */
int mountns_enter (const char **kind, char *why, size_t len);

#endif /* !RSA_SHELL_MOUNTNS_H */

/* vi: ts=4 sw=4 expandtab
 */
