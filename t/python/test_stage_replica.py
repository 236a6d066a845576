"""--replica: a stage-in copies a staged copy of its source, only while that
copy still matches the source."""

import json
import os
import subprocess
import sys

from flux_rsa.stage.replica import same_tree

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src", "python")


def tree(root):
    os.makedirs(f"{root}/d/e")
    with open(f"{root}/d/a.dat", "wb") as f:
        f.write(b"A" * 5000)
    with open(f"{root}/top", "wb") as f:
        f.write(b"top")
    os.symlink("d/a.dat", f"{root}/link")
    os.utime(f"{root}/d/a.dat", ns=(10**18, 10**18))


def stage(src, dst, replica):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "flux_rsa.stage",
            "copy",
            src,
            dst,
            "--replica",
            replica,
        ],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        check=True,
    )
    return [
        json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")
    ]


def test_a_copied_tree_matches_and_any_change_breaks_the_match(tmp_path):
    tree(tmp_path / "src")
    stage(str(tmp_path / "src"), str(tmp_path / "rep"), str(tmp_path / "nothing"))
    assert same_tree(tmp_path / "src", tmp_path / "rep")
    os.utime(tmp_path / "rep/d/a.dat", ns=(10**18, 10**18 + 1))
    assert not same_tree(tmp_path / "src", tmp_path / "rep")
    os.utime(tmp_path / "rep/d/a.dat", ns=(10**18, 10**18))
    (tmp_path / "rep/d/e/new").write_bytes(b"")
    assert not same_tree(tmp_path / "src", tmp_path / "rep")
    os.unlink(tmp_path / "rep/d/e/new")
    os.unlink(tmp_path / "rep/link")
    os.symlink("top", tmp_path / "rep/link")
    assert not same_tree(tmp_path / "src", tmp_path / "rep")


def test_the_stager_copies_the_replica_only_while_it_matches(tmp_path):
    tree(tmp_path / "src")
    stage(str(tmp_path / "src"), str(tmp_path / "rep"), str(tmp_path / "nothing"))
    # the replica's bytes differ but its metadata matches: proof of where a copy came from
    (tmp_path / "rep/top").write_bytes(b"REP")
    os.utime(tmp_path / "rep/top", ns=(os.stat(tmp_path / "src/top").st_mtime_ns,) * 2)
    lines = stage(str(tmp_path / "src"), str(tmp_path / "one"), str(tmp_path / "rep"))
    assert {"reused": str(tmp_path / "rep")} in lines
    assert (tmp_path / "one/top").read_bytes() == b"REP"
    # data_in changed since: the stager reads data_in itself
    (tmp_path / "src/top").write_bytes(b"new")
    lines = stage(str(tmp_path / "src"), str(tmp_path / "two"), str(tmp_path / "rep"))
    assert not any("reused" in line for line in lines)
    assert (tmp_path / "two/top").read_bytes() == b"new"
    assert os.readlink(tmp_path / "two/link") == "d/a.dat"
