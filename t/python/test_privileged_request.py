"""The privileged entry point's request checks (pure): one operation from a
fixed set, exactly its RSA_* variables, RAM-disk paths only under RSA_ROOT,
never root as a job owner unless the instance is root's."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux_rsa.privileged.request import OPS, Refused, environment, parse

ROOT = "/var/lib/flux-rsa"
FLUX = 990  # the instance owner's uid


def refused(env, match, owner=FLUX):
    with pytest.raises(Refused, match=match) as info:
        parse(env, owner)
    assert "\n" not in str(info.value)  # one line
    return str(info.value)


def stage(**changes):
    values = dict(root=ROOT, direction="in", mode="copy", src="/p/in", dst=f"{ROOT}/12.1/in",
                  owner=1001)
    values.update(changes)
    return environment("stage", **values)


def test_a_good_request_is_parsed_into_typed_values():
    r = parse(environment("hold", root=ROOT, name="12.1", size=4096, owner=1001,
                          provider="tmpfs", jobid=12, gen=1), FLUX)
    assert r.op == "hold"
    assert r.values == {"ROOT": ROOT, "NAME": "12.1", "SIZE": 4096, "OWNER": 1001,
                        "PROVIDER": "tmpfs", "JOBID": 12, "GEN": 1}


def test_only_the_operations_of_the_fixed_set():
    text = refused({"RSA_OP": "shell"}, r"RSA_OP='shell': not an operation")
    assert "known: hold, attach, detach, purge" in text
    refused({}, "RSA_OP is not set")


def test_a_variable_of_another_operation_is_refused():
    env = environment("measure", path="/p/in", owner=1001, root=ROOT)
    text = refused(env, "RSA_ROOT: not a variable of RSA_OP=measure")
    assert "RSA_PATH, RSA_OWNER" in text


def test_a_missing_variable_is_named():
    refused(environment("purge", root=ROOT), r"RSA_PATH is not set \(RSA_OP=purge needs")


@pytest.mark.parametrize("env, match", [
    (environment("sweep", root="var/lib"), "RSA_ROOT='var/lib': not an absolute path"),
    (environment("sweep", root="/var/lib/../../etc"), r"not a plain absolute path .*'/etc'"),
    (environment("sweep", root="/var/lib/"), "not a plain absolute path"),
    (environment("hold", root=ROOT, name="../x", size=1, owner=5, provider="tmpfs"),
     "RSA_NAME='../x': not a RAM disk's name"),
    (environment("hold", root=ROOT, name=".hidden", size=1, owner=5, provider="tmpfs"),
     "RSA_NAME='.hidden'"),
    (environment("hold", root=ROOT, name="1.1", size=0, owner=5, provider="tmpfs"),
     "RSA_SIZE='0': must be more than 0"),
    (environment("hold", root=ROOT, name="1.1", size="-5", owner=5, provider="tmpfs"),
     "RSA_SIZE='-5': not a number"),
    (environment("hold", root=ROOT, name="1.1", size=1, owner="x", provider="tmpfs"),
     "RSA_OWNER='x': not a number"),
    (environment("hold", root=ROOT, name="1.1", size=1, owner=5, provider="nfs"),
     "RSA_PROVIDER='nfs': must be one of tmpfs, dir"),
    (environment("sweep", root=ROOT, report_kept="yes"), "RSA_REPORT_KEPT='yes': must be 0 or 1"),
    (stage(verify="md5"), "RSA_VERIFY='md5': must be one of size, checksum, none"),
])
def test_each_value_is_of_its_kind(env, match):
    refused(env, match)


@pytest.mark.parametrize("env, var", [
    (environment("purge", root=ROOT, path="/etc/passwd"), "PATH"),
    (environment("purge", root=ROOT, path=f"{ROOT}/12.1/out"), "PATH"),  # inputs only
    (environment("purge", root=ROOT, path=f"{ROOT}/12.1"), "PATH"),
    (environment("purge", root=ROOT, path=f"{ROOT}/12.1/in/x"), "PATH"),
    (environment("purge", root=ROOT, path=f"{ROOT}-other/12.1/in"), "PATH"),
    (environment("discard", root=ROOT, path="/etc"), "PATH"),
    (environment("discard", root=ROOT, path=f"{ROOT}/12.1/in"), "PATH"),
    (environment("discard", root=ROOT, path=f"{ROOT}/.rsa-ramdisk"), "PATH"),
    (environment("hold", root=ROOT, name="1.1", size=1, owner=5, provider="tmpfs",
                 adopt="/etc", jobid=1), "ADOPT"),
    (stage(dst="/etc/cron.d"), "DST"),
    (stage(direction="out", src="/home/b/secret", dst="/p/out"), "SRC"),
    (stage(dst=f"{ROOT}/12.1/out"), "DST"),  # stage-in writes the input area only
    (stage(replica="/home/b/in"), "REPLICA"),
])
def test_ramdisk_paths_lie_under_the_root(env, var):
    refused(env, f"RSA_{var}=.*: not a RAM-disk path under RSA_ROOT")


def test_the_data_side_of_a_stage_may_be_any_absolute_path():
    r = parse(stage(src="/p/with space/in"), FLUX)
    assert r["SRC"] == "/p/with space/in"
    r = parse(stage(direction="out", src=f"{ROOT}/12.1/out", dst="/p/out"), FLUX)
    assert r["DST"] == "/p/out"


def test_root_as_job_owner_only_in_an_instance_run_by_root():
    text = refused(stage(owner=0), r"RSA_OWNER=0: refusing to act as root for a job")
    assert "uid 990" in text
    refused(environment("measure", path="/p", owner=0), "RSA_OWNER=0")
    assert parse(stage(owner=0), 0)["OWNER"] == 0


def test_scripts_belong_to_script_stages():
    refused(stage(mode="script"), "RSA_MODE=script needs RSA_SCRIPT")
    refused(stage(script="/home/a/s.sh"), "RSA_SCRIPT is only for RSA_MODE=script")
    r = parse(stage(mode="script", script="/home/a/in.sh"), FLUX)
    assert r["SCRIPT"] == "/home/a/in.sh"
    refused(stage(mode="tar", replica=f"{ROOT}/9.1/in"), "RSA_REPLICA is only for a copy stage-in")


def test_other_environment_variables_are_not_read():
    env = dict(environment("check"), PATH="/usr/bin", FLUX_OWNER_USERID="990", HOME="/root")
    assert parse(env, FLUX).op == "check"


@given(st.dictionaries(st.sampled_from(["OP", "ROOT", "NAME", "SIZE", "OWNER", "PATH", "SRC",
                                        "DST", "MODE", "DIRECTION", "PROVIDER", "LINK", "X"]),
                       st.text(max_size=30)))
def test_anything_is_either_parsed_or_refused_in_one_line(values):
    env = {f"RSA_{k}": v for k, v in values.items() if "\0" not in v}
    try:
        r = parse(env, FLUX)
    except Refused as exc:
        assert "\n" not in str(exc)
        return
    assert r.op in OPS
    for var in ("PATH", "SRC", "DST"):
        if var in r.values:
            assert r[var].startswith("/")
