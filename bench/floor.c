/* floor SRC DST NPROC [tmpfile|guarded]: the least a per-file copy costs here.
 *
 * Lists the directories of SRC, makes them under DST (which must exist),
 * then copies every regular file with NPROC processes, each taking every
 * NPROC-th directory (so no two processes create in one directory): open,
 * read, create under the final name (O_EXCL), write, set the times, close.
 * Nothing else: no temporary name, no ownership, no links, no check, no
 * progress, no resume.  It is not a tool; bench/stage times it beside the
 * stager and its peers to show what ratio any per-file copy can reach here.
 *
 * With "tmpfile" each file is created unnamed (O_TMPFILE) and named with
 * linkat once complete, so that a final name never holds a partial file.
 * With "guarded" it makes the system calls the stager's guarantees need, and
 * nothing more: a stat of every entry while listing (the plan's sizes and
 * times); each new directory of DST made under a hidden name, its files
 * created in it under their final names, and renamed to its name when all
 * is in (so that no final path holds a partial file, as the stager does
 * for a new directory), and files of DST itself made as with "tmpfile"; after the copy a stat of every copied file by its
 * name (--verify size); and, as the stager does, one more process flushes
 * DST's file system (syncfs) every FLUSH_INTERVAL_US while the files are
 * copied, so that the final sync finds little left.  Its time is what a
 * per-file copy that keeps those guarantees costs here, in C, with no
 * other work: what a native stager could reach.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char **dirs; /* relative to SRC, "." first, parents before children */
static int ndirs, maxdirs;
static int unnamed, guarded;

#define FLUSH_INTERVAL_US 250000 /* the stager's Flusher interval */

static void die (const char *what, const char *path)
{
    fprintf (stderr, "floor: %s %s: %m\n", what, path);
    exit (1);
}

