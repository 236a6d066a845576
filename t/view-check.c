/* view-check - make a job's view as the job shell does, then run a command
 * in it (as the shell starts a task), for t0010-view.t.
 *
 *   view-check JOBID RAMDISK IN_AREA OUT_AREA DATA_IN DATA_OUT CMD...
 *
 * IN_AREA or OUT_AREA "-": not shown.  On failure prints the reason the
 * shell would give and exits 1; else prints the kind of namespace and
 * execs CMD.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "view.h"

static const char *opt (const char *s)
{
    return strcmp (s, "-") ? s : NULL;
}

int main (int argc, char **argv)
{
    struct view_paths p;
    struct view *v;
    char why[1024];

    if (argc < 8) {
        fprintf (stderr, "usage: view-check JOBID RAMDISK IN_AREA OUT_AREA "
                         "DATA_IN DATA_OUT CMD...\n");
        return 2;
    }
    p.jobid = strtoull (argv[1], NULL, 10);
    p.ramdisk = argv[2];
    p.in_area = opt (argv[3]);
    p.out_area = opt (argv[4]);
    p.data_in = argv[5];
    p.data_out = argv[6];
    if (!(v = view_create (&p, why, sizeof (why)))) {
        printf ("refused: %s\n", why);
        return 1;
    }
    printf ("view: %s\n", view_kind (v));
    if (view_top_note (v))
        printf ("top: %s\n", view_top_note (v));
    fflush (stdout);
    execvp (argv[7], argv + 7);
    perror (argv[7]);
    return 127;
}

/* vi: ts=4 sw=4 expandtab
 */
