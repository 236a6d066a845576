"""The privileged entry point's request checks (pure): one operation from a
fixed set, exactly its RSA_* variables, RAM-disk paths only under RSA_ROOT,
never root as a job owner unless the instance is root's."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flux_rsa.privileged.variables import OPS, Refused, environment, parse

ROOT = "/var/lib/flux-rsa"
FLUX = 990  # the instance owner's uid


def refused(env, match, owner=FLUX):
    with pytest.raises(Refused, match=match) as info:
        parse(env, owner)
    assert "\n" not in str(info.value)  # one line
    return str(info.value)


def stage(**changes):
    values = dict(
        root=ROOT,
        direction="in",
        mode="copy",
        src="/p/in",
        dst=f"{ROOT}/12.1/in",
        owner=1001,
    )
    values.update(changes)
    return environment("stage", **values)


def test_a_good_request_is_parsed_into_typed_values():
    r = parse(
        environment(
            "hold",
            root=ROOT,
            name="12.1",
            size=4096,
            owner=1001,
            provider="tmpfs",
            jobid=12,
            gen=1,
        ),
        FLUX,
    )
    assert r.op == "hold"
    assert r.values == {
        "ROOT": ROOT,
        "NAME": "12.1",
        "SIZE": 4096,
        "OWNER": 1001,
        "PROVIDER": "tmpfs",
        "JOBID": 12,
        "GEN": 1,
    }


def test_only_the_operations_of_the_fixed_set():
    text = refused({"RSA_OP": "shell"}, r"RSA_OP='shell': not an operation")
    assert "known: hold, attach, detach, purge" in text
    refused({}, "RSA_OP is not set")


def test_a_variable_of_another_operation_is_refused():
    env = environment("measure", path="/p/in", owner=1001, root=ROOT)
    text = refused(env, "RSA_ROOT: not a variable of RSA_OP=measure")
    assert "RSA_PATH, RSA_OWNER" in text


def test_a_missing_variable_is_named():
    refused(
        environment("purge", root=ROOT), r"RSA_PATH is not set \(RSA_OP=purge needs"
    )


@pytest.mark.parametrize(
    "env, match",
    [
        (
            environment("sweep", root="var/lib"),
            "RSA_ROOT='var/lib': not an absolute path",
        ),
        (
            environment("sweep", root="/var/lib/../../etc"),
            r"not a plain absolute path .*'/etc'",
        ),
        (environment("sweep", root="/var/lib/"), "not a plain absolute path"),
        (
            environment(
                "hold", root=ROOT, name="../x", size=1, owner=5, provider="tmpfs"
            ),
            "RSA_NAME='../x': not a RAM disk's name",
        ),
        (
            environment(
                "hold", root=ROOT, name=".hidden", size=1, owner=5, provider="tmpfs"
            ),
            "RSA_NAME='.hidden'",
        ),
        (
            environment(
                "hold", root=ROOT, name="1.1", size=0, owner=5, provider="tmpfs"
            ),
            "RSA_SIZE='0': must be more than 0",
        ),
        (
            environment(
                "hold", root=ROOT, name="1.1", size="-5", owner=5, provider="tmpfs"
            ),
            "RSA_SIZE='-5': not a number",
        ),
        (
            environment(
                "hold", root=ROOT, name="1.1", size=1, owner="x", provider="tmpfs"
            ),
            "RSA_OWNER='x': not a number",
        ),
        (
            environment("hold", root=ROOT, name="1.1", size=1, owner=5, provider="nfs"),
            "RSA_PROVIDER='nfs': must be one of tmpfs, dir",
        ),
        (
            environment("sweep", root=ROOT, report_kept="yes"),
            "RSA_REPORT_KEPT='yes': must be 0 or 1",
        ),
        (stage(verify="md5"), "RSA_VERIFY='md5': must be one of size, checksum, none"),
    ],
)
def test_each_value_is_of_its_kind(env, match):
    refused(env, match)


@pytest.mark.parametrize(
    "env, var",
    [
        (environment("purge", root=ROOT, path="/etc/passwd"), "PATH"),
        (
            environment("purge", root=ROOT, path=f"{ROOT}/12.1/out"),
            "PATH",
        ),  # inputs only
        (environment("purge", root=ROOT, path=f"{ROOT}/12.1"), "PATH"),
        (environment("purge", root=ROOT, path=f"{ROOT}/12.1/in/x"), "PATH"),
        (environment("purge", root=ROOT, path=f"{ROOT}-other/12.1/in"), "PATH"),
        (environment("discard", root=ROOT, path="/etc"), "PATH"),
        (environment("discard", root=ROOT, path=f"{ROOT}/12.1/in"), "PATH"),
        (environment("discard", root=ROOT, path=f"{ROOT}/.rsa-ramdisk"), "PATH"),
        (
            environment(
                "hold",
                root=ROOT,
                name="1.1",
                size=1,
                owner=5,
                provider="tmpfs",
                adopt="/etc",
                jobid=1,
            ),
            "ADOPT",
        ),
        (stage(dst="/etc/cron.d"), "DST"),
        (stage(direction="out", src="/home/b/secret", dst="/p/out"), "SRC"),
        (stage(dst=f"{ROOT}/12.1/out"), "DST"),  # stage-in writes the input area only
        (stage(replica="/home/b/in"), "REPLICA"),
    ],
)
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
    refused(
        stage(mode="tar", replica=f"{ROOT}/9.1/in"),
        "RSA_REPLICA is only for a copy stage-in",
    )


def test_a_producer_volume_only_with_a_copy_from_another_ramdisk():
    vol = dict(
        producer_servers="rsa0:24100",
        producer_user="rsa-7-1",
        producer_secret="0123456789abcdef",
    )
    r = parse(stage(src=f"{ROOT}/7.1/out/part", **vol), FLUX)
    assert r["PRODUCER_SERVERS"] == ("rsa0:24100",) and r["PRODUCER_USER"] == "rsa-7-1"
    match = "RSA_PRODUCER_SERVERS, _USER and _SECRET come together"
    refused(stage(src="/p/in", **vol), match)  # data_in is no RAM disk
    refused(stage(src=f"{ROOT}/7.1/out", mode="untar", **vol), match)
    refused(stage(src=f"{ROOT}/7.1/out", producer_servers="rsa0:24100"), match)
    refused(
        stage(src=f"{ROOT}/7.1/out", **dict(vol, producer_servers="rsa0")),
        "RSA_PRODUCER_SERVERS='rsa0': not a comma-separated list of HOST:PORT",
    )


def test_other_environment_variables_are_not_read():
    env = dict(
        environment("check"), PATH="/usr/bin", FLUX_OWNER_USERID="990", HOME="/root"
    )
    assert parse(env, FLUX).op == "check"


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "OP",
                "ROOT",
                "NAME",
                "SIZE",
                "OWNER",
                "PATH",
                "SRC",
                "DST",
                "MODE",
                "DIRECTION",
                "PROVIDER",
                "LINK",
                "X",
            ]
        ),
        st.text(max_size=30),
    )
)
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


# --- provider command: the site's scripts ------------------------------------


def command_hold(**changes):
    values = dict(
        root=ROOT,
        name="12.1",
        size=4096,
        owner=1001,
        provider="command",
        task_rank=1,
        nodes="rsa0,rsa1",
        jobid=12,
        gen=1,
    )
    values.update(changes)
    return environment("hold", **values)


def command_attach(**changes):
    values = dict(
        root="/mnt/rsa",
        name="12.1",
        rank=3,
        provider="command",
        owner=1001,
        nodes="rsa0,rsa1",
        source=f"{ROOT}/12.1",
        jobid=12,
    )
    values.update(changes)
    return environment("attach", **values)


def test_a_command_holder_task_knows_its_nodes_and_its_place_among_them():
    r = parse(command_hold(port=24100), FLUX)
    assert (r["NODES"], r["TASK_RANK"], r["PORT"]) == (("rsa0", "rsa1"), 1, 24100)
    refused(command_hold(nodes=None), r"RSA_PROVIDER=command needs RSA_NODES")
    refused(command_hold(task_rank=2), r"RSA_TASK_RANK=2: the holder has 2 node\(s\)")
    refused(
        command_hold(secret="s" * 20),
        "RSA_SECRET is only for RSA_PROVIDER=tmpfs or glusterfs",
    )
    refused(command_hold(port=65530), r"RSA_PORT=65530: its 8 ports run past 65535")
    refused(command_hold(adopt=f"{ROOT}/12.1"), "a command RAM disk cannot be adopted")
    refused(
        environment(
            "hold", root=ROOT, name="1.1", size=1, owner=5, provider="dir", nodes="rsa0"
        ),
        "RSA_NODES is only for RSA_PROVIDER=tmpfs or glusterfs or " "command",
    )
    # a tmpfs served to compute nodes: its port and login come together
    refused(
        environment(
            "hold", root=ROOT, name="1.1", size=1, owner=5, provider="tmpfs", port=24100
        ),
        "RSA_PORT and RSA_SECRET come together",
    )


def test_site_scripts_are_taken_from_a_trusted_caller_only():
    env = command_hold(
        command_create="/etc/rsa/create", command_destroy="/etc/rsa/destroy"
    )
    text = refused(
        env, r"RSA_COMMAND_CREATE: the site's scripts are read from the \[rsa\] table"
    )
    assert "never taken from a request" in text
    r = parse(env, 0, trusted=True)
    assert (r["COMMAND_CREATE"], r["COMMAND_DESTROY"]) == (
        "/etc/rsa/create",
        "/etc/rsa/destroy",
    )
    with pytest.raises(
        Refused, match="RSA_COMMAND_CREATE='etc/c': not an absolute path"
    ):
        parse(command_hold(command_create="etc/c"), 0, trusted=True)


def test_each_operation_takes_the_scripts_of_its_steps_only():
    trusted = {
        "hold": ("create", "destroy"),
        "attach": ("attach", "detach"),
        "detach": ("detach",),
        "sweep": ("destroy",),
        "discard": ("destroy",),
        "check": ("create", "destroy", "attach", "detach"),
    }
    assert {op: spec.scripts for op, spec in OPS.items() if spec.scripts} == trusted
    with pytest.raises(
        Refused, match="RSA_COMMAND_CREATE: not a variable of RSA_OP=sweep"
    ):
        parse(
            environment("sweep", root=ROOT, command_create="/etc/rsa/create"),
            0,
            trusted=True,
        )
    with pytest.raises(Refused, match="RSA_COMMAND_DETACH: the site's scripts"):
        parse(
            environment(
                "detach", root="/mnt", name="1.1", rank=0, command_detach="/tmp/evil"
            ),
            FLUX,
        )


def test_a_command_attach_names_the_ram_disk_on_its_nodes():
    r = parse(command_attach(port=24108), FLUX)
    assert (r["SOURCE"], r["NODES"], r["JOBID"], r["PORT"]) == (
        f"{ROOT}/12.1",
        ("rsa0", "rsa1"),
        12,
        24108,
    )
    refused(
        command_attach(source=f"{ROOT}/13.1"),
        r"RSA_SOURCE=.*: not the RAM disk RSA_NAME='12.1'",
    )
    refused(command_attach(source=None), "RSA_NODES needs RSA_SOURCE")
    refused(
        command_attach(servers="h:1"),
        "RSA_SERVERS is only for RSA_PROVIDER=tmpfs or glusterfs",
    )
    # every attach says whose RAM disk the job is to be given, and how
    refused(
        environment("attach", root="/mnt", name="1.1", rank=0, provider="tmpfs"),
        "RSA_OWNER is not set",
    )
    refused(
        environment("attach", root="/mnt", name="1.1", rank=0, owner=5, nodes="a"),
        "RSA_PROVIDER is not set",
    )
    # a served RAM disk's login comes whole, or not at all (the site shows it)
    refused(
        environment(
            "attach",
            root="/mnt",
            name="1.1",
            rank=0,
            owner=5,
            provider="tmpfs",
            servers="h:1",
        ),
        "RSA_SERVERS needs RSA_USER",
    )
    assert (
        parse(
            environment(
                "attach", root="/mnt", name="1.1", rank=0, owner=5, provider="tmpfs"
            ),
            FLUX,
        )["PROVIDER"]
        == "tmpfs"
    )
