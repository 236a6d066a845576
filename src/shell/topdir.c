/* topdir.c - the staged inputs' top directory, shown at data_in: given
 * data_in's look as far as that exposes nothing.
 *
 * The staged inputs' top directory is the RAM disk's in/ area, private to
 * the job's user (0700) and as old as the stage-in.  So that data_in's
 * path shows the persistent directory as it is, in/ is given data_in's
 * mtime, its group (when the user may: a member of it), and its mode when
 * that opens nothing persistent storage keeps closed: data_in is reached
 * through directories everyone may search, none of them (nor data_in)
 * with an access control list (its mode then protects it alike on both);
 * else only data_in's owner bits (in/ stays closed to
 * others on the RSA and compute nodes, as data_in's parents keep it on
 * persistent storage).  Its owner is the job's user (only root could
 * change it).
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "topdir.h"

/* Does path carry an access control list (its mode bits may not say all)? */
static int has_acl (const char *path)
{
    return getxattr (path, "system.posix_acl_access", NULL, 0) >= 0
           || getxattr (path, "system.nfs4_acl", NULL, 0) >= 0;
}

/* Can everyone search every directory above path (a real path), and do
 * mode bits alone say who may use it?
 */
static int public_above (const char *path)
{
    char *copy = strdup (path);
    char *slash;
    struct stat st;
    int ok = copy != NULL && !has_acl (path);

    while (ok && (slash = strrchr (copy, '/'))) {
        if (slash == copy)
            slash[1] = '\0'; /* "/" itself */
        else
            *slash = '\0';
        if (stat (copy, &st) < 0 || (st.st_mode & 0011) != 0011
            || has_acl (copy))
            ok = 0;
        if (!strcmp (copy, "/"))
            break;
    }
    free (copy);
    return ok;
}

char *topdir_match (const char *src, const char *data_in, const char *real)
{
    struct stat want, have;
    struct timespec times[2];
    mode_t mode;
    int fd;
    char note[512] = "";
    char *result = NULL;

    if (stat (data_in, &want) < 0
        || (fd = open (src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
               < 0)
        return NULL;
    if (fstat (fd, &have) < 0)
        goto out;
    if (have.st_uid != want.st_uid || have.st_gid != want.st_gid) {
        if (fchown (fd, want.st_uid, want.st_gid) < 0
            && want.st_gid != have.st_gid)
            (void)fchown (fd, (uid_t)-1, want.st_gid);
        (void)fstat (fd, &have);
    }
    mode = want.st_mode & 07777;
    if (!real || !public_above (real)) {
        mode &= 07700;
        if (mode != (want.st_mode & 07777))
            snprintf (note, sizeof (note),
                      "mode %04o, not %04o (a directory "
                      "above it is closed to others, or has an ACL)",
                      (unsigned)mode, (unsigned)(want.st_mode & 07777));
    }
    else if (have.st_gid != want.st_gid) {
        mode = (mode & ~(mode_t)0070) | ((mode & 0007) << 3);
        snprintf (note, sizeof (note), "group %ju, not %ju",
                  (uintmax_t)have.st_gid, (uintmax_t)want.st_gid);
    }
    if (have.st_uid != want.st_uid) {
        size_t n = strlen (note);
        snprintf (note + n, sizeof (note) - n, "%sowner %ju, not %ju",
                  n ? ", " : "", (uintmax_t)have.st_uid,
                  (uintmax_t)want.st_uid);
    }
    times[0] = want.st_atim;
    times[1] = want.st_mtim;
    if (fchmod (fd, mode) < 0 || futimens (fd, times) < 0)
        snprintf (note, sizeof (note),
                  "its mode and mtime could not be set: %s", strerror (errno));
    if (note[0])
        result = strdup (note);
out:
    close (fd);
    return result;
}

/* vi: ts=4 sw=4 expandtab
 */
