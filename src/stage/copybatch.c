/* copybatch: the stager's per-file loops, in C: the copy of small files
 * (cb_copy) and the scan of a source directory (cb_scan).
 *
 * The stager (flux_rsa.stage.copy) hands each worker batches of small
 * regular files.  For each file this does what flux_rsa.stage.filewrite
 * does, with the same system calls and the same guarantees, without an
 * interpreter between them: open the source (no link followed, no FIFO
 * waited on), announce its read (POSIX_FADV_WILLNEED) unless it lies in
 * memory, create the copy unnamed (O_TMPFILE) or under a hidden temporary
 * name without set-ID bits, copy it, fail if the source's size is not the
 * planned one, set owner, then set-ID bits (the kernel clears them when a
 * process without CAP_FSETID writes to a file, and at a chown), then times,
 * start its write-back if asked, and only then give it its final name
 * (linkat, or rename over an older version).  A final name never holds a
 * partial file.  In a directory still under its hidden name (CB_DIRECT),
 * which no one looks into yet, the copy is made under its final name at
 * once.
 *
 * It decides nothing and reports no message: at the first file it cannot
 * copy it stops, leaves nothing of that file behind, and says which file,
 * at which step, with which errno.  The caller copies that file with its
 * own code, which raises the stage's error (or copies it, if the trouble
 * was passing), and calls again for the rest of the batch.
 *
 * Loaded with ctypes (flux_rsa/stage/native.py); the structures below are
 * mirrored there.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

/* one file to copy, in the directories the call names */
struct cb_file {
    uint32_t name; /* offset of its NUL-terminated name in the names */
    uint32_t mode; /* its permission bits (created without S_ISUID, S_ISGID) */
    int64_t size;  /* planned size */
    int64_t atime_ns;
    int64_t mtime_ns;
    uint32_t uid;
    uint32_t gid;
    uint32_t flags; /* CB_CHOWN, CB_CHMOD */
    uint32_t pad;
};

#define CB_CHOWN 1 /* fchown to uid:gid */
#define CB_CHMOD                                                               \
    2 /* fchmod to mode after the data and the owner (set-ID bits) */

/* the batch */
#define CB_FADVISE 1   /* announce source reads (sources not in memory) */
#define CB_TMPFILE 2   /* create unnamed files; else under temporary names */
#define CB_LINK_PROC 4 /* name unnamed files through /proc/self/fd */
#define CB_WRITEBACK 8 /* start write-back of files of SMALL bytes and more */
#define CB_DIRECT 16   /* create under the final name: DDIR is still hidden */

/* where a file failed */
enum {
    CB_OPEN = 1,
    CB_CREATE,
    CB_COPY,
    CB_CHANGED,
    CB_META,
    CB_NAME,
    CB_CLOSE
};

struct cb_fail {
    int32_t index; /* the file */
    int32_t step;  /* CB_OPEN ... */
    int32_t err;   /* errno (0 for CB_CHANGED) */
    int32_t pad;
    int64_t done; /* CB_CHANGED: bytes read */
};

/* temporary names: PREFIX SERIAL SUFFIX, the serial shared with the caller */
struct cb_names {
    const char *prefix;
    const char *suffix;
    int64_t *serial;
};

#define SMALL (1 << 20) /* read()/write() below this, the kernel's copy above */

static char *buf;

