"""copy mode: what rsync -a keeps, plus hard links and holes; resume; idempotence."""

import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import wait_until
from hypothesis import given
from hypothesis import strategies as st
from test_stage_helpers import (
    PY,
    PYPATH,
    allocated,
    make_tree,
    nobody_tree,
    rsync_diff,
    stage,
    tmpfs,
)

from flux_rsa.stage import plan as planmod
from flux_rsa.stage import tasks as tk


def test_copy_matches_rsync_a(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    proc = stage("copy", src, dst, check=0)
    assert proc.stderr == b""
    assert rsync_diff(src, dst) == ""


def test_copy_is_the_default_mode(tmp_path):
    src = make_tree(tmp_path / "src")
    stage(src, tmp_path / "dst", check=0)
    assert rsync_diff(src, tmp_path / "dst") == ""


def test_hard_links_stay_links(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    a = os.stat(dst / "a.txt")
    b = os.stat(dst / "sub" / "hard-a")
    assert (a.st_ino, a.st_nlink) == (b.st_ino, 2)


def test_sparse_files_stay_sparse(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    assert os.path.getsize(dst / "big-sparse") == 8 << 20
    assert allocated(dst / "big-sparse") <= 64 << 10
    with open(dst / "big-sparse", "rb") as f:
        f.seek(3 << 20)
        assert f.read(18) == b"data in the middle"


def test_symlinks_are_copied_as_links_never_followed(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    assert os.readlink(dst / "sub" / "link-out") == "../../etc/passwd"
    assert os.readlink(dst / "link-dangling") == "/nonexistent/target"
    assert os.path.islink(dst / "link-rel")


def test_directory_mtimes_and_modes_kept(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    for rel in ("sub", "empty-dir", "sub/deep"):
        s, d = os.stat(os.path.join(src, os.fsencode(rel))), os.stat(dst / rel)
        assert (s.st_mode, s.st_mtime_ns) == (d.st_mode, d.st_mtime_ns), rel
    assert os.stat(dst / "empty.txt").st_mtime_ns == 1_500_000_000_987_654_321


def test_existing_destination_root_keeps_its_own_mode_and_times(tmp_path):
    """Stage-out into data_out: the contents of the RAM disk's out/ (mode
    0700) arrive, but data_out's own mode is not replaced by 0700 and its
    mtime is never set to the source's; a run with nothing to copy leaves
    data_out exactly as it was.  (Same for a DST the stager creates.)"""
    src = make_tree(tmp_path / "out")
    os.chmod(src, 0o700)
    os.utime(src, ns=(1_000_000_000, 1_100_000_000_000_000_000))
    dst = tmp_path / "data_out"
    dst.mkdir()
    os.chmod(dst, 0o2775)
    stage("copy", src, dst, check=0)
    st = os.stat(dst)
    assert stat.S_IMODE(st.st_mode) == 0o2775
    assert st.st_mtime_ns != 1_100_000_000_000_000_000
    assert rsync_diff(src, dst) == ""  # everything below the root is kept
    os.utime(dst, ns=(2_000_000_000, 1_300_000_000_000_000_000))
    stage("copy", src, dst, check=0)
    st = os.stat(dst)
    assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (
        0o2775,
        1_300_000_000_000_000_000,
    )
    fresh = tmp_path / "fresh"
    stage("copy", src, fresh, check=0)
    assert os.stat(fresh).st_mtime_ns != 1_100_000_000_000_000_000


def test_second_run_copies_nothing_and_rewrites_nothing(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    before = {
        p: (os.lstat(p).st_ino, os.lstat(p).st_ctime_ns)
        for p in (dst / "a.txt", dst / "sub" / "deep" / "random.bin")
    }
    proc = stage("copy", src, dst, "--summary", check=0)
    assert b'"bytes_copied": 0' in proc.stderr
    after = {p: (os.lstat(p).st_ino, os.lstat(p).st_ctime_ns) for p in before}
    assert before == after
    assert rsync_diff(src, dst) == ""


def test_changed_file_is_recopied(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    with open(os.path.join(src, b"with space"), "wb") as f:
        f.write(b"changed content")
    stage("copy", src, dst, check=0)
    assert (dst / "with space").read_bytes() == b"changed content"


def test_source_is_never_modified(tmp_path):
    src = make_tree(tmp_path / "src")
    snap = subprocess.run(
        ["find", src, "-printf", "%p %s %T@ %C@ %m\n"], stdout=subprocess.PIPE
    ).stdout
    stage("copy", src, tmp_path / "dst", "--verify", "checksum", check=0)
    assert (
        subprocess.run(
            ["find", src, "-printf", "%p %s %T@ %C@ %m\n"], stdout=subprocess.PIPE
        ).stdout
        == snap
    )


def _big_tree(base, nfiles=400, size=256 << 10):
    os.makedirs(base)
    for d in range(4):
        os.makedirs(base / f"d{d}")
    data = os.urandom(size)
    for i in range(nfiles):
        with open(base / f"d{i % 4}" / f"f{i:04d}", "wb") as f:
            f.write(data)
    with open(base / "huge.bin", "wb") as f:
        for _ in range(6):
            f.write(os.urandom(32 << 20))


def test_killed_run_resumes_without_recopying(tmp_path):
    # the directories are new: the copy fills them under hidden names, so a
    # hard kill leaves nothing under a final name; the run started again
    # takes them up and keeps the files they hold complete
    src = tmp_path / "src"
    _big_tree(src)
    dst = tmp_path / "dst"
    env = dict(os.environ, PYTHONPATH=PYPATH)
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "flux_rsa.stage",
            "copy",
            str(src),
            str(dst),
            "--workers",
            "2",
            "--progress-json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    # wait until part of the tree is there, then kill everything hard
    wait_until(
        lambda: dst.exists() and len(list(dst.rglob("f*"))) > 20,
        20,
        "part of the tree copied",
        every=0.005,
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    seen = {}  # final path -> (inode, ctime) of each file complete at the kill
    for p in dst.rglob("f*"):
        final = Path(
            *[
                part.removeprefix(".rsa-stage.0.d.").removesuffix(".tmp")
                if part.startswith(".rsa-stage.0.d.")
                else part
                for part in p.relative_to(dst).parts
            ]
        )
        if p.name != final.name or not p.is_file():
            continue
        st = os.stat(p)
        if (
            st.st_size == 256 << 10
            and st.st_mtime_ns == os.stat(src / final).st_mtime_ns
        ):
            seen[dst / final] = (st.st_ino, st.st_ctime_ns)
    assert seen, "the copy finished or never started before the kill"
    assert not any((dst / f"d{d}").exists() for d in range(4)), sorted(dst.iterdir())
    stage("copy", src, dst, check=0)
    assert rsync_diff(src, dst) == ""
    for p, ident in seen.items():
        assert (os.stat(p).st_ino, os.stat(p).st_ctime_ns) == ident, p
    leftovers = [p for p in dst.rglob(".rsa-stage.*")]
    assert leftovers == []


def test_a_failed_copy_names_the_new_directories_it_filled():
    # run as nobody, one file it may not read: the stage fails, and the new
    # directories it filled get their names (every file in them is whole),
    # the unreadable file missing; run again once readable, it completes
    with nobody_tree() as (src, out):
        for d in ("a", "b"):
            os.mkdir(os.path.join(src, d, "deep"))
        secret = os.path.join(src, "b", "f300")
        os.chmod(secret, 0o600)
        proc = stage("copy", src, out, "--as-user", "nobody")
        assert proc.returncode == 4, proc.stderr
        assert f"{secret}: Permission denied" in proc.stderr.decode()
        assert sorted(os.listdir(out)) == ["a", "b"]
        for d in ("a", "b"):
            for name in os.listdir(os.path.join(out, d)):
                if name.startswith("f"):
                    assert os.path.getsize(os.path.join(out, d, name)) == int(name[1:])
        assert not os.path.exists(os.path.join(out, "b", "f300"))
        os.chmod(secret, 0o644)
        proc = stage("copy", src, out, "--as-user", "nobody")
        assert proc.returncode == 0, proc.stderr

        def tree(top):
            return sorted(
                (str(p.relative_to(top)), p.read_bytes() if p.is_file() else None)
                for p in Path(top).rglob("*")
            )

        assert tree(out) == tree(src)
        assert not [p for p in Path(out).rglob(".rsa-stage.*")]


@pytest.mark.parametrize("tmpfile", [True, False], ids=["o_tmpfile", "named_tmp"])
def test_both_ways_of_creating_files_keep_everything(tmp_path, tmpfile):
    # unnamed files linked into place (O_TMPFILE) where the file system can,
    # else hidden temporary names renamed into place: same result either way,
    # first copy and replacement of a changed file alike
    from flux_rsa.stage import plan as planmod
    from flux_rsa.stage.copy import Copier

    src = make_tree(tmp_path / "src")
    dst = os.fsencode(tmp_path / "dst")

    def copy():
        p = planmod.walk(src)
        planmod.compare_dest(p, dst, b"0")
        c = Copier(p, dst, workers=2, tmpfile=tmpfile)
        try:
            c.run()
            c.finish_dirs()
        finally:
            c.close()
        return c

    assert copy().tmpfile is tmpfile  # /tmp can hold O_TMPFILE files
    assert rsync_diff(src, dst) == ""
    with open(os.path.join(src, b"sub", b"deep", b"random.bin"), "r+b") as f:
        f.write(b"changed")
    copy()
    assert rsync_diff(src, dst) == ""
    assert not [n for n in os.listdir(dst) if n.startswith(b".rsa-stage.")]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tmpfs mount)")
def test_big_file_into_a_ram_disk_read_into_its_pages(tmp_path):
    # disk -> tmpfs: big files not in the page cache are read with O_DIRECT
    # into the mapped destination, in pieces; a size that is no multiple of
    # a block checks the tail, a second file the ranges of several files at
    # once
    src = tmp_path / "src"
    src.mkdir()
    piece = os.urandom(1 << 20)
    for name, size in (("big1", (64 << 20) + 12345), ("big2", 100 << 20)):
        with open(src / name, "wb") as f:
            for _ in range(size >> 20):
                f.write(piece)
            f.write(piece[: size & ((1 << 20) - 1)])
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    with tmpfs(tmp_path / "ram", "256m") as mnt:
        stage("copy", src, mnt / "out", "--verify", "checksum", check=0)
        assert rsync_diff(src, mnt / "out") == ""
        assert os.path.getsize(mnt / "out" / "big1") == (64 << 20) + 12345


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tmpfs mount)")
def test_big_file_out_of_a_ram_disk_written_direct(tmp_path):
    # tmpfs -> disk: big files are written with O_DIRECT from the mapped
    # source, range by range; a size that is no multiple of a block checks
    # the tail, a sparse file the path that keeps holes
    with tmpfs(tmp_path / "ram", "256m") as mnt:
        src = mnt / "out"
        src.mkdir()
        piece = os.urandom(1 << 20)
        for name, size in (("big1", (64 << 20) + 12345), ("big2", 100 << 20)):
            with open(src / name, "wb") as f:
                for i in range(size >> 20):
                    f.write(piece[i:] + piece[:i])
                f.write(piece[: size & ((1 << 20) - 1)])
        with open(src / "holes", "wb") as f:
            f.truncate(80 << 20)
            f.seek(70 << 20)
            f.write(b"end")
        dst = tmp_path / "data_out"
        stage("copy", src, dst, "--verify", "checksum", check=0)
        assert rsync_diff(src, dst) == ""
        assert os.path.getsize(dst / "big1") == (64 << 20) + 12345
        assert allocated(dst / "holes") <= 1 << 20


def test_two_workers_start_in_different_directories(tmp_path):
    """Workers pull batches of 256 files from one queue; interleaved, no
    two batches next to each other in the queue share a directory, so two
    workers pulling in turn create files in different directories."""
    src = tmp_path / "src"
    for d in range(4):
        (src / f"d{d}").mkdir(parents=True)
        for i in range(600):
            (src / f"d{d}" / f"f{i}").write_bytes(b"")
    p = planmod.walk(os.fsencode(src))
    tasks = tk.interleave(tk.make_tasks(p.files), 2)

    def dirs(task):
        return {p.files[i].d for i in range(task.start, task.end)}

    assert sorted(tasks) == sorted(tk.make_tasks(p.files))
    for a, b in zip(tasks, tasks[1:]):
        assert not dirs(a) & dirs(b), (a, b)


@given(st.lists(st.integers(), max_size=300), st.integers(1, 9))
def test_interleaving_keeps_every_task_once(tasks, n):
    assert sorted(tk.interleave(tasks, n)) == sorted(tasks)


def test_a_file_in_a_hidden_directory_is_written_under_its_name(tmp_path):
    # the Python loop's way for a new directory not named yet: the file is
    # created under its final name, a partial one a killed run left replaced
    from flux_rsa.stage import fsutil
    from flux_rsa.stage.filewrite import FileWriter

    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"whole")
    p = planmod.walk(os.fsencode(src))
    d = tmp_path / "hidden"
    d.mkdir()
    (d / "a").write_bytes(b"wh")
    w = FileWriter(p, os.fsencode(d), fsutil.TmpNames(b"0"), chown=False)
    sfd = os.open(src / "a", os.O_RDONLY)
    dfd = os.open(d, os.O_RDONLY)
    try:
        w.write(p.files[0], sfd, dfd, hidden=True)
    finally:
        os.close(sfd)
        os.close(dfd)
    assert os.listdir(d) == ["a"]
    assert (d / "a").read_bytes() == b"whole"
    assert os.stat(d / "a").st_mtime_ns == p.files[0].mtime
