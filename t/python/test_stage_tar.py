"""tar and untar modes: one archive that keeps what copy keeps."""

import os
import subprocess

from test_stage_helpers import allocated, make_tree, rsync_diff, stage


def test_tar_writes_one_archive_gnu_tar_restores_exactly(tmp_path):
    src = make_tree(tmp_path / "src")
    out = tmp_path / "out"
    stage("tar", src, out, check=0)
    assert sorted(os.listdir(out)) == ["rsa-output.tar"]
    restored = tmp_path / "gnu"
    restored.mkdir()
    subprocess.run(
        ["tar", "-C", restored, "-xf", out / "rsa-output.tar"],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    assert rsync_diff(src, restored) == ""
    assert allocated(restored / "big-sparse") <= 64 << 10


def test_tar_name_option(tmp_path):
    src = make_tree(tmp_path / "src")
    stage("tar", src, tmp_path / "out", "--name", "result.tar", check=0)
    assert os.listdir(tmp_path / "out") == ["result.tar"]


def test_untar_round_trip_keeps_links_holes_and_times(tmp_path):
    src = make_tree(tmp_path / "src")
    data_in = tmp_path / "in"
    stage("tar", src, data_in, "--name", "input.tar", check=0)
    ram = tmp_path / "ram"
    stage("untar", data_in, ram, check=0)
    assert rsync_diff(src, ram) == ""
    a, b = os.stat(ram / "a.txt"), os.stat(ram / "sub" / "hard-a")
    assert a.st_ino == b.st_ino
    assert allocated(ram / "big-sparse") <= 64 << 10
    assert os.stat(ram / "empty.txt").st_mtime_ns == 1_500_000_000_987_654_321


def test_untar_reads_gnu_tar_archives_and_copies_other_entries(tmp_path):
    src = make_tree(tmp_path / "src")
    data_in = tmp_path / "in"
    data_in.mkdir()
    subprocess.run(
        ["tar", "--format=posix", "-C", src, "-cf", data_in / "x.tar", "."], check=True
    )
    (data_in / "notes.txt").write_bytes(b"copied as is")
    ram = tmp_path / "ram"
    stage("untar", data_in, ram, check=0)
    assert (ram / "notes.txt").read_bytes() == b"copied as is"
    assert not (ram / "x.tar").exists()
    assert (ram / "sub" / "deep" / "random.bin").read_bytes() == open(
        os.path.join(src, b"sub/deep/random.bin"), "rb"
    ).read()
    root = os.stat(ram)
    os.unlink(ram / "notes.txt")  # which changes the root's mtime: put it back
    os.utime(ram, ns=(root.st_atime_ns, root.st_mtime_ns))
    assert rsync_diff(src, ram) == ""


def test_untar_refuses_members_leaving_the_destination(tmp_path):
    evil = tmp_path / "in"
    evil.mkdir()
    (tmp_path / "payload").write_bytes(b"x")
    subprocess.run(
        [
            "tar",
            "-C",
            tmp_path,
            "-cf",
            evil / "e.tar",
            "--transform",
            "s,^,../,",
            "payload",
        ],
        check=True,
    )
    proc = stage("untar", evil, tmp_path / "ram")
    assert proc.returncode == 1
    assert b"leaves the destination" in proc.stderr
    assert not (tmp_path / "payload2").exists()


def test_tar_run_twice_replaces_the_archive_whole(tmp_path):
    src = make_tree(tmp_path / "src")
    out = tmp_path / "out"
    stage("tar", src, out, check=0)
    (out / ".rsa-stage.0.99999.1.tmp").write_bytes(b"left by a killed run")
    stage("tar", src, out, check=0)
    assert sorted(os.listdir(out)) == ["rsa-output.tar"]


def _tree_with_late_link(base):
    """make_tree plus a hard-link pair whose first name in walk order (b/x,
    shallower) comes after the other (a/c/y) in depth-first order, and
    directory times well in the past."""
    src = make_tree(base)
    j = lambda *p: os.path.join(src, *p)  # noqa: E731
    os.makedirs(j(b"a", b"c"))
    os.makedirs(j(b"b"))
    with open(j(b"b", b"x"), "wb") as f:
        f.write(b"linked twice")
    os.link(j(b"b", b"x"), j(b"a", b"c", b"y"))
    for i, rel in enumerate((b"a/c", b"a", b"b", b"sub/deep", b"sub", b"")):
        os.utime(j(rel) if rel else src, ns=(0, 1_600_000_000_000_000_007 + i))
    return src


def _dir_times(root, top=True):
    """{relative path: mtime} of every directory (without ROOT itself
    unless TOP: the stager leaves its destination's own times alone)."""
    root = os.fsencode(root)
    out = {}
    for dirpath, _, _ in os.walk(root):
        if top or dirpath != root:
            out[os.path.relpath(dirpath, root)] = os.stat(dirpath).st_mtime_ns
    return out


def test_gnu_tar_restores_directory_times_exactly(tmp_path):
    # GNU tar sets a directory's times when it meets the first member outside
    # it: every entry must follow its directory before any other directory
    src = _tree_with_late_link(tmp_path / "src")
    out = tmp_path / "out"
    stage("tar", src, out, check=0)
    restored = tmp_path / "gnu"
    restored.mkdir()
    subprocess.run(
        ["tar", "-C", restored, "-xf", out / "rsa-output.tar"],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    assert _dir_times(restored) == _dir_times(src)
    assert (
        os.stat(restored / "b" / "x").st_ino
        == os.stat(restored / "a" / "c" / "y").st_ino
    )
    assert rsync_diff(src, restored) == ""


def test_untar_restores_directory_times_and_late_links_exactly(tmp_path):
    src = _tree_with_late_link(tmp_path / "src")
    stage(
        "tar",
        src,
        tmp_path / "in",
        "--name",
        "input.tar",
        "--verify",
        "checksum",
        check=0,
    )
    ram = tmp_path / "ram"
    stage("untar", tmp_path / "in", ram, check=0)
    assert _dir_times(ram, top=False) == _dir_times(src, top=False)
    assert os.stat(ram / "b" / "x").st_ino == os.stat(ram / "a" / "c" / "y").st_ino
    assert rsync_diff(src, ram) == ""


def test_untar_verify_checksum_reads_members_inside_archives(tmp_path):
    src = make_tree(tmp_path / "src")
    stage("tar", src, tmp_path / "in", "--name", "input.tar", check=0)
    stage("untar", tmp_path / "in", tmp_path / "ram", "--verify", "checksum", check=0)
    assert rsync_diff(src, tmp_path / "ram") == ""


def gnu_extract(tmp_path):
    """GNU tar's extraction of tmp_path/out/rsa-output.tar, in tmp_path/gnu."""
    restored = tmp_path / "gnu"
    restored.mkdir()
    subprocess.run(
        ["tar", "-C", restored, "-xf", tmp_path / "out" / "rsa-output.tar"],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    return restored


def test_tar_long_names_and_deep_trees_round_trip(tmp_path):
    src = tmp_path / "src"
    deep = os.path.join(os.fsencode(src), *([b"d" * 50] * 7))
    os.makedirs(deep)
    for name in (b"f" * 200, b"g" * 255, b"short"):
        with open(os.path.join(deep, name), "wb") as f:
            f.write(name)
    os.utime(os.path.join(deep, b"short"), ns=(0, 1_234_567_890_123_456_789))
    stage("tar", src, tmp_path / "out", "--verify", "checksum", check=0)
    restored = gnu_extract(tmp_path)
    assert rsync_diff(src, restored) == ""
    stage("untar", tmp_path / "out", tmp_path / "ram", check=0)
    assert rsync_diff(src, tmp_path / "ram") == ""
    assert (
        os.stat(
            os.path.join(os.fsencode(tmp_path / "ram"), *([b"d" * 50] * 7), b"short")
        ).st_mtime_ns
        == 1_234_567_890_123_456_789
    )


def test_tar_many_batches_and_a_big_file_between_small_ones(tmp_path):
    # members go to the workers in batches written in one piece each, and
    # big files in ranges of their own: every kind of task, next to each other
    src = tmp_path / "src"
    for d in range(3):
        os.makedirs(src / f"d{d}")
        for i in range(700):
            (src / f"d{d}" / f"f{i:04d}").write_bytes(b"%d.%d\n" % (d, i) * (i % 7))
    with open(src / "d1" / "f0350-big", "wb") as f:
        block = os.urandom(1 << 20)
        for i in range(65):
            f.write(block[i:] + block[:i])
    os.link(src / "d2" / "f0001", src / "d0" / "z-link")
    stage("tar", src, tmp_path / "out", "--verify", "checksum", check=0)
    restored = gnu_extract(tmp_path)
    assert rsync_diff(src, restored) == ""
    assert (
        os.stat(restored / "d0" / "z-link").st_ino
        == os.stat(restored / "d2" / "f0001").st_ino
    )


def test_an_archive_or_tree_changed_meanwhile_fails_verification(tmp_path):
    """--verify size: an archive another process wrote to after GNU tar, or
    a tree that lost an entry between the walk and GNU tar, is a
    difference that running the stage again mends."""
    import pytest

    from flux_rsa.stage import tarwrite, verify
    from flux_rsa.stage.errors import EXIT_VERIFY, StageError

    src = make_tree(tmp_path / "src")
    w = tarwrite.TarWriter(src, os.fsencode(tmp_path / "out"))
    w.run(sync=False)
    verify.check_written(w)
    with open(w.final, "ab") as f:
        f.write(b"\0" * 512)
    with pytest.raises(StageError) as err:
        verify.check_written(w)
    assert err.value.code == EXIT_VERIFY
    assert err.value.line().endswith("written as %d (run the stage again)" % w.size)
    os.truncate(w.final, w.size)
    w.members -= 1  # as if GNU tar had found one entry fewer than the walk
    with pytest.raises(StageError) as err:
        verify.check_written(w)
    assert f"{w.members} entries archived, the walk found {w.entries()}" in (
        err.value.line()
    )
    assert err.value.line().endswith("(run the stage again)")


def test_verify_checksum_names_a_file_changed_since_it_was_archived(tmp_path):
    from flux_rsa.stage import tarwrite, verify
    from flux_rsa.stage.errors import EXIT_VERIFY, StageError

    src = make_tree(tmp_path / "src")
    w = tarwrite.TarWriter(src, os.fsencode(tmp_path / "out"))
    w.run(sync=False)
    verify.check_archive(w, "checksum")
    path = os.path.join(src, b"a.txt")
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(b"X")  # same size, same mtime: only the content tells
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    try:
        verify.check_archive(w, "checksum")
    except StageError as err:
        assert err.code == EXIT_VERIFY
        assert err.line() == (
            f"flux-rsa-stage: {tmp_path}/out/rsa-output.tar/a.txt: verification "
            "failed: contents differ (GNU tar --compare) (the tree changed since "
            "it was archived; run the stage again)"
        )
    else:
        raise AssertionError("a changed file passed verification")


def test_a_file_changed_while_gnu_tar_reads_it_asks_for_a_run(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "grows").write_bytes(b"x" * (1 << 20))
    w = tarwrite_of(src, tmp_path / "out")
    # GNU tar finds the file grown from the size it stat'ed
    line = w.failure_of(b"tar: ./grows: file changed as we read it")
    assert line == (
        f"flux-rsa-stage: {src}/grows: changed while being archived "
        "(run the stage again)"
    )
    line = w.failure_of(b"tar: %s: Cannot write: No space left on device" % w.tmp_path)
    assert line.startswith(f"flux-rsa-stage: {tmp_path}/out/rsa-output.tar: No space")
    line = w.failure_of(b"tar: %s: Wrote only 4096 of 10240 bytes" % w.tmp_path)
    assert line.startswith(f"flux-rsa-stage: {tmp_path}/out/rsa-output.tar: No space")
    line = w.failure_of(b"tar: ./gone: Cannot stat: No such file or directory")
    assert line.endswith("gone: changed while being archived (run the stage again)")


class tarwrite_of:
    """A TarWriter of SRC into OUT, to see how it words GNU tar's messages."""

    def __init__(self, src, out):
        from flux_rsa.stage import tarwrite

        self.w = tarwrite.TarWriter(os.fsencode(src), os.fsencode(out))
        self.final = os.path.join(os.fsencode(out), b"rsa-output.tar")
        self.tmp_path = os.path.join(os.fsencode(out), b".rsa-stage.0.1.0.tmp")

    def failure_of(self, message):
        return self.w._failure(2, [message], self.tmp_path, self.final).line()