static int write_all (int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write (fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Copy SIZE bytes from offset 0 of S to D.  Returns the bytes read from S
 * (SIZE + 1 when S has grown), or -1 with errno set. */
static int64_t copy_small (int s, int d, int64_t size)
{
    int64_t got = 0;
    while (got < size + 1) {
        ssize_t r = read (s, buf + got, (size_t)(size + 1 - got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += r;
    }
    if (got == size && write_all (d, buf, (size_t)size) < 0)
        return -1;
    return got;
}

static int no_kernel_copy (int err)
{
    return err == EXDEV || err == EINVAL || err == ENOSYS || err == EOPNOTSUPP
           || err == ETXTBSY;
}

static int64_t copy_kernel (int s, int d, int64_t size)
{
    int64_t done = 0;
    while (done < size) {
        ssize_t n =
            copy_file_range (s, NULL, d, NULL, (size_t)(size - done), 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (!no_kernel_copy (errno))
                return -1;
            break;
        }
        if (n == 0)
            return done;
        done += n;
    }
    while (done < size) {
        off_t off = done;
        if (lseek (d, done, SEEK_SET) < 0)
            return -1;
        ssize_t n = sendfile (d, s, &off, (size_t)(size - done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return done;
        done += n;
    }
    char c;
    ssize_t more = pread (s, &c, 1, size);
    if (more < 0)
        return -1;
    return done + more;
}

static int create_named (int dir, const char *name, mode_t mode)
{
    return openat (dir, name,
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}

static void temp_name (const struct cb_names *nm, char *out, size_t len)
{
    *nm->serial += 1;
    snprintf (out, len, "%s%lld%s", nm->prefix, (long long)*nm->serial,
              nm->suffix);
}

static int link_unnamed (int fd, int dir, const char *name, int flags)
{
    if (!(flags & CB_LINK_PROC))
        return linkat (fd, "", dir, name, AT_EMPTY_PATH);
    char path[64];
    snprintf (path, sizeof (path), "/proc/self/fd/%d", fd);
    return linkat (AT_FDCWD, path, dir, name, AT_SYMLINK_FOLLOW);
}

/* Give the complete unnamed file FD its final name; an older file under
 * that name is replaced atomically (a link under a temporary name, then a
 * rename over it). */
static int name_unnamed (int fd, int ddir, const char *name, int flags,
                         const struct cb_names *nm)
{
    if (link_unnamed (fd, ddir, name, flags) == 0)
        return 0;
    if (errno != EEXIST)
        return -1;
    char tmp[256];
    temp_name (nm, tmp, sizeof (tmp));
    if (link_unnamed (fd, ddir, tmp, flags) < 0)
        return -1;
    if (renameat (ddir, tmp, ddir, name) < 0) {
        int e = errno;
        unlinkat (ddir, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}

static int set_meta (int fd, const struct cb_file *f, int flags)
{
    if ((f->flags & CB_CHOWN) && fchown (fd, f->uid, f->gid) < 0)
        return -1;
    if ((f->flags & CB_CHMOD) && fchmod (fd, f->mode & 07777) < 0)
        return -1;
    struct timespec ts[2] = {
        {f->atime_ns / 1000000000, f->atime_ns % 1000000000},
        {f->mtime_ns / 1000000000, f->mtime_ns % 1000000000},
    };
    if (futimens (fd, ts) < 0)
        return -1;
    if ((flags & CB_WRITEBACK) && f->size >= SMALL)
        sync_file_range (fd, 0, f->size,
                         SYNC_FILE_RANGE_WRITE); /* best effort */
    return 0;
}

static int fail (struct cb_fail *out, int index, int step, int err,
                 int64_t done)
{
    out->index = index;
    out->step = step;
    out->err = err;
    out->done = done;
    return -1;
}

/* Copy file F (index I) from the open source S into directory DDIR.  0, or
 * -1 with OUT set and nothing of the file left under any name. */
static int copy_one (const struct cb_file *f, int i, int s, int ddir,
                     const char *names, int flags, const struct cb_names *nm,
                     struct cb_fail *out)
{
    const char *name = names + f->name;
    mode_t mode = f->mode & 07777 & ~(S_ISUID | S_ISGID);
    char tmp[256] = "";
    int d, named = 0;
    if (flags & CB_DIRECT) {
        d = create_named (ddir, name, mode);
        /* a file there is a killed run's, maybe partial: replaced */
        if (d < 0 && errno == EEXIST && unlinkat (ddir, name, 0) == 0)
            d = create_named (ddir, name, mode);
        named = d >= 0;
    }
    else if (flags & CB_TMPFILE) {
        d = openat (ddir, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, mode);
    }
    else {
        temp_name (nm, tmp, sizeof (tmp));
        d = create_named (ddir, tmp, mode);
    }
    if (d < 0)
        return fail (out, i, CB_CREATE, errno, 0);
    int step = CB_COPY, err = 0;
    int64_t done = f->size < SMALL ? copy_small (s, d, f->size)
                                   : copy_kernel (s, d, f->size);
    if (done < 0) {
        err = errno;
        goto bad;
    }
    if (done != f->size) {
        step = CB_CHANGED;
        goto bad;
    }
    step = CB_META;
    if (set_meta (d, f, flags) < 0) {
        err = errno;
        goto bad;
    }
    if (!tmp[0] && !named) {
        step = CB_NAME;
        if (name_unnamed (d, ddir, name, flags, nm) < 0) {
            err = errno;
            goto bad;
        }
        named = 1;
    }
    /* where close writes the data (NFS), its error means the file is not
     * whole: it loses its name */
    if (close (d) < 0) {
        d = -1;
        step = CB_CLOSE;
        err = errno;
        goto bad;
    }
    d = -1;
    if (tmp[0] && renameat (ddir, tmp, ddir, name) < 0) {
        step = CB_NAME;
        err = errno;
        goto bad;
    }
    return 0;
bad:
    if (d >= 0)
        close (d);
    if (tmp[0])
        unlinkat (ddir, tmp, 0);
    if (named)
        unlinkat (ddir, name, 0);
    return fail (out, i, step, err, done);
}

/* Copy files FILES[0..N) (NAMES holds their names) from directory SDIR into
 * DDIR.  Returns how many were copied, in order: N, or fewer with OUT saying
 * why file OUT->index (the return value) was not. */
int cb_copy (const struct cb_file *files, int n, const char *names, int sdir,
             int ddir, int flags, const struct cb_names *nm,
             struct cb_fail *out)
{
    if (!buf && !(buf = malloc (SMALL + 1)))
        return fail (out, 0, CB_COPY, ENOMEM, 0), 0;
    int *src = malloc (sizeof (int) * (n > 0 ? n : 1));
    if (!src)
        return fail (out, 0, CB_COPY, ENOMEM, 0), 0;
    int opened = 0, open_err = 0;
    for (; opened < n; opened++) {
        const struct cb_file *f = &files[opened];
        src[opened] = openat (sdir, names + f->name,
                              O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (src[opened] < 0) {
            open_err = errno;
            break;
        }
        if ((flags & CB_FADVISE) && f->size > 0)
            posix_fadvise (src[opened], 0, 0, POSIX_FADV_WILLNEED);
    }
    int i = 0;
    for (; i < opened; i++) {
        if (copy_one (&files[i], i, src[i], ddir, names, flags, nm, out) < 0)
            break;
    }
    for (int k = 0; k < opened; k++)
        close (src[k]);
    free (src);
    if (i == opened && opened < n)
        fail (out, opened, CB_OPEN, open_err, 0);
    return i;
}

/* Check the copies of files FILES[0..N) in directory DIR by their names (an
 * lstat each): a regular file of the planned size, mtime and permission
 * bits.  Returns how many were found right, in order: N, or fewer with OUT
 * saying why file OUT->index was not (CB_OPEN and errno: the lstat failed;
 * CB_CHANGED: it differs).  The caller checks that file itself to say how. */
int cb_verify (const struct cb_file *files, int n, const char *names, int dir,
               struct cb_fail *out)
{
    for (int i = 0; i < n; i++) {
        const struct cb_file *f = &files[i];
        struct stat st;
        if (fstatat (dir, names + f->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return fail (out, i, CB_OPEN, errno, 0), i;
        if (!S_ISREG (st.st_mode) || st.st_size != f->size
            || st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec
                   != f->mtime_ns
            || (st.st_mode & 07777) != (f->mode & 07777))
            return fail (out, i, CB_CHANGED, 0, st.st_size), i;
    }
    return n;
}

/* one entry of a scanned directory: its lstat */
struct cb_entry {
    uint32_t mode;
    uint32_t uid;
    uint32_t gid;
    uint32_t pad;
    uint64_t nlink;
    int64_t size;
    int64_t blocks;
    int64_t atime_ns;
    int64_t mtime_ns;
    uint64_t dev;
    uint64_t ino;
    uint64_t rdev;
};

/* Read directory DIR (an open descriptor, read from its start) and lstat
 * each entry but "." and "..": ENTRIES[i] for the i-th, its name in NAMES
 * (the names one after the other, each ending with a NUL; *USED bytes in
 * all).  An entry gone between the two is left out.  Returns the number of
 * entries, or -1 with
 * errno set: ENOBUFS when more than MAX entries or NAMES_LEN bytes of names
 * (call again with more room), else the error of reading the directory or
 * of an lstat (the caller scans the directory itself to say which). */
int cb_scan (int dir, struct cb_entry *entries, int max, char *names,
             size_t names_len, size_t *used_out)
{
    int fd = dup (dir);
    if (fd < 0)
        return -1;
    DIR *d = fdopendir (fd);
    if (!d) {
        close (fd);
        return -1;
    }
    rewinddir (d);
    int n = 0, err = 0;
    size_t used = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir (d)) != NULL) {
        const char *name = e->d_name;
        if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
            continue;
        size_t len = strlen (name) + 1;
        if (n == max || used + len > names_len) {
            err = ENOBUFS;
            break;
        }
        struct stat st;
        if (fstatat (dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT) {
                errno = 0;
                continue; /* gone since readdir */
            }
            err = errno;
            break;
        }
        struct cb_entry *out = &entries[n++];
        out->mode = st.st_mode;
        out->uid = st.st_uid;
        out->gid = st.st_gid;
        out->pad = 0;
        out->nlink = st.st_nlink;
        out->size = st.st_size;
        out->blocks = st.st_blocks;
        out->atime_ns = st.st_atim.tv_sec * 1000000000LL + st.st_atim.tv_nsec;
        out->mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        out->dev = st.st_dev;
        out->ino = st.st_ino;
        out->rdev = st.st_rdev;
        memcpy (names + used, name, len);
        used += len;
    }
    if (!err && errno)
        err = errno; /* readdir failed */
    rewinddir (d);   /* the offset is shared with DIR: leave it at the start */
    closedir (d);
    if (err) {
        errno = err;
        return -1;
    }
    *used_out = used;
    return n;
}