static int entry_type (int dfd, struct dirent *e)
{
    struct stat st;
    if (e->d_type != DT_UNKNOWN)
        return e->d_type;
    if (fstatat (dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        die ("stat", e->d_name);
    return S_ISDIR (st.st_mode)   ? DT_DIR
           : S_ISREG (st.st_mode) ? DT_REG
                                  : DT_UNKNOWN;
}

/* Each directory under SRC (breadth first), without a stat of any file. */
static void walk (int src)
{
    for (int i = 0; i < ndirs; i++) {
        int dfd = openat (src, dirs[i], O_RDONLY | O_DIRECTORY);
        DIR *d = dfd < 0 ? NULL : fdopendir (dfd);
        struct dirent *e;
        if (!d)
            die ("open", dirs[i]);
        while ((e = readdir (d))) {
            struct stat st;
            if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
                continue;
            if (guarded
                && fstatat (dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                die ("stat", e->d_name);
            if (entry_type (dfd, e) != DT_DIR)
                continue;
            if (ndirs == maxdirs) {
                maxdirs *= 2;
                if (!(dirs = realloc (dirs, maxdirs * sizeof (*dirs))))
                    die ("realloc", "");
            }
            if (asprintf (&dirs[ndirs++], "%s/%s", dirs[i], e->d_name) < 0)
                die ("asprintf", "");
        }
        closedir (d);
    }
}

/* Where directory REL ("./a/b") of SRC is made under DST: guarded, inside
 * the hidden name of its top directory ("./.rsa-floor.a.tmp/b"). */
static void dst_path (const char *rel, char *out, size_t len)
{
    const char *top = rel + 2, *rest = strchr (top, '/');
    if (!guarded || !strcmp (rel, ".")) {
        snprintf (out, len, "%s", rel);
        return;
    }
    int n = rest ? (int)(rest - top) : (int)strlen (top);
    snprintf (out, len, "./.rsa-floor.%.*s.tmp%s", n, top, rest ? rest : "");
}

static void copy_file (int sdir, int ddir, const char *name, char *buf,
                       size_t size, int unnamed)
{
    struct stat st;
    int in = openat (sdir, name, O_RDONLY | O_NOFOLLOW);
    if (in < 0 || fstat (in, &st) < 0)
        die ("open", name);
    int out = unnamed
                  ? openat (ddir, ".", O_WRONLY | O_TMPFILE, st.st_mode & 07777)
                  : openat (ddir, name, O_WRONLY | O_CREAT | O_EXCL,
                            st.st_mode & 07777);
    if (out < 0)
        die ("create", name);
    for (off_t left = st.st_size; left > 0;) { /* no read to find the end */
        ssize_t n = read (in, buf, (size_t)left < size ? (size_t)left : size);
        if (n <= 0)
            die ("read", name);
        if (write (out, buf, n) != n)
            die ("write", name);
        left -= n;
    }
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    if (futimens (out, times) < 0)
        die ("futimens", name);
    if (unnamed) {
        char proc[64];
        snprintf (proc, sizeof (proc), "/proc/self/fd/%d", out);
        if (linkat (AT_FDCWD, proc, ddir, name, AT_SYMLINK_FOLLOW) < 0)
            die ("link", name);
    }
    close (out);
    close (in);
}

/* The regular files of every NPROC-th directory, from the P-th. */
static void copy_share (int src, int dst, int p, int nproc)
{
    static char buf[1 << 20];
    for (int i = p; i < ndirs; i += nproc) {
        int sdir = openat (src, dirs[i], O_RDONLY | O_DIRECTORY);
        char where[4096];
        dst_path (dirs[i], where, sizeof (where));
        int ddir = openat (dst, where, O_RDONLY | O_DIRECTORY);
        DIR *d = sdir < 0 ? NULL : fdopendir (dup (sdir));
        struct dirent *e;
        if (!d || ddir < 0)
            die ("open", dirs[i]);
        while ((e = readdir (d)))
            if (entry_type (sdir, e) == DT_REG)
                /* guarded: DST itself was there, its files go in unnamed */
                copy_file (sdir, ddir, e->d_name, buf, sizeof (buf),
                           unnamed || (guarded && i == 0));
        closedir (d);
        close (sdir);
        close (ddir);
    }
}

/* guarded: a stat of every regular file of every NPROC-th directory of
 * DST, from the P-th, looked up by name. */
static void verify_share (int src, int dst, int p, int nproc)
{
    (void)src;
    for (int i = p; i < ndirs; i += nproc) {
        int ddir = openat (dst, dirs[i], O_RDONLY | O_DIRECTORY);
        DIR *d = ddir < 0 ? NULL : fdopendir (dup (ddir));
        struct dirent *e;
        struct stat st;
        if (!d)
            die ("open", dirs[i]);
        while ((e = readdir (d)))
            if (entry_type (ddir, e) == DT_REG
                && fstatat (ddir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                die ("stat", e->d_name);
        closedir (d);
        close (ddir);
    }
}

/* Run SHARE(fd, p, nproc) in NPROC processes; nonzero if one failed. */
static int in_parallel (void (*share) (int, int, int, int), int src, int dst,
                        int nproc)
{
    pid_t pids[nproc];
    for (int p = 0; p < nproc; p++) {
        pids[p] = fork ();
        if (pids[p] < 0)
            die ("fork", "");
        if (pids[p] == 0) {
            share (src, dst, p, nproc);
            _exit (0);
        }
    }
    int status, failed = 0;
    for (int p = 0; p < nproc; p++) {
        if (waitpid (pids[p], &status, 0) < 0)
            die ("wait", "");
        failed |= !WIFEXITED (status) || WEXITSTATUS (status) != 0;
    }
    return failed;
}

/* A process that flushes the file system of DST until killed. */
static pid_t start_flusher (int dst)
{
    pid_t pid = fork ();
    if (pid < 0)
        die ("fork", "");
    if (pid == 0)
        for (;;) {
            if (syncfs (dst) < 0)
                die ("syncfs", "");
            usleep (FLUSH_INTERVAL_US);
        }
    return pid;
}

int main (int argc, char **argv)
{
    guarded = argc == 5 && !strcmp (argv[4], "guarded");
    unnamed = argc == 5 && !strcmp (argv[4], "tmpfile");
    if (argc != 4 && !unnamed && !guarded) {
        fprintf (stderr, "usage: floor SRC DST NPROC [tmpfile|guarded]\n");
        return 2;
    }
    int nproc = atoi (argv[3]);
    int src = open (argv[1], O_RDONLY | O_DIRECTORY);
    int dst = open (argv[2], O_RDONLY | O_DIRECTORY);
    if (src < 0 || dst < 0)
        die ("open", argv[src < 0 ? 1 : 2]);
    maxdirs = 1024;
    if (!(dirs = malloc (maxdirs * sizeof (*dirs))))
        die ("malloc", "");
    dirs[ndirs++] = ".";
    walk (src);
    umask (0);
    char where[4096];
    for (int i = 1; i < ndirs; i++) {
        dst_path (dirs[i], where, sizeof (where));
        if (mkdirat (dst, where, 0755) < 0)
            die ("mkdir", where);
    }
    pid_t flusher = guarded ? start_flusher (dst) : 0;
    int failed = in_parallel (copy_share, src, dst, nproc);
    if (flusher) {
        kill (flusher, SIGKILL);
        waitpid (flusher, NULL, 0);
    }
    if (failed)
        return 1;
    for (int i = 1; guarded && i < ndirs; i++) {
        if (strchr (dirs[i] + 2, '/'))
            continue; /* inside a top directory: named with it */
        dst_path (dirs[i], where, sizeof (where));
        if (renameat (dst, where, dst, dirs[i]) < 0)
            die ("rename", where);
    }
    return guarded ? in_parallel (verify_share, src, dst, nproc) : 0;
}
