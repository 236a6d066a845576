"""Shared helpers for the stager tests (trees, running the command)."""

import contextlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPATH = os.path.join(ROOT, "src", "python")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def stage(*args, user=None, check=None):
    """Run python3 -m flux_rsa.stage ARGS; return CompletedProcess (bytes)."""
    env = dict(os.environ, PYTHONPATH=PYPATH)
    cmd = [
        PY,
        "-m",
        "flux_rsa.stage",
        *[os.fsencode(a) if isinstance(a, bytes) else a for a in args],
    ]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check is not None:
        assert proc.returncode == check, (proc.returncode, proc.stderr)
    return proc


@contextlib.contextmanager
def nobody_tree(dirs=("a", "b"), per_dir=600):
    """A source nobody can read and a destination nobody owns, under /tmp
    (root's tmp_path is closed to others): SRC/<d>/fNNN of NNN bytes for
    each of DIRS.  Yields (src, out); removed at the end."""
    import pwd
    import shutil
    import tempfile

    nobody = pwd.getpwnam("nobody")
    base = tempfile.mkdtemp(dir="/tmp", prefix="rsa-test-")
    try:
        os.chmod(base, 0o755)
        src = os.path.join(base, "src")
        for d in dirs:
            os.makedirs(os.path.join(src, d))
            for i in range(per_dir):
                with open(os.path.join(src, d, f"f{i:03d}"), "wb") as f:
                    f.write(b"x" * i)
        out = os.path.join(base, "out")
        os.mkdir(out)
        os.chown(out, nobody.pw_uid, nobody.pw_gid)
        yield src, out
    finally:
        shutil.rmtree(base)


@contextlib.contextmanager
def tmpfs(mnt, size):
    """A tmpfs of SIZE (e.g. "1m") mounted on the new directory MNT (root
    only), unmounted at the end."""
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "rsa-test", mnt], check=True
    )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], check=True)


@contextlib.contextmanager
def failing_disk(base):
    """An ext4 file system (no journal, errors=continue) on a loop device
    whose 64 MiB image lies on an 8 MiB tmpfs (root only): writes succeed
    into the page cache, and writing them back to the device fails once the
    tmpfs is full.  Yields the mount point; removes all it made.  Raises
    OSError if the machine has no loop devices."""
    back, mnt = base / "back", base / "mnt"
    for d in (base, mnt):
        d.mkdir()
    with tmpfs(back, "8m"):
        img = back / "disk.img"
        with open(img, "wb") as f:
            f.truncate(64 << 20)
        subprocess.run(
            ["mkfs.ext4", "-q", "-O", "^has_journal", "-E", "nodiscard", img],
            check=True,
        )
        made = subprocess.run(
            ["losetup", "-f", "--show", img],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if made.returncode != 0:
            raise OSError(f"no loop device: {made.stderr.strip()}")
        loop = made.stdout.strip()
        try:
            subprocess.run(["mount", "-o", "errors=continue", loop, mnt], check=True)
            try:
                yield mnt
            finally:
                subprocess.run(["umount", mnt], check=True)
        finally:
            subprocess.run(["losetup", "-d", loop], check=True)


def rsync_diff(src, dst, root=False):
    """Itemized differences rsync -a --checksum would fix ('' when none).
    The stager copies SRC's contents and leaves DST's own mode and times
    alone, so the line for the root itself ('./') counts only with ROOT."""
    out = subprocess.run(
        [
            "rsync",
            "-n",
            "-a",
            "-i",
            "--checksum",
            os.fsencode(src) + b"/",
            os.fsencode(dst) + b"/",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode("utf-8", "backslashreplace")
    if not root:
        text = "".join(
            line
            for line in text.splitlines(keepends=True)
            if line.rstrip("\n")[12:] != "./"
        )
    return text


def make_tree(base):
    """A small tree with every kind of entry the stager must keep."""
    base = os.fsencode(base)
    j = lambda *p: os.path.join(base, *p)  # noqa: E731
    os.makedirs(j(b"sub", b"deep"))
    os.makedirs(j(b"empty-dir"))
    with open(j(b"a.txt"), "wb") as f:
        f.write(b"hello\n")
    open(j(b"empty.txt"), "wb").close()
    with open(j(b"with space"), "wb") as f:
        f.write(b"space")
    with open(j(b"new\nline"), "wb") as f:
        f.write(b"newline")
    with open(j(b"bad-\xff\xfe-utf8"), "wb") as f:
        f.write(b"bytes name")
    with open(j(b"sub", b"deep", b"random.bin"), "wb") as f:
        f.write(os.urandom(300_000))
    with open(j(b"big-sparse"), "wb") as f:
        f.truncate(8 << 20)
        f.seek(3 << 20)
        f.write(b"data in the middle")
    os.symlink(b"a.txt", j(b"link-rel"))
    os.symlink(b"/nonexistent/target", j(b"link-dangling"))
    os.symlink(b"../../etc/passwd", j(b"sub", b"link-out"))
    os.link(j(b"a.txt"), j(b"sub", b"hard-a"))
    os.mkfifo(j(b"fifo"))
    os.chmod(j(b"a.txt"), 0o640)
    os.chmod(j(b"sub"), 0o751)
    os.chmod(j(b"sub", b"deep", b"random.bin"), 0o400)
    os.utime(j(b"empty.txt"), ns=(1_000_000_123, 1_500_000_000_987_654_321))
    os.utime(j(b"empty-dir"), ns=(1_000_000_000, 1_200_000_000_000_000_001))
    return base


def allocated(path):
    return os.stat(path).st_blocks * 512
