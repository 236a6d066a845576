/* view.c - a job's own paths showing its RAM disk, in a mount namespace
 * of the job alone.
 *
 * The job shell calls view_create() in shell.init, before any task
 * exists: every task it starts afterwards inherits the namespace.
 *
 *  1. What may be mounted, checked before anything changes:
 *     - the sources are only the in/ and out/ areas of this job's RAM
 *       disk as attached on this node: the paths rsa-ready gave, directly
 *       under the RAM disk whose marker (.rsa-ramdisk, written by root)
 *       names this job, this user and a mounted RAM disk; each area a
 *       directory of the job's user on the RAM disk's own file system,
 *       opened without following a symbolic link;
 *     - the targets are only the job's own rsa.data_in and rsa.data_out
 *       (from its signed jobspec), existing directories.
 *     Sources and targets are held open (O_PATH) from then on and the
 *     mounts are made through /proc/self/fd: what was checked is what is
 *     mounted.
 *  2. The namespace (mountns.c): a plain mount namespace when the shell
 *     may make one (root), else one inside a user namespace of the job's
 *     user; mounts of the node propagate in, none propagate out.
 *  3. A bind mount of each area over its target, checked afterwards (the
 *     target's path now shows the area's directory).  A working directory
 *     under a target is entered again through the new mount.
 *
 * Between 1 and 2, the staged inputs' top directory (the in/ area) is given
 * data_in's look as far as that exposes nothing (topdir.c).
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_PATH */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "mountns.h"
#include "topdir.h"
#include "view.h"

#define MARKER ".rsa-ramdisk"

struct area {
    const char *key; /* "rsa.data_in" */
    char *target;    /* the job's own path */
    char *real;      /* the target's real path, before the mount */
    char *source;    /* the RAM disk's area */
    int src_fd;
    int tgt_fd;
    struct stat src_st;
    struct stat tgt_st;
    int mounted;
};

struct view {
    struct area in;
    struct area out;
    const char *kind;
    char *warning;
    char *top_note; /* how in/'s top differs from data_in's, or NULL */
};

