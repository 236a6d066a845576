#!/usr/bin/env python3
"""paths-features.py IN OUT TMP: what a job can do through its own paths.

Run inside an RSA job (rsa.paths=bind): IN and OUT are the job's own
data_in and data_out, TMP a directory elsewhere on persistent storage.
Prints one line per feature, "NAME RESULT" (RESULT is "ok" or the errno
name), for t1210-paths-features.t to compare with what the documentation
(doc/paths.md) says holds.  Only plain system calls, as an application
makes them.
"""

import errno
import fcntl
import mmap
import os
import sys


def outcome(fn):
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"


def write(path, data=b"x"):
    with open(path, "wb") as f:
        f.write(data)


def main(din, dout, tmp):
    out = {}
    write(os.path.join(tmp, "from-tmp"))
    # rename(2) and link(2) across the mount boundary
    out["rename-tmp-to-out"] = outcome(
        lambda: os.rename(os.path.join(tmp, "from-tmp"), os.path.join(dout, "moved"))
    )
    out["link-tmp-to-out"] = outcome(
        lambda: os.link(os.path.join(tmp, "from-tmp"), os.path.join(dout, "linked"))
    )
    write(os.path.join(din, "made-in-data-in"))
    out["rename-in-to-out"] = outcome(
        lambda: os.rename(
            os.path.join(din, "made-in-data-in"), os.path.join(dout, "from-in")
        )
    )
    write(os.path.join(dout, "a"))
    out["rename-within-out"] = outcome(
        lambda: os.rename(os.path.join(dout, "a"), os.path.join(dout, "b"))
    )
    out["link-within-out"] = outcome(
        lambda: os.link(os.path.join(dout, "b"), os.path.join(dout, "c"))
    )

    # a shared writable mapping, read back with read(2)
    def mapped():
        path = os.path.join(dout, "mapped")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, 1 << 20)
            m = mmap.mmap(
                fd, 1 << 20, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
            m[4096:4100] = b"RSA!"
            m.flush()
            m.close()
        finally:
            os.close(fd)
        with open(path, "rb") as f:
            f.seek(4096)
            if f.read(4) != b"RSA!":
                raise OSError(errno.EIO, "mapped bytes not read back")

    out["mmap-shared-write"] = outcome(mapped)

    # POSIX record locks: a second process is refused a conflicting lock
    def locks(kind):
        path = os.path.join(dout, f"lock.{kind}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            take = (
                (lambda f: fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB))
                if kind == "fcntl"
                else (lambda f: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB))
            )
            take(fd)
            pid = os.fork()
            if pid == 0:
                fd2 = os.open(path, os.O_RDWR)
                try:
                    take(fd2)
                    os._exit(0)  # got a lock it should not have
                except OSError as exc:
                    os._exit(
                        1
                        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
                        else 2
                    )
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            if code != 1:
                raise OSError(
                    errno.ENOLCK,
                    f"the second lock was {'granted' if code == 0 else 'refused oddly'}",
                )
        finally:
            os.close(fd)

    out["fcntl-lock-conflict"] = outcome(lambda: locks("fcntl"))
    out["flock-conflict"] = outcome(lambda: locks("flock"))

    # O_DIRECT: an aligned 1 MiB write and read
    def direct():
        path = os.path.join(dout, "direct")
        buf = mmap.mmap(-1, 1 << 20)
        buf.write(b"D" * (1 << 20))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
        try:
            os.write(fd, buf)
        finally:
            os.close(fd)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            back = mmap.mmap(-1, 1 << 20)
            if os.readv(fd, [back]) != 1 << 20 or back[:] != buf[:]:
                raise OSError(errno.EIO, "O_DIRECT bytes not read back")
        finally:
            os.close(fd)

    out["o-direct"] = outcome(direct)

    # a sparse file: 64 MiB apparent, one byte at the end; its hole found
    def sparse():
        path = os.path.join(dout, "sparse")
        with open(path, "wb") as f:
            f.seek((64 << 20) - 1)
            f.write(b"z")
        st = os.stat(path)
        if st.st_size != 64 << 20:
            raise OSError(errno.EIO, "wrong size")
        if st.st_blocks * 512 >= 32 << 20:
            raise OSError(errno.EFBIG, "the hole takes space")

    out["sparse-file"] = outcome(sparse)

    def seek_hole():
        fd = os.open(os.path.join(dout, "sparse"), os.O_RDONLY)
        try:
            if os.lseek(fd, 0, os.SEEK_DATA) < 32 << 20:
                raise OSError(errno.ENXIO, "SEEK_DATA finds no hole")
        finally:
            os.close(fd)

    out["seek-data-hole"] = outcome(seek_hole)
    for name, result in out.items():
        print(name, result)


if __name__ == "__main__":
    main(*sys.argv[1:4])
