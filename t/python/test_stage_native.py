"""The copy loop in C (src/stage/copybatch.c): same files, same guarantees,
same errors as the Python loop it stands in for."""

import os
import subprocess

import pytest
from test_stage_helpers import ROOT, make_tree, rsync_diff, stage

from flux_rsa.stage import native
from flux_rsa.stage import plan as planmod
from flux_rsa.stage.copy import Copier
from flux_rsa.stage.copyworker import CopyWorker
from flux_rsa.stage.errors import StageError
from flux_rsa.stage.tasks import Batch, make_tasks

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown)")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The C loop: the one `make` built (FLUX_RSA_COPYBATCH, as `make check`
    sets it), else compiled here from the source."""
    path = os.environ.get(native.ENV)
    if path:
        assert os.path.exists(path), f"{native.ENV}={path} does not exist"
        return path
    path = str(tmp_path_factory.mktemp("lib") / native.LIBRARY)
    subprocess.run(
        [
            "cc",
            "-O2",
            "-Wall",
            "-Werror",
            "-shared",
            "-fPIC",
            "-o",
            path,
            os.path.join(ROOT, "src", "stage", "copybatch.c"),
        ],
        check=True,
    )
    return path


@pytest.fixture
def engine(request, library, monkeypatch):
    """Run the stager with the C loop ("c") or without it ("python")."""
    monkeypatch.setenv(native.ENV, library if request.param == "c" else "")
    return request.param


both = pytest.mark.parametrize("engine", ["c", "python"], indirect=True)


def _many_files(base, ndirs=150, per_dir=2):
    """Small files in more directories than a worker keeps open at once."""
    for d in range(ndirs):
        os.makedirs(os.path.join(base, f"d{d:03}"))
        for i in range(per_dir):
            path = os.path.join(base, f"d{d:03}", f"f{i}")
            with open(path, "wb") as f:
                f.write(os.urandom(100 * i + d))
            os.chmod(path, 0o600 + (i & 1) * 0o44)
            os.utime(path, ns=(1_000_000_000 + d, 1_600_000_000_123_456_789 + i))


class Copied:
    """One in-process copy with the C loop (no worker processes): what it
    copied, and the error it raised."""

    def __init__(
        self, src, dst, tmpfile=True, plan=None, hide=False, before_publish=None
    ):
        self.plan = plan or planmod.walk(os.fsencode(src))
        planmod.compare_dest(self.plan, os.fsencode(dst), b"0")
        self.copier = c = Copier(
            self.plan, os.fsencode(dst), workers=1, tmpfile=tmpfile, hide=hide
        )
        assert c.lib is not None, os.environ.get(native.ENV)
        self.in_c = []
        self.error = None
        call = native.BatchCopier._call

        def counted(batch, recs, start, n, names, sdir, ddir, hidden):
            done = call(batch, recs, start, n, names, sdir, ddir, hidden)
            self.in_c.append(done)
            return done

        c.prepare()
        worker = CopyWorker(c, None)
        native.BatchCopier._call = counted
        try:
            for task in make_tasks(self.plan.files):
                assert isinstance(task, Batch)
                worker.batch(task.start, task.end)
            if before_publish is not None:
                before_publish()
            c.publish()
            c.finish_dirs()
        except StageError as exc:
            self.error = exc
        finally:
            native.BatchCopier._call = call
            worker.close()
            c.close()


@both
def test_both_loops_copy_every_kind_of_entry(tmp_path, engine):
    src = make_tree(tmp_path / "src")
    _many_files(os.fsdecode(os.path.join(src, b"many")))
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    assert rsync_diff(src, dst) == ""
    assert not list(dst.rglob(".rsa-stage.*"))


@pytest.mark.parametrize("tmpfile", [True, False], ids=["o_tmpfile", "named_tmp"])
def test_the_c_loop_keeps_contents_modes_times(tmp_path, library, monkeypatch, tmpfile):
    monkeypatch.setenv(native.ENV, library)
    src = tmp_path / "src"
    _many_files(src)
    run = Copied(src, tmp_path / "dst", tmpfile=tmpfile)
    assert run.error is None
    assert sum(run.in_c) == 300  # every file went through the C loop
    assert len(run.in_c) >= 3  # in pieces: one directory at a time
    assert rsync_diff(src, tmp_path / "dst") == ""
    assert not list((tmp_path / "dst").rglob(".rsa-stage.*"))


@root_only
def test_the_c_loop_sets_owners_and_set_id_bits(tmp_path, library, monkeypatch, owner):
    monkeypatch.setenv(native.ENV, library)
    src = tmp_path / "src"
    _many_files(src, ndirs=2, per_dir=4)
    mine = src / "d000" / "f1"
    theirs = src / "d001" / "f1"
    os.chown(theirs, owner.pw_uid, owner.pw_gid)
    os.chmod(theirs, 0o4755)  # after chown, which clears set-ID bits
    run = Copied(src, tmp_path / "dst")
    assert run.error is None and sum(run.in_c) == 8
    assert rsync_diff(src, tmp_path / "dst") == ""  # -a as root: owners too
    st = os.stat(tmp_path / "dst" / "d001" / "f1")
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (
        owner.pw_uid,
        owner.pw_gid,
        0o4755,
    )
    assert os.stat(tmp_path / "dst" / "d000" / "f1").st_uid == os.stat(mine).st_uid


@pytest.mark.parametrize("tmpfile", [True, False], ids=["o_tmpfile", "named_tmp"])
def test_the_c_loop_replaces_an_older_file_whole(
    tmp_path, library, monkeypatch, tmpfile
):
    monkeypatch.setenv(native.ENV, library)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"new contents")
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "a").write_bytes(b"old")
    held = open(dst / "a", "rb")  # a reader of the old file keeps it whole
    run = Copied(src, dst, tmpfile=tmpfile)
    assert run.error is None and run.in_c == [1]
    assert (dst / "a").read_bytes() == b"new contents"
    assert held.read() == b"old"
    held.close()
    assert sorted(os.listdir(dst)) == ["a"]


def test_the_c_loop_writes_in_place_in_a_hidden_new_directory(
    tmp_path, library, monkeypatch
):
    # a new directory is filled under its hidden name, its files created
    # under their final names; one a killed run left there (partial) is
    # replaced; the directory gets its name when all is in
    monkeypatch.setenv(native.ENV, library)
    src = tmp_path / "src"
    (src / "new").mkdir(parents=True)
    (src / "new" / "a").write_bytes(b"all of a")
    (src / "new" / "b").write_bytes(b"all of b")
    dst = tmp_path / "dst"
    hidden = dst / ".rsa-stage.0.d.new.tmp"
    hidden.mkdir(parents=True)
    (hidden / "a").write_bytes(b"al")  # a killed run's partial file
    seen = {}

    def look():
        seen["final"] = (dst / "new").exists()
        seen["hidden"] = sorted(os.listdir(hidden))

    run = Copied(src, dst, hide=True, before_publish=look)
    assert run.error is None and run.in_c == [2]
    assert seen == {"final": False, "hidden": ["a", "b"]}
    assert rsync_diff(src, dst) == ""
    assert os.listdir(dst) == ["new"]  # the partial a replaced: rsync_diff is ""


def _stage_error(src, dst, engine, library, monkeypatch, change):
    """Plan a copy of SRC, CHANGE(src) before copying, copy with ENGINE;
    the StageError raised."""
    monkeypatch.setenv(native.ENV, library if engine == "c" else "")
    p = planmod.walk(os.fsencode(src))
    change(src)
    c = Copier(p, os.fsencode(dst), workers=2)
    with pytest.raises(StageError) as err:
        try:
            c.run()
        finally:
            c.close()
    return err.value


@both
def test_a_file_gone_since_the_plan_is_named(tmp_path, engine, library, monkeypatch):
    src = tmp_path / "src"
    _many_files(src, ndirs=3, per_dir=4)
    err = _stage_error(
        src,
        tmp_path / "dst",
        engine,
        library,
        monkeypatch,
        lambda s: os.unlink(s / "d001" / "f2"),
    )
    assert err.path == os.fsencode(src / "d001" / "f2")
    assert "No such file or directory" in str(err)
    assert not (tmp_path / "dst" / "d001" / "f2").exists()
    assert not list((tmp_path / "dst").rglob(".rsa-stage.*"))


@both
def test_a_file_changed_since_the_plan_is_named_and_not_kept(
    tmp_path, engine, library, monkeypatch
):
    src = tmp_path / "src"
    _many_files(src, ndirs=3, per_dir=4)

    def grow(s):
        with open(s / "d002" / "f3", "ab") as f:
            f.write(b"more")

    err = _stage_error(src, tmp_path / "dst", engine, library, monkeypatch, grow)
    assert err.path == os.fsencode(src / "d002" / "f3")
    assert "changed while being copied" in str(err)
    assert not (tmp_path / "dst" / "d002" / "f3").exists()
    assert not list((tmp_path / "dst").rglob(".rsa-stage.*"))


def test_a_passing_trouble_is_copied_by_the_python_loop(tmp_path, library, monkeypatch):
    """Where the C loop stops at a file that the Python loop then copies
    (here: the file was briefly away), the rest of the batch goes on in C
    and the copy is complete."""
    monkeypatch.setenv(native.ENV, library)
    src = tmp_path / "src"
    _many_files(src, ndirs=1, per_dir=6)
    away, there = tmp_path / "away", src / "d000" / "f2"
    p = planmod.walk(os.fsencode(src))
    os.rename(there, away)
    copy_one = CopyWorker.copy_one

    def back_then_copy(self, f):
        os.rename(away, there)
        return copy_one(self, f)

    monkeypatch.setattr(CopyWorker, "copy_one", back_then_copy)
    run = Copied(src, tmp_path / "dst", plan=p)
    assert run.error is None
    assert run.in_c == [2, 3]  # f0 f1 in C, f2 in Python, f3 f4 f5 in C
    assert rsync_diff(src, tmp_path / "dst") == ""


def _plan_entries(p):
    """Every entry of plan P with all it records (directories' and links'
    access times aside: a walk reads them, and so updates them)."""
    out = []
    for kind in ("dirs", "files", "symlinks", "specials"):
        for e in getattr(p, kind):
            attrs = type(e).__slots__ + planmod.Entry.__slots__
            keep = [a for a in attrs if a != "atime" or kind in ("files", "specials")]
            out.append((kind, tuple(getattr(e, a) for a in keep)))
    out += [("hardlink", h.d, h.name, h.first.name) for h in p.hardlinks]
    return out


def test_the_c_scan_plans_what_the_python_scan_plans(tmp_path, library, monkeypatch):
    src = make_tree(tmp_path / "src")
    # names whose bytes sort differently from their str (invalid UTF-8,
    # characters past the surrogates), beside plain ones
    for name in (b"\xc3\xa9t\xc3\xa9", b"z", b"\xe4\xb8\xad", b"\xff", b"\xee\x80\x80"):
        with open(os.path.join(src, name), "wb") as f:
            f.write(name)
    os.link(os.path.join(src, b"z"), os.path.join(src, b"\xff-link"))
    scans = []
    scan = native.Scanner.scan

    def counted(self, fd):
        got = scan(self, fd)
        scans.append(got is not None)
        return got

    monkeypatch.setattr(native.Scanner, "scan", counted)
    monkeypatch.setenv(native.ENV, library)
    in_c = planmod.walk(src)
    assert scans and all(scans)  # every directory was scanned in C
    monkeypatch.setenv(native.ENV, "")
    in_python = planmod.walk(src)
    assert _plan_entries(in_c) == _plan_entries(in_python)
    assert len(in_c.files) == 12 and len(in_c.hardlinks) == 2


def test_the_c_scan_makes_room_for_a_big_directory(tmp_path, library, monkeypatch):
    monkeypatch.setenv(native.ENV, library)
    for i in range(300):
        (tmp_path / f"{i:03}-{'x' * 100}").write_bytes(b"")
    scanner = native.Scanner(native.load(), room=4)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        got = scanner.scan(fd)
        assert sorted(os.fsdecode(name) for name, _ in got) == sorted(
            os.listdir(tmp_path)
        )
        assert scanner.scan(fd) == got  # read from the start again
    finally:
        os.close(fd)
    assert scanner.room >= 300


def test_a_streamed_copy_compares_each_directory_as_it_is_walked(
    tmp_path, library, monkeypatch
):
    """With the C loop the stager copies while it walks: each directory is
    compared with the destination when it is scanned (a resumed run keeps
    complete files, replaces changed ones, removes its stale temporary
    files), and the plan it ends with is the whole tree."""
    monkeypatch.setenv(native.ENV, library)
    src = make_tree(tmp_path / "src")
    _many_files(os.path.join(os.fsdecode(src), "many"), ndirs=5, per_dir=3)
    dst = tmp_path / "dst"
    stage("copy", src, dst, check=0)
    kept = dst / "many" / "d001" / "f1"
    kept_ino = os.stat(kept).st_ino
    changed = os.path.join(src, b"many", b"d002", b"f2")
    with open(changed, "r+b") as f:
        f.write(b"!")
    stale = dst / "many" / "d003" / ".rsa-stage.0.99.1.tmp"
    stale.write_bytes(b"left by a killed run")
    walker = planmod.Walker(src)
    c = Copier(walker.plan, os.fsencode(dst), workers=2)
    try:
        tally = c.run(walker)
        c.finish_dirs()
    finally:
        walker.close()
        c.close()
    assert rsync_diff(src, dst) == ""
    assert os.stat(kept).st_ino == kept_ino  # complete: not copied again
    assert not stale.exists()
    assert tally.walked and tally.files_total == len(walker.plan.files) == 22
    assert tally.files_copied == 1  # the changed file


def _watch_c_verify(tmp_path, monkeypatch, damage=None, bad=None):
    """Wrap native.verify: the C pass that takes BAD's directory, in
    whichever worker, first damages BAD's copy as DAMAGE says (that pass
    itself: another worker may be done with that directory before a pass
    of its own would have damaged it); every pass appends "DIR N" (the
    files it took) to the file returned, since the passes run in the
    workers."""
    checked = tmp_path / "checked"
    verify = native.verify
    bad_dir = os.path.basename(os.path.dirname(bad)).encode() if bad else None

    def watched(lib, root, rels, packs, check_one):
        if any(rels[p.d] == bad_dir for p in packs):
            try:  # once
                os.close(
                    os.open(tmp_path / "damaged", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                )
                if damage == "truncated":
                    os.truncate(bad, 1)
                elif damage == "mode":
                    os.chmod(bad, 0o666)
                elif damage == "gone":
                    os.unlink(bad)
            except FileExistsError:
                pass
        with open(checked, "a") as f:
            f.write("".join(f"{rels[p.d].decode()} {p.n}\n" for p in packs))
        return verify(lib, root, rels, packs, check_one)

    monkeypatch.setattr(native, "verify", watched)
    return checked


def test_the_c_verify_checks_every_file_the_c_loop_copied(
    tmp_path, library, monkeypatch
):
    """--verify size checks each file the C loop copied with the C loop,
    in the workers."""
    from flux_rsa.stage import api

    monkeypatch.setenv(native.ENV, library)
    src = tmp_path / "src"
    _many_files(src, ndirs=3, per_dir=4)
    checked = _watch_c_verify(tmp_path, monkeypatch)
    api.run(api.StageRequest("copy", str(src), str(tmp_path / "dst"), workers=2))
    passes = checked.read_text().split("\n")[:-1]
    assert sum(int(line.split()[1]) for line in passes) == 12  # every file in a C pass


@pytest.mark.parametrize("damage", ["truncated", "mode", "gone"])
def test_the_c_verify_names_a_copy_that_differs(tmp_path, library, monkeypatch, damage):
    """A copy that differs from the plan, found by the C verify, fails the
    stage with the same message as the Python check, naming the file."""
    from flux_rsa.stage import api
    from flux_rsa.stage.errors import EXIT_VERIFY

    monkeypatch.setenv(native.ENV, library)
    src = tmp_path / "src"
    _many_files(src, ndirs=3, per_dir=4)
    dst = tmp_path / "dst"
    bad = dst / "d001" / "f3"
    checked = _watch_c_verify(tmp_path, monkeypatch, damage, bad)
    with pytest.raises(StageError) as err:
        api.run(api.StageRequest("copy", str(src), str(dst), workers=2))
    assert "d001 4" in checked.read_text().split("\n")  # found by a C pass
    assert err.value.code == EXIT_VERIFY and err.value.path == os.fsencode(bad)
    why = {
        "truncated": "size 1, expected 301",
        "mode": "mode 0666, expected 0644",
        "gone": "missing",
    }[damage]
    assert f"verification failed: {why}" in str(err.value)
