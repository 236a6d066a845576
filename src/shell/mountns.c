/* mountns.c - the job's mount namespace: a namespace of the job alone in
 * which view.c mounts the RAM disk's areas at the job's own paths.
 *
 * A plain mount namespace when the shell may make one (root), else a user
 * namespace of the job's user with only its own uid and gid mapped
 * (setgroups denied), and a mount namespace owned by it.  The shell holds
 * capabilities only inside that namespace, only over its own mounts;
 * tasks, exec'd as the user, hold none.  Mounts of the node propagate in,
 * none propagate out (MS_SLAVE).  Why a user namespace cannot be made is
 * said in words a site can act on.
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* unshare */
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "mountns.h"

static int write_file (const char *path, const char *text)
{
    int fd;
    ssize_t n;
    int saved_errno;

    if ((fd = open (path, O_WRONLY | O_CLOEXEC)) < 0)
        return -1;
    n = write (fd, text, strlen (text));
    saved_errno = errno;
    close (fd);
    errno = saved_errno;
    return n == (ssize_t)strlen (text) ? 0 : -1;
}

static void read_line (const char *path, char *buf, size_t len)
{
    FILE *f = fopen (path, "r");
    snprintf (buf, len, "?");
    if (f) {
        if (fgets (buf, len, f))
            buf[strcspn (buf, "\n")] = '\0';
        fclose (f);
    }
}

static int threads (void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen ("/proc/self/status", "r");
    while (f && fgets (line, sizeof (line), f))
        if (sscanf (line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose (f);
    return n;
}

/* Why unshare(CLONE_NEWUSER) failed with errno e, in words a site can act on */
static void userns_refused (int e, char *why, size_t len)
{
    char max[64];

    switch (e) {
    case EINVAL:
        snprintf (why, len,
                  "a user namespace cannot be made: the job shell "
                  "runs %d threads (it must be single-threaded)",
                  threads ());
        break;
    case ENOSPC:
        read_line ("/proc/sys/user/max_user_namespaces", max, sizeof (max));
        snprintf (why, len,
                  "a user namespace cannot be made: none are left "
                  "(sysctl user.max_user_namespaces is %s; the site must raise "
                  "it)",
                  max);
        break;
    case EPERM:
    case EACCES:
        snprintf (why, len,
                  "a user namespace cannot be made: this node does "
                  "not let users make them (%s: sysctl "
                  "kernel.unprivileged_userns_clone, "
                  "kernel.apparmor_restrict_unprivileged_userns, or a security "
                  "policy)",
                  strerror (e));
        break;
    default:
        snprintf (why, len, "a user namespace cannot be made: %s",
                  strerror (e));
    }
}

/* Map id to itself, and nothing else, in /proc/self/FILE (uid_map or
 * gid_map) of a user namespace just made.
 */
static int map_self (const char *file, uintmax_t id, char *why, size_t len)
{
    char path[64], map[64];

    snprintf (path, sizeof (path), "/proc/self/%s", file);
    snprintf (map, sizeof (map), "%ju %ju 1", id, id);
    if (write_file (path, map) < 0) {
        snprintf (why, len, "writing %s '%s': %s", path, map, strerror (errno));
        return -1;
    }
    return 0;
}

int mountns_enter (const char **kind, char *why, size_t len)
{
    uid_t uid = getuid (); /* before the user namespace: then 65534 */
    gid_t gid = getgid ();

    if (unshare (CLONE_NEWNS) == 0)
        *kind = "plain";
    else if (errno != EPERM) {
        snprintf (why, len, "a mount namespace cannot be made: %s",
                  strerror (errno));
        return -1;
    }
    else {
        if (unshare (CLONE_NEWUSER | CLONE_NEWNS) < 0) {
            userns_refused (errno, why, len);
            return -1;
        }
        if (write_file ("/proc/self/setgroups", "deny") < 0) {
            snprintf (why, len, "writing /proc/self/setgroups: %s",
                      strerror (errno));
            return -1;
        }
        if (map_self ("uid_map", uid, why, len) < 0
            || map_self ("gid_map", gid, why, len) < 0)
            return -1;
        *kind = "user";
    }
    if (mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
        snprintf (why, len,
                  "making the job's mounts private (MS_SLAVE on /): %s",
                  strerror (errno));
        return -1;
    }
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
