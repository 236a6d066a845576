"""Failures: one line on stderr naming the path and cause, a distinct exit code."""

import contextlib
import os

import pytest
from test_stage_helpers import failing_disk, make_tree, nobody_tree, stage, tmpfs

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tmpfs mount)")


def _one_line(proc):
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_missing_source_exit_5(tmp_path):
    proc = stage("copy", tmp_path / "nope", tmp_path / "dst")
    assert proc.returncode == 5
    line = _one_line(proc)
    assert line.startswith("flux-rsa-stage: ") and str(tmp_path / "nope") in line
    assert "No such file or directory" in line


def test_usage_error_exit_2(tmp_path):
    assert stage("copy", tmp_path).returncode == 2
    assert stage("copy", tmp_path, tmp_path / "d", "--shard", "3/2").returncode == 2


def test_help_lists_modes_and_exit_codes():
    proc = stage("--help", check=0)
    for word in (
        b"copy",
        b"untar",
        b"script",
        b"--as-user",
        b"--shard",
        b"exit status",
    ):
        assert word in proc.stdout


@root_only
def test_no_space_left_exit_3(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.dat").write_bytes(os.urandom(3 << 20))
    with tmpfs(tmp_path / "small", "1m") as mnt:
        proc = stage("copy", src, mnt / "out")
        assert proc.returncode == 3
        line = _one_line(proc)
        assert f"{mnt}/out/big.dat: No space left on device" in line
        assert "rsa.capacity" in line
        assert not (mnt / "out" / "big.dat").exists()
        assert [p for p in (mnt / "out").iterdir()] == []  # no temp file left


@root_only
def test_a_write_back_error_fails_the_stage(tmp_path):
    """Data the kernel could not write to the device is a failed stage,
    never exit 0 (a stage-out's RAM disk is destroyed after it), and is not
    left to be skipped as complete by the next run."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.dat").write_bytes(os.urandom(24 << 20))
    with contextlib.ExitStack() as stack:
        try:
            mnt = stack.enter_context(failing_disk(tmp_path / "disk"))
        except OSError as exc:
            pytest.skip(str(exc))
        proc = stage("copy", src, mnt / "out")
        assert proc.returncode == 1, proc.stderr
        line = _one_line(proc)
        assert line.startswith(
            f"flux-rsa-stage: {mnt}/out: writing to the device failed: "
        )
        assert "run the stage again" in line
        # its size and mtime are right, its data is not on the device: the
        # name is gone, so running the stage again copies it again
        assert not (mnt / "out" / "a.dat").exists()


def test_a_write_back_error_seen_by_the_background_flush_is_kept(monkeypatch):
    """The background flush's syncfs reports an error once per open file:
    it is handed over, not lost (the final syncfs would not see it)."""
    import ctypes
    import errno
    import threading

    from flux_rsa.stage import fsutil

    called = threading.Event()

    class FailingLibc:
        def syncfs(self, fd):
            ctypes.set_errno(errno.EIO)
            called.set()
            return -1

    monkeypatch.setattr(fsutil, "_libc", FailingLibc())
    fd = os.open("/", os.O_RDONLY)
    try:
        flusher = fsutil.Flusher(fd, interval=0.001)
        assert called.wait(10)
        error = flusher.stop()
    finally:
        os.close(fd)
    assert isinstance(error, OSError) and error.errno == errno.EIO


@pytest.mark.parametrize("tmpfile", [True, False])
def test_a_failed_close_leaves_no_file_under_its_name(tmp_path, monkeypatch, tmpfile):
    """Where close() writes the data out (NFS), its failure (here a full
    quota) means the file is not whole: it must not stay under its final
    name, where the next run would skip it as complete."""
    import errno

    from flux_rsa.stage import plan as planmod
    from flux_rsa.stage.copy import Copier
    from flux_rsa.stage.copyworker import CopyWorker
    from flux_rsa.stage.errors import EXIT_NOSPACE, StageError

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.dat").write_bytes(b"x" * 5000)
    dst = tmp_path / "dst"
    p = planmod.walk(os.fsencode(src))
    c = Copier(p, os.fsencode(dst), workers=1, tmpfile=tmpfile)
    c.prepare()
    assert c.tmpfile == tmpfile
    worker = CopyWorker(c, None)
    f = p.files[0]
    sfd = os.open(src / "a.dat", os.O_RDONLY)
    ddir = worker.ddirs.get(f.d)
    real_close = os.close

    def close(fd):
        if os.fstat(fd).st_dev == os.fstat(ddir).st_dev and fd not in (ddir, sfd):
            real_close(fd)
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
        real_close(fd)

    monkeypatch.setattr(os, "close", close)
    try:
        with pytest.raises(StageError) as err:
            c.writer.write(f, sfd, ddir)
    finally:
        monkeypatch.undo()
        os.close(sfd)
        worker.close()
        c.close()
    assert err.value.code == EXIT_NOSPACE and err.value.path == os.fsencode(
        dst / "a.dat"
    )
    assert os.listdir(dst) == []


def test_verify_checksum_names_a_mismatch(tmp_path):
    from flux_rsa.stage import errors, plan, verify

    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    # corrupt one byte without changing size or mtime
    p = dst / "sub" / "deep" / "random.bin"
    st = os.stat(p)
    os.chmod(p, 0o600)
    with open(p, "r+b") as f:
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 1]))
    os.chmod(p, st.st_mode)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    v = verify.Verifier(plan.walk(src), os.fsencode(dst), "checksum", 2)
    with pytest.raises(errors.StageError) as ei:
        v.run()
    assert ei.value.code == errors.EXIT_VERIFY == 6
    assert b"random.bin" in os.fsencode(ei.value.line())
    assert "content differs" in ei.value.line()
    # the source or the copy changed meanwhile: running it again can help
    assert ei.value.line().endswith(
        "(the copy differs from the source; run the stage again)"
    )


def test_script_failure_exit_7_one_line(tmp_path):
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    (tmp_path / "ram").mkdir()
    (tmp_path / "data").mkdir()
    proc = stage("script", script, tmp_path / "ram", tmp_path / "data")
    assert proc.returncode == 7
    assert _one_line(proc) == (
        f"flux-rsa-stage: {script}: stage script exited with "
        "status 3 (its own messages, if any, are just above)"
    )


def test_script_not_executable_exit_4(tmp_path):
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\n")
    (tmp_path / "ram").mkdir()
    proc = stage("script", script, tmp_path / "ram", tmp_path)
    assert proc.returncode == 4
    assert "is not executable" in _one_line(proc)


@root_only
def test_tar_no_space_left_exit_3_no_archive_left(tmp_path):
    src = make_tree(tmp_path / "src")
    with open(os.path.join(src, b"big.dat"), "wb") as f:
        f.write(os.urandom(3 << 20))
    with tmpfs(tmp_path / "small", "1m") as mnt:
        proc = stage("tar", src, mnt / "out")
        assert proc.returncode == 3
        line = _one_line(proc)
        assert f"{mnt}/out/rsa-output.tar: No space left on device" in line
        assert [p for p in (mnt / "out").iterdir()] == []  # no temp file left


@root_only
def test_tar_unreadable_file_or_directory_named_exit_4(tmp_path):
    # run as nobody: a file and then a directory it may not read, among
    # enough files for several batches; the error names the entry and
    # nothing is left in the destination
    with nobody_tree() as (src, out):
        secret = os.path.join(src, "b", "f300")
        os.chmod(secret, 0o600)
        proc = stage("tar", src, out, "--as-user", "nobody")
        assert proc.returncode == 4, proc.stderr
        line = _one_line(proc)
        assert f"{secret}: Permission denied" in line
        assert os.listdir(out) == []
        os.chmod(secret, 0o644)
        locked = os.path.join(src, "a", "locked")
        os.mkdir(locked, 0o700)
        proc = stage("tar", src, out, "--as-user", "nobody")
        assert proc.returncode == 4, proc.stderr
        assert f"{locked}: Permission denied" in _one_line(proc)
        assert os.listdir(out) == []


def test_verify_names_a_mode_the_destination_did_not_keep(tmp_path):
    from flux_rsa.stage import errors, plan, verify

    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    # what GlusterFS does to a file with setgid and sticky: keeps setuid only
    os.chmod(os.path.join(src, b"sub", b"deep", b"random.bin"), 0o7777)
    os.chmod(dst / "sub" / "deep" / "random.bin", 0o4777)
    with pytest.raises(errors.StageError) as ei:
        verify.Verifier(plan.walk(src), os.fsencode(dst), "size", 2).run()
    assert ei.value.code == errors.EXIT_VERIFY
    assert "mode 4777, expected 7777" in ei.value.line()
    assert "does not keep setgid and sticky together" in ei.value.line()
    assert "run the stage again" not in ei.value.line()


def test_a_mode_not_kept_says_which_bits_and_suggests_no_retry(tmp_path):
    """The stager set the mode; a file system that keeps other bits keeps
    them at every run: the message says what differs, not to run again."""
    from flux_rsa.stage import errors, plan, verify

    src = tmp_path / "src"
    src.mkdir()
    (src / "tool").write_bytes(b"#!/bin/sh\n")
    os.chmod(src / "tool", 0o6755)
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    os.chmod(dst / "tool", 0o2755)
    with pytest.raises(errors.StageError) as ei:
        verify.Verifier(plan.walk(src), os.fsencode(dst), "size", 2).run()
    assert ei.value.code == errors.EXIT_VERIFY
    assert ei.value.line() == (
        f"flux-rsa-stage: {dst}/tool: verification failed: mode 2755, expected 6755: the "
        "destination file system did not keep setuid (running the stage again would not "
        "change it: stage to a file system that keeps these bits, or change the mode in "
        "the source)"
    )


def test_one_way_to_show_a_value_in_a_message():
    from flux_rsa.stage.errors import show

    # bytes and the str os.fsdecode makes of them read alike: undecodable
    # bytes escaped, the line kept one line
    assert show(b"in-\xff\xfe/a\nb") == "in-\\xff\\xfe/a\\nb"
    assert show("in-\udcff\udcfe/a\nb") == "in-\\xff\\xfe/a\\nb"
    assert show("caf\u00e9") == "caf\u00e9"
