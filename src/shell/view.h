/* view.h - a job's own paths showing its RAM disk (see view.c) */

#ifndef RSA_SHELL_VIEW_H
#define RSA_SHELL_VIEW_H

#include <stddef.h>
#include <stdint.h>

struct view_paths {
    uint64_t jobid;       /* the job (its RAM disk's marker names it) */
    const char *ramdisk;  /* the RAM disk as attached on this node */
    const char *in_area;  /* staged inputs on it, or NULL: not shown */
    const char *out_area; /* its output area, or NULL: not shown */
    const char *data_in;  /* the job's own rsa.data_in */
    const char *data_out; /* the job's own rsa.data_out */
};

struct view;

/* Move the calling process into a mount namespace of its own in which
 * data_in shows in_area and data_out shows out_area (those given).  On
 * failure nothing was changed when it could be helped, NULL is returned
 * and why[] says what failed, with the value and the cause.
 */
struct view *view_create (const struct view_paths *p, char *why, size_t len);

/* The switch: data_in shows persistent storage again (no-op when it
 * showed nothing or already does).  -1 with errno on failure.
 */
int view_release_input (struct view *v);

/* Something the job should know (e.g. its working directory), or NULL. */
const char *view_warning (struct view *v);

/* How data_in's top directory, as the job sees it, differs from the
 * persistent one (mode, group, owner), or NULL when it does not.
 */
const char *view_top_note (struct view *v);

/* "user" when the namespace is inside a user namespace of the job's
 * user, "plain" when the shell could make it directly.
 */
const char *view_kind (struct view *v);

void view_destroy (struct view *v);

#endif /* !RSA_SHELL_VIEW_H */

/* vi: ts=4 sw=4 expandtab
 */
