"""rsa.paths: what a job sees at its own data_in and data_out."""

import os
import shutil
import subprocess
import sys

import pytest

from flux_rsa.core import BadConfig, BadRequest, Policy, admit
from flux_rsa.core import events as E
from flux_rsa.core import parse_request, process
from flux_rsa.core.paths import bind_blocker
from flux_rsa.core.paths import seen as job_paths
from flux_rsa.service.userns import job_namespaces

SMALL = {"proportion": 1, "node-capacity": "64M", "granule": "4M"}
BOTH = {"data_in": "/p/in", "data_out": "/p/out"}


def policy(**keys):
    userns = keys.pop("userns", True)
    return Policy.from_config({**SMALL, **keys}, userns=userns)


def resolved(attrs, pol):
    return admit(7, 1000, 1, parse_request(attrs), pol, 0.0).request.paths


@pytest.mark.parametrize(
    "site, userns, asked, got",
    [
        ("auto", True, None, "bind"),  # the shipped default where user namespaces work
        ("auto", False, None, "env"),  # ... and where they do not
        ("bind", False, None, "bind"),  # the site knows better than the service's look
        ("env", True, None, "env"),
        ("env", True, "bind", "bind"),  # the job's own choice wins
        ("auto", True, "env", "env"),
    ],
)
def test_the_job_gets_its_own_choice_else_the_sites(site, userns, asked, got):
    attrs = {**BOTH, **({"paths": asked} if asked else {})}
    assert resolved(attrs, policy(paths=site, userns=userns)) == got


def test_paths_mean_nothing_without_data_in_or_data_out():
    assert resolved({"capacity": "8M"}, policy()) is None
    with pytest.raises(BadRequest) as err:
        parse_request({"capacity": "8M", "paths": "bind"})
    assert "rsa.paths: 'bind' needs rsa.data_in or rsa.data_out too" in str(err.value)


@pytest.mark.parametrize(
    "attrs, message",
    [
        ({**BOTH, "paths": "mount"}, "rsa.paths: 'mount' is not allowed (\"bind\""),
        ({**BOTH, "paths": True}, "rsa.paths: true is not allowed"),
        (
            {"data_in": "/p/out/in", "data_out": "/p/out", "paths": "bind"},
            "rsa.paths: 'bind' cannot be done: rsa.data_in is inside rsa.data_out",
        ),
        (
            {"data_in": "/", "paths": "bind"},
            "rsa.paths: 'bind' cannot be done: rsa.data_in is /",
        ),
    ],
)
def test_a_bad_paths_request_is_refused_with_the_value_and_the_fix(attrs, message):
    with pytest.raises(BadRequest) as err:
        parse_request(attrs)
    assert message in str(err.value)
    assert "use rsa.paths=env" in str(err.value) or "is not allowed" in str(err.value)


def test_a_default_of_bind_gives_env_where_mounts_cannot_show_the_paths():
    nested = {"data_in": "/p/out/in", "data_out": "/p/out"}
    assert bind_blocker(nested["data_in"], nested["data_out"])
    assert resolved(nested, policy(paths="bind")) == "env"
    assert bind_blocker("/p/in", "/p/inside") is None  # a common prefix is not nesting
    assert resolved({"data_in": "/p/in", "data_out": "/p/inside"}, policy()) == "bind"


def test_the_site_key_is_checked():
    assert Policy.from_config({}).paths == "auto"
    with pytest.raises(BadConfig) as err:
        Policy.from_config({"paths": "overlay"})
    assert "[rsa] paths: 'overlay' is not valid (use \"auto\"" in str(err.value)


def booted(rec):
    for ev in (
        E.OnDeck(1),
        E.HolderAllocated(2, 1, ("rsa0",), rec.need),
        E.HolderStarted(3, 1),
        E.RamdiskBuilt(4, 1, "/rd/7"),
    ):
        rec, _ = process(rec, ev)
    return rec


def started(rec, t=9):
    rec, acts = process(rec, E.Starting(t))
    return rec, [a for a in acts if type(a).__name__ == "ReplyStart"][0].env


def test_the_start_env_carries_the_mode_only_for_what_is_on_the_ramdisk():
    rec = booted(admit(7, 1000, 1, parse_request(BOTH), policy(), 0.0))
    rec, _ = process(rec, E.StageEnded(6, rec.stage_seq, True))  # READY
    rec, env = started(rec)
    assert (env.paths, env.staged_in, env.out_on_ramdisk) == ("bind", True, True)
    assert job_paths(rec.to_dict()) == "in=ramdisk,out=ramdisk"

    late = booted(
        admit(7, 1000, 1, parse_request(BOTH), policy(), 0.0)
    )  # still staging in
    late, env = started(late)
    assert (env.paths, env.staged_in, env.out_on_ramdisk) == ("bind", False, True)
    assert job_paths(late.to_dict()) == "in=real,out=ramdisk"

    early = admit(7, 1000, 1, parse_request(BOTH), policy(), 0.0)  # no RAM disk yet
    early, env = started(early)
    assert env.paths is None and job_paths(early.to_dict()) == "real"

    rec = booted(
        admit(7, 1000, 1, parse_request({**BOTH, "paths": "env"}), policy(), 0.0)
    )
    rec, env = started(rec)
    assert env.paths == "env" and job_paths(rec.to_dict()) == "env"


def test_records_saved_before_paths_existed_still_load_and_show():
    rec = booted(admit(7, 1000, 1, parse_request(BOTH), policy(), 0.0))
    rec, _ = started(rec)
    old = rec.to_dict()
    del old["env"]["paths"]
    del old["request"]["paths"]
    assert job_paths(old) == "env"
    assert type(rec).from_dict(old).env.paths is None


def test_the_service_looks_whether_job_shells_may_make_their_namespace():
    ok, why = job_namespaces()
    assert ok, why


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
    reason="needs root, unshare and setpriv (util-linux)",
)
def test_where_user_namespaces_are_not_allowed_the_look_says_why():
    # inside a user namespace of our own, limited to no further user
    # namespaces and without capabilities: what a node with
    # user.max_user_namespaces = 0 looks like to an ordinary user
    here = os.path.dirname(
        os.path.dirname(os.path.abspath(sys.modules["flux_rsa"].__file__))
    )
    code = (
        "import sys; sys.path.insert(0, %r); from flux_rsa.service.userns import job_namespaces; "
        "print(job_namespaces())" % here
    )
    out = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            "echo 0 >/proc/sys/user/max_user_namespaces && exec setpriv --inh-caps=-all "
            '--bounding-set=-all "$@"',
            "probe",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (
        "(False, 'unshare(CLONE_NEWUSER|CLONE_NEWNS): No space left on device')"
        in out.stdout
    )