static void say (char *why, size_t len, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void say (char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (why, len, fmt, ap);
    va_end (ap);
}

static int same_file (const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* path is dir or lies under it */
static int under (const char *path, const char *dir)
{
    size_t n = strlen (dir);
    return strncmp (path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static void area_init (struct area *a, const char *key)
{
    memset (a, 0, sizeof (*a));
    a->key = key;
    a->src_fd = a->tgt_fd = -1;
}

static void area_close (struct area *a)
{
    if (a->src_fd >= 0)
        close (a->src_fd);
    if (a->tgt_fd >= 0)
        close (a->tgt_fd);
    a->src_fd = a->tgt_fd = -1;
}

static void area_clear (struct area *a)
{
    area_close (a);
    free (a->source);
    free (a->target);
    free (a->real);
    a->source = a->target = a->real = NULL;
}

/* The RAM disk at path is this job's and this user's, and mounted: its
 * marker says so.  Sets *dev to its file system.
 */
static int check_marker (const char *ramdisk, uint64_t jobid, dev_t *dev,
                         char *why, size_t len)
{
    json_t *m = NULL;
    json_error_t jerr;
    struct stat st;
    int dfd, fd = -1;
    int rc = -1;

    if ((dfd = open (ramdisk, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0
        || fstat (dfd, &st) < 0) {
        say (why, len, "the RAM disk %s: %s", ramdisk, strerror (errno));
        goto out;
    }
    *dev = st.st_dev;
    if ((fd = openat (dfd, MARKER, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        say (why, len, "the RAM disk %s has no readable %s marker: %s", ramdisk,
             MARKER, strerror (errno));
        goto out;
    }
    if (!(m = json_loadfd (fd, 0, &jerr)) || !json_is_object (m)) {
        say (why, len, "the RAM disk's marker %s/%s is not valid: %s", ramdisk,
             MARKER, m ? "not an object" : jerr.text);
        goto out;
    }
    if (!json_is_integer (json_object_get (m, "jobid"))
        || (uint64_t)json_integer_value (json_object_get (m, "jobid"))
               != jobid) {
        say (why, len,
             "the RAM disk %s is not this job's (its marker names "
             "%s)",
             ramdisk,
             json_is_integer (json_object_get (m, "jobid")) ? "another job"
                                                            : "no job");
        goto out;
    }
    if (!json_is_integer (json_object_get (m, "owner"))
        || json_integer_value (json_object_get (m, "owner"))
               != (json_int_t)getuid ()) {
        say (why, len, "the RAM disk %s does not belong to uid %ju", ramdisk,
             (uintmax_t)getuid ());
        goto out;
    }
    if (!json_is_true (json_object_get (m, "mounted"))) {
        say (why, len,
             "%s is not the RAM disk, only the directory it is "
             "mounted on (not mounted on this node)",
             ramdisk);
        goto out;
    }
    rc = 0;
out:
    json_decref (m);
    if (fd >= 0)
        close (fd);
    if (dfd >= 0)
        close (dfd);
    return rc;
}

/* Open and check an area of the RAM disk (source) and the job's path
 * (target) it is to be shown at.
 */
static int area_open (struct area *a, const char *ramdisk, const char *name,
                      const char *src, const char *target, dev_t dev, char *why,
                      size_t len)
{
    size_t n = strlen (ramdisk);

    if (strncmp (src, ramdisk, n) != 0 || src[n] != '/'
        || strcmp (src + n + 1, name) != 0) {
        say (why, len, "%s is not the %s area of the RAM disk %s", src, name,
             ramdisk);
        return -1;
    }
    if ((a->src_fd = open (src, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
            < 0
        || fstat (a->src_fd, &a->src_st) < 0) {
        struct stat st;
        int e = errno;
        if (lstat (src, &st) == 0 && S_ISLNK (st.st_mode))
            say (why, len,
                 "the RAM disk's %s area %s is a symbolic link (not "
                 "followed)",
                 name, src);
        else
            say (why, len, "the RAM disk's %s area %s: %s", name, src,
                 strerror (e));
        return -1;
    }
    if (a->src_st.st_uid != getuid () || a->src_st.st_dev != dev) {
        say (why, len,
             "the RAM disk's %s area %s is not a directory of uid "
             "%ju on the RAM disk",
             name, src, (uintmax_t)getuid ());
        return -1;
    }
    if (!target || target[0] != '/') {
        say (why, len, "%s is %s%s%s, not an absolute path", a->key,
             target ? "'" : "", target ? target : "unset", target ? "'" : "");
        return -1;
    }
    if ((a->tgt_fd = open (target, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0
        || fstat (a->tgt_fd, &a->tgt_st) < 0
        || !(a->real = realpath (target, NULL))) {
        say (why, len,
             "%s %s: %s (it must be an existing directory on this "
             "node)",
             a->key, target, strerror (errno));
        return -1;
    }
    if (a->tgt_st.st_dev == dev) {
        say (why, len, "%s %s is on the RAM disk itself", a->key, target);
        return -1;
    }
    if (!(a->target = strdup (target)) || !(a->source = strdup (src))) {
        say (why, len, "out of memory");
        return -1;
    }
    area_close (a);
    return 0;
}

/* Open the checked source and target again from inside the namespace (a
 * mount may only join mounts of the caller's namespace): still the same
 * directories, or nothing is mounted.
 */
static int area_reopen (struct area *a, char *why, size_t len)
{
    struct stat st;

    if (!a->source)
        return 0; /* not shown */
    if ((a->src_fd =
             open (a->source, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
            < 0
        || fstat (a->src_fd, &st) < 0 || !same_file (&st, &a->src_st)
        || (a->tgt_fd = open (a->target, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0
        || fstat (a->tgt_fd, &st) < 0 || !same_file (&st, &a->tgt_st)) {
        say (why, len,
             "%s %s or the RAM disk's area %s changed while the "
             "job's mounts were made",
             a->key, a->target, a->source);
        return -1;
    }
    return 0;
}

static int area_bind (struct area *a, char *why, size_t len)
{
    char src[64], tgt[64];
    struct stat st;

    if (!a->source)
        return 0; /* not shown */
    if (area_reopen (a, why, len) < 0)
        return -1;
    snprintf (src, sizeof (src), "/proc/self/fd/%d", a->src_fd);
    snprintf (tgt, sizeof (tgt), "/proc/self/fd/%d", a->tgt_fd);
    if (mount (src, tgt, NULL, MS_BIND, NULL) < 0) {
        say (why, len, "bind mount over %s %s: %s", a->key, a->target,
             strerror (errno));
        return -1;
    }
    a->mounted = 1;
    if (stat (a->target, &st) < 0 || !same_file (&st, &a->src_st)) {
        say (why, len,
             "after the bind mount, %s %s does not show the RAM "
             "disk",
             a->key, a->target);
        return -1;
    }
    return 0;
}

/* The shell's working directory (its tasks') was entered before the
 * mounts: under a target, enter it again through the mount.
 */
static void enter_cwd_again (struct view *v)
{
    char cwd[PATH_MAX];
    struct area *areas[] = {&v->in, &v->out};

    if (!getcwd (cwd, sizeof (cwd)))
        return;
    for (int i = 0; i < 2; i++) {
        struct area *a = areas[i];
        if (!a->mounted || !a->real || !under (cwd, a->real))
            continue;
        if (chdir (cwd) < 0) {
            char msg[PATH_MAX + 256];
            snprintf (msg, sizeof (msg),
                      "the working directory %s is under "
                      "%s %s, but the RAM disk has no such directory: tasks "
                      "start in the directory on persistent storage, which "
                      "no path shows",
                      cwd, a->key, a->target);
            free (v->warning);
            v->warning = strdup (msg);
        }
        return;
    }
}

struct view *view_create (const struct view_paths *p, char *why, size_t len)
{
    struct view *v;
    dev_t dev;

    if (!(v = calloc (1, sizeof (*v)))) {
        say (why, len, "out of memory");
        return NULL;
    }
    area_init (&v->in, "rsa.data_in");
    area_init (&v->out, "rsa.data_out");
    if (!p->ramdisk || p->ramdisk[0] != '/') {
        say (why, len, "rsa-ready names no RAM disk");
        goto error;
    }
    if (check_marker (p->ramdisk, p->jobid, &dev, why, len) < 0
        || (p->in_area
            && area_open (&v->in, p->ramdisk, "in", p->in_area, p->data_in, dev,
                          why, len)
                   < 0)
        || (p->out_area
            && area_open (&v->out, p->ramdisk, "out", p->out_area, p->data_out,
                          dev, why, len)
                   < 0))
        goto error;
    if (p->in_area)
        v->top_note = topdir_match (p->in_area, p->data_in, v->in.real);
    if (mountns_enter (&v->kind, why, len) < 0
        || area_bind (&v->in, why, len) < 0
        || area_bind (&v->out, why, len) < 0)
        goto error;
    enter_cwd_again (v);
    /* hold nothing of the node's mounts: its detach must not find them busy */
    area_close (&v->in);
    area_close (&v->out);
    return v;
error:
    view_destroy (v);
    return NULL;
}

int view_release_input (struct view *v)
{
    struct stat st;

    if (!v || !v->in.mounted)
        return 0;
    if (stat (v->in.target, &st) == 0 && same_file (&st, &v->in.src_st)
        && umount2 (v->in.target, MNT_DETACH) < 0)
        return -1;
    v->in.mounted = 0;
    return 0;
}

const char *view_warning (struct view *v)
{
    return v ? v->warning : NULL;
}

const char *view_top_note (struct view *v)
{
    return v ? v->top_note : NULL;
}

const char *view_kind (struct view *v)
{
    return v ? v->kind : NULL;
}

void view_destroy (struct view *v)
{
    if (v) {
        int saved_errno = errno;
        area_clear (&v->in);
        area_clear (&v->out);
        free (v->warning);
        free (v->top_note);
        free (v);
        errno = saved_errno;
    }
}

/* vi: ts=4 sw=4 expandtab
 */
