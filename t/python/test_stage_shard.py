"""--shard K/N and --finalize; random trees with odd names (hypothesis)."""

import os
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_stage_helpers import make_tree, rsync_diff, stage

from flux_rsa.stage import StageRequest, run


def test_shards_together_make_the_whole_tree(tmp_path):
    src = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    for k in range(3):
        stage("copy", src, dst, "--shard", f"{k}/3", "--verify", "none", check=0)
    stage("copy", src, dst, "--finalize", check=0)
    assert rsync_diff(src, dst) == ""
    assert os.stat(dst / "a.txt").st_ino == os.stat(dst / "sub" / "hard-a").st_ino


def test_each_shard_copies_only_its_share(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(60):
        (src / f"f{i}").write_bytes(b"x")
    counts = []
    for k in range(2):
        r = run(
            StageRequest(
                "copy", str(src), str(tmp_path / f"d{k}"), shard=(k, 2), workers=2
            )
        )
        counts.append(r.files_copied)
    assert sum(counts) == 60 and min(counts) > 10
    names = [set(os.listdir(tmp_path / f"d{k}")) for k in range(2)]
    assert not names[0] & names[1]


name = st.binary(min_size=1, max_size=40).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)
tree = st.dictionaries(
    name,
    st.one_of(
        st.binary(max_size=3000),
        st.dictionaries(name, st.binary(max_size=500), max_size=4),
    ),
    max_size=8,
)


def _build(base, spec):
    os.makedirs(base, exist_ok=True)
    for n, v in spec.items():
        p = os.path.join(base, n)
        if isinstance(v, dict):
            _build(p, v)
        else:
            with open(p, "wb") as f:
                f.write(v)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(spec=tree)
def test_random_trees_with_odd_names_copy_and_round_trip(spec):
    base = tempfile.mkdtemp(prefix="rsa-stage-hyp-").encode()
    try:
        src = os.path.join(base, b"src")
        _build(src, spec)
        run(
            StageRequest(
                "copy", src, os.path.join(base, b"dst"), workers=2, verify="checksum"
            )
        )
        assert rsync_diff(src, os.path.join(base, b"dst")) == ""
        run(StageRequest("tar", src, os.path.join(base, b"arch"), workers=2))
        run(
            StageRequest(
                "untar",
                os.path.join(base, b"arch"),
                os.path.join(base, b"un"),
                workers=2,
            )
        )
        assert rsync_diff(src, os.path.join(base, b"un")) == ""
    finally:
        shutil.rmtree(base)
