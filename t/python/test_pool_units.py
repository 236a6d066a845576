"""Pure parts of the pool: holder layouts and jobspecs, stage commands
(the memory graph, the wire's checks, ports and ended holders are in
test_pool_graph.py, test_pool_protocol.py, test_pool_ports.py and
test_pool_holder_end.py).  No Flux instance needed (only its Python
bindings for the value types)."""

import dataclasses
import os
import subprocess
import sys

import pytest
from test_pool_helpers import MiB

flux = pytest.importorskip(
    "flux",
    reason="no Flux (flux-core and flux-sched not installed): the pool tests need a real instance",
)

import flux_rsa  # noqa: E402
from flux_rsa.core.config import Policy  # noqa: E402
from flux_rsa.pool import jobspecs  # noqa: E402
from flux_rsa.privileged import caller, ops, variables  # noqa: E402
from flux_rsa.privileged.caller import Via  # noqa: E402
from flux_rsa.ramdisk import imagedisk  # noqa: E402
from flux_rsa.ramdisk.providers.base import Task  # noqa: E402
from flux_rsa.ramdisk.providers.glusterfs import volume_of  # noqa: E402

PY = Via("py")
IMP = Via("py", "imp", "/usr/libexec/flux/flux-imp")


def task(js):
    """(command, RSA_* variables) of a subjob's task."""
    d = js.jobspec if hasattr(js, "jobspec") else js
    env = d["attributes"]["system"]["environment"]
    return d["tasks"][0]["command"], {
        k: v for k, v in env.items() if k.startswith("RSA_")
    }


def parsed(js, owner=0):
    """The request the entry point reads from a subjob (it must accept it)."""
    return variables.parse(task(js)[1], owner)


POLICY = Policy(
    node_capacity=64 * MiB,
    granule=4 * MiB,
    pool_cores=8,
    ramdisk_root="/ram",
    provider="tmpfs",
)
SPAN = Policy(
    node_capacity=64 * MiB,
    granule=4 * MiB,
    pool_cores=8,
    ramdisk_root="/ram",
    provider="glusterfs",
    fs_host="{host}-ib",
    span_fill=0,  # no headroom (SPAN95: the site's span-fill)
)
# nodes big enough for the headroom of 2 x 64M (core.spread), as in t5000
SPAN95 = dataclasses.replace(SPAN, node_capacity=112 * MiB, span_fill=0.95)


@pytest.mark.parametrize(
    "need, layout",
    [
        (1, (1, 1)),  # at least one granule
        (40 * MiB, (1, 10)),
        (64 * MiB, (1, 16)),  # a whole node
        (64 * MiB + 1, (2, 9)),  # 17 granules over the fewest nodes
        (100 * MiB, (2, 13)),
        (128 * MiB, (2, 16)),
    ],
)
def test_holder_layout(need, layout):
    assert jobspecs.layout(need, SPAN, 2) == layout


@pytest.mark.parametrize(
    "need, layout",
    [
        (112 * MiB, (1, 28)),  # a whole node: no headroom
        (128 * MiB, (2, 26)),  # 2 x 64M reserved, 2 x (64M + 40M) charged
        (136 * MiB, (2, 27)),
    ],
)
def test_holder_layout_over_several_nodes_charges_the_headroom(need, layout):
    assert jobspecs.layout(need, SPAN95, 2) == layout
    assert jobspecs.layout(need, SPAN95, 4) == layout  # the fewest nodes


def test_holder_layout_with_headroom_refuses_what_nodes_cannot_hold():
    with pytest.raises(
        jobspecs.Unfit,
        match=r"2 node\(s\) x 117440512 bytes, less the headroom of a RAM disk over "
        r"several nodes \(at most 142606336 bytes",
    ):
        jobspecs.layout(140 * MiB, SPAN95, 2)
    assert jobspecs.layout(140 * MiB, SPAN95, 3) == (3, 23)


def test_holder_layout_refuses_more_than_the_pool():
    with pytest.raises(
        jobspecs.Unfit,
        match=r"need 138412032 bytes \(33 granules of 4194304\) "
        r"is more than the pool holds: 2 node\(s\) x 67108864 bytes",
    ):
        jobspecs.layout(132 * MiB, SPAN, 2)


def test_a_provider_that_cannot_span_never_gets_more_than_a_node():
    assert jobspecs.layout(64 * MiB, POLICY, 2) == (1, 16)
    with pytest.raises(
        jobspecs.Unfit,
        match="more than one RSA node holds .* provider tmpfs " "cannot span nodes",
    ):
        jobspecs.layout(64 * MiB + 1, POLICY, 2)


def test_holder_jobspec_asks_for_memory_with_a_core_per_slot():
    js = jobspecs.holder(
        Via("/usr/bin/python3"),
        SPAN,
        1234,
        2,
        100 * MiB,
        1001,
        2,
        {"A": "1", "RSA_INSTANCE_TMP": "/tmp/x"},
        port=24100,
        secret="S" * 32,
    )
    d = js.jobspec
    (node,) = d["resources"]
    assert (node["type"], node["count"]) == ("node", 2)
    (slot,) = node["with"]
    assert slot["type"] == "slot" and slot["count"] == 1
    assert {r["type"]: r["count"] for r in slot["with"]} == {"core": 1, "memory": 13}
    assert d["tasks"][0]["count"] == {"per_slot": 1}
    command, variables = task(js)
    assert command == ["/usr/bin/python3", "-m", "flux_rsa.privileged"]
    assert variables == {
        "RSA_OP": "hold",
        "RSA_ROOT": "/ram",
        "RSA_NAME": "1234.2",
        "RSA_SIZE": str(13 * 4 * MiB),
        "RSA_OWNER": "1001",
        "RSA_PROVIDER": "glusterfs",
        "RSA_JOBID": "1234",
        "RSA_GEN": "2",
        "RSA_PORT": "24100",
        "RSA_SECRET": "S" * 32,
        "RSA_FS_HOST": "{host}-ib",
    }
    # each task adds its rank and the job's nodes
    request = parsed(
        {
            **js.jobspec,
            "attributes": {
                "system": {
                    "environment": {
                        **variables,
                        "RSA_TASK_RANK": "1",
                        "RSA_NODES": "rsa0,rsa1",
                    }
                }
            },
        }
    )
    assert request.values["SIZE"] == 13 * 4 * MiB  # on each node
    volume = volume_of(
        Task(
            "/ram",
            "1234.2",
            1,
            1001,
            jobid=1234,
            gen=2,
            nodes=request["NODES"],
            port=request["PORT"],
            secret=request["SECRET"],
            fs_host=request["FS_HOST"],
        )
    )
    assert (
        volume.servers == ("rsa0-ib:24100", "rsa1-ib:24101")
        and volume.user == "rsa-1234-2"
    )
    system = d["attributes"]["system"]
    assert system["job"]["name"] == "rsa-hold-1234-2"
    assert system["shell"]["options"]["cpu-affinity"] == "off"
    assert system["shell"]["options"]["exit-on-error"] == 1
    # the agent's own RSA_* variables never reach the entry point
    assert system["environment"] == {"A": "1", **variables} and system["cwd"] == "/"
    assert "exec" not in system and "constraints" not in system


def test_a_one_node_reservation_is_a_plain_tmpfs_whatever_the_provider():
    _, variables = task(jobspecs.holder(PY, SPAN, 1234, 2, 64 * MiB, 1001, 2, {}))
    assert variables["RSA_PROVIDER"] == "tmpfs"
    assert not {"RSA_PORT", "RSA_SECRET", "RSA_FS_HOST"} & set(variables)


def test_through_the_imp_a_task_runs_flux_imp_run_rsa():
    js = jobspecs.holder(IMP, POLICY, 1234, 2, 8 * MiB, 1001, 2, {})
    command, variables = task(js)
    assert command == [
        "py",
        "-m",
        "flux_rsa.privileged",
        "--imp",
        "/usr/libexec/flux/flux-imp",
    ]
    assert variables["RSA_OP"] == "hold"


def test_through_the_imp_an_attach_starts_the_imp_itself():
    via = caller.choose("py", "imp", "/usr/libexec/flux/flux-imp", 1001)
    argv, variables = via.command("attach", root="/ram", name="1.1", rank=0)
    assert argv == ["/usr/libexec/flux/flux-imp", "run", "rsa"]
    assert variables["RSA_OP"] == "attach"


def test_an_attach_or_detach_starts_python_without_site_other_operations_with_it():
    via = caller.choose("py", "direct", "", 0)
    for op in ("attach", "detach"):
        argv, _ = via.command(op, root="/ram", name="1.1", rank=0)
        assert argv == ["py", "-S", "-m", "flux_rsa.privileged"]
    argv, _ = via.command("purge", root="/ram", path="/ram/1.1/in")
    assert argv == ["py", "-m", "flux_rsa.privileged"]


def test_the_attach_path_imports_nothing_beyond_the_standard_library():
    """What ``python3 -S`` runs for an attach or a detach must import
    without the site module's directories (a package from there would
    fail on every compute node)."""
    code = (
        "import sys; from flux_rsa.privileged import main, ops, variables, trust; "
        "from flux_rsa.ramdisk import image, imagedisk, store, sysmount; "
        "from flux_rsa.ramdisk.providers import tmpfs, glusterfs; "
        "print('site' in sys.modules)"
    )
    env = {"PYTHONPATH": os.path.dirname(os.path.dirname(flux_rsa.__file__))}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


COMMAND = Policy(
    node_capacity=64 * MiB,
    granule=4 * MiB,
    pool_cores=8,
    ramdisk_root="/ram",
    provider="command",
    command_create="/etc/rsa/create",
    command_destroy="/etc/rsa/destroy",
    command_attach="/etc/rsa/attach",
    command_detach="/etc/rsa/detach",
)


def test_provider_command_holders_run_the_site_scripts_even_on_one_node():
    via = caller.choose("py", "direct", "", 0, COMMAND.scripts)
    assert jobspecs.ports_needed(COMMAND, 1) == jobspecs.ports_needed(COMMAND, 2) == 8
    # a one-node RAM disk is a tmpfs, served to compute nodes on one port
    # unless the site shows RAM disks to them itself
    assert (jobspecs.ports_needed(SPAN, 1), jobspecs.ports_needed(SPAN, 2)) == (1, 2)
    site = dataclasses.replace(SPAN, attach="site")
    assert (jobspecs.ports_needed(site, 1), jobspecs.ports_needed(site, 2)) == (0, 2)
    _, asked = task(
        jobspecs.holder(via, COMMAND, 1234, 2, 8 * MiB, 1001, 2, {}, port=24108)
    )
    assert asked == {
        "RSA_OP": "hold",
        "RSA_ROOT": "/ram",
        "RSA_NAME": "1234.2",
        "RSA_SIZE": str(8 * MiB),
        "RSA_OWNER": "1001",
        "RSA_PROVIDER": "command",
        "RSA_JOBID": "1234",
        "RSA_GEN": "2",
        "RSA_PORT": "24108",
        "RSA_COMMAND_CREATE": "/etc/rsa/create",
        "RSA_COMMAND_DESTROY": "/etc/rsa/destroy",
    }
    # each task adds its rank and the job's nodes; a root pool's entry accepts the scripts
    env = {**asked, "RSA_TASK_RANK": "0", "RSA_NODES": "rsa0"}
    assert variables.parse(env, 0, trusted=True)["COMMAND_CREATE"] == "/etc/rsa/create"


def test_through_the_imp_no_script_travels_with_a_request():
    via = caller.choose("py", "imp", "/usr/libexec/flux/flux-imp", 990, COMMAND.scripts)
    for js in (
        jobspecs.holder(via, COMMAND, 1234, 2, 8 * MiB, 1001, 2, {}, port=24108),
        jobspecs.sweep(via, COMMAND, {}),
    ):
        _, variables = task(js)
        assert not [v for v in variables if v.startswith("RSA_COMMAND_")]
    direct = caller.choose("py", "direct", "", 0, COMMAND.scripts)
    _, variables = task(jobspecs.sweep(direct, COMMAND, {}))
    assert variables["RSA_COMMAND_DESTROY"] == "/etc/rsa/destroy"
    assert "RSA_COMMAND_CREATE" not in variables  # a sweep only destroys


def test_adopting_holder_runs_on_the_kept_disks_node_with_the_larger_size():
    js = jobspecs.holder(
        PY,
        POLICY,
        1234,
        3,
        10 * MiB,
        1001,
        2,
        {},
        adopt="/ram/1234.1",
        adopt_ranks=[1],
        adopt_bytes=24 * MiB,
    ).jobspec
    (node,) = js["resources"]
    assert node["count"] == 1
    assert {r["type"]: r["count"] for r in node["with"][0]["with"]} == {
        "core": 1,
        "memory": 6,
    }
    assert js["attributes"]["system"]["constraints"] == {"ranks": ["1"]}
    _, variables = task(js)
    assert variables["RSA_ADOPT"] == "/ram/1234.1"
    assert variables["RSA_SIZE"] == str(24 * MiB)
    assert parsed(js).values["ADOPT"] == "/ram/1234.1"
    # a bigger need grows it; more than a node holds is refused
    assert jobspecs.adopt_granules(40 * MiB, 24 * MiB, POLICY) == 10
    # over several nodes, the larger of the kept bricks and the share with
    # its headroom
    assert jobspecs.adopt_granules(128 * MiB, 208 * MiB, SPAN95, 2) == 26
    assert jobspecs.adopt_granules(128 * MiB, 128 * MiB, SPAN95, 2) == 26
    assert jobspecs.adopt_granules(128 * MiB, 216 * MiB, SPAN95, 2) == 27
    with pytest.raises(jobspecs.Unfit, match="more than a node holds"):
        jobspecs.adopt_granules(65 * MiB, 24 * MiB, POLICY)


def test_adopting_a_ram_disk_over_two_nodes_runs_on_both_with_its_shares():
    js = jobspecs.holder(
        PY,
        SPAN,
        1234,
        1,
        96 * MiB,
        1001,
        2,
        {},
        adopt="/ram/1234.1",
        adopt_ranks=[0, 1],
        adopt_bytes=96 * MiB,
        port=24300,
        secret="S" * 32,
    ).jobspec
    (node,) = js["resources"]
    assert node["count"] == 2
    assert {r["type"]: r["count"] for r in node["with"][0]["with"]} == {
        "core": 1,
        "memory": 12,
    }
    assert js["attributes"]["system"]["constraints"] == {"ranks": ["0,1"]}
    _, variables = task(js)
    assert (variables["RSA_PROVIDER"], variables["RSA_ADOPT"]) == (
        "glusterfs",
        "/ram/1234.1",
    )


def test_a_simulated_holder_is_a_test_execution_job_until_killed():
    sim = Policy(
        node_capacity=64 * MiB,
        granule=4 * MiB,
        pool_cores=8,
        ramdisk_root="/ram",
        simulate_rate=100 * MiB,
    )
    holder = jobspecs.holder(PY, sim, 1, 1, 8 * MiB, 1001, 2, {})
    assert holder.jobspec["attributes"]["system"]["exec"] == {
        "test": {}
    }  # until killed
    assert (
        "exit-on-error"
        not in holder.jobspec["attributes"]["system"]["shell"]["options"]
    )
    assert jobspecs.simulated(holder)
    assert not jobspecs.simulated(
        jobspecs.holder(PY, POLICY, 1, 1, 8 * MiB, 1001, 2, {})
    )
    assert not jobspecs.simulated(
        jobspecs.stage(PY, POLICY, stage_request("in", None), 0, {})
    )


def stage_request(direction, method, src="/p/in", dst="/ram/1.1/in"):
    return {
        "jobid": 7,
        "seq": 3,
        "direction": direction,
        "src": src,
        "dst": dst,
        "method": method,
        "userid": 1001,
        "verify": "size",
        "nodes": ["rsa7", "rsa3"],
    }


@pytest.mark.parametrize(
    "direction, method, src, dst, asked",
    [
        ("in", None, "/p/in", "/ram/1.1/in", ("copy", "/p/in", "/ram/1.1/in", None)),
        ("in", "tar", "/p/in", "/ram/1.1/in", ("untar", "/p/in", "/ram/1.1/in", None)),
        (
            "in",
            "/home/u/in.sh",
            "/p/in",
            "/ram/1.1/in",
            ("script", "/home/u/in.sh", "/ram/1.1/in", "/p/in"),
        ),
        (
            "out",
            None,
            "/ram/1.1/out",
            "/p/out",
            ("copy", "/ram/1.1/out", "/p/out", None),
        ),
        (
            "out",
            "tar",
            "/ram/1.1/out",
            "/p/out",
            ("tar", "/ram/1.1/out", "/p/out", None),
        ),
        (
            "out",
            "/home/u/out.sh",
            "/ram/1.1/out",
            "/p/out",
            ("script", "/home/u/out.sh", "/ram/1.1/out", "/p/out"),
        ),
    ],
)
def test_stage_maps_method_to_the_stagers_request(
    direction, method, src, dst, asked, monkeypatch
):
    """The subjob's RSA_* variables become the stager's typed request: a
    script gets the RAM-disk directory first, the data directory second,
    its direction, and the job's environment."""
    monkeypatch.setattr(ops, "_script_env", lambda r, ramdisk: {"FROM": ramdisk})
    js = jobspecs.stage(
        PY, POLICY, stage_request(direction, method, src, dst), 1, {}, workers=4
    )
    got = ops.stage_request(parsed(js), "/ram/1.1")
    assert (got.mode, got.src, got.dst, got.data) == asked
    assert (got.verify, got.workers, got.replica, got.as_user) == (
        "size",
        4,
        None,
        None,
    )
    script = asked[0] == "script"
    assert got.direction == (direction if script else None)
    assert got.script_env == ({"FROM": "/ram/1.1"} if script else None)
    assert parsed(js).values["OWNER"] == 1001


def test_stage_jobspec_runs_on_the_given_rank():
    js = jobspecs.stage(PY, POLICY, stage_request("in", None), 1, {})
    system = js.jobspec["attributes"]["system"]
    assert system["constraints"] == {"ranks": ["1"]}
    assert system["job"]["name"] == "rsa-stage-7-3"
    assert "RSA_WORKERS" not in task(js)[1]  # 0: the stager decides
    (node,) = js.jobspec["resources"]
    assert node["count"] == 1 and node["with"][0]["with"] == [
        {"type": "core", "count": 1}
    ]


def test_sweep_jobspec_on_every_node_or_one_rank():
    every = jobspecs.sweep(PY, POLICY, {}, nodes=2).jobspec
    assert every["resources"][0]["count"] == 2
    assert "constraints" not in every["attributes"]["system"]
    assert task(every)[1] == {"RSA_OP": "sweep", "RSA_ROOT": "/ram"}
    one = jobspecs.sweep(PY, POLICY, {}, ranks={1}).jobspec
    assert one["attributes"]["system"]["constraints"] == {"ranks": ["1"]}
    some = jobspecs.sweep(PY, POLICY, {}, ranks={3, 0}).jobspec
    assert some["resources"][0]["count"] == 2
    assert some["attributes"]["system"]["constraints"] == {"ranks": ["0,3"]}


def test_measure_and_discard_jobspecs():
    m = jobspecs.measure(
        PY, {"jobid": 5, "seq": 2, "path": "/p/in", "userid": 1001}, {}
    )
    assert task(m)[1] == {"RSA_OP": "measure", "RSA_PATH": "/p/in", "RSA_OWNER": "1001"}
    assert m.jobspec["attributes"]["system"]["job"]["name"] == "rsa-measure-5-2"
    assert "constraints" not in m.jobspec["attributes"]["system"]  # any pool node
    d = jobspecs.discard(PY, POLICY, "/ram/5.1", [1], {}).jobspec
    assert task(d)[1] == {
        "RSA_OP": "discard",
        "RSA_ROOT": "/ram",
        "RSA_PATH": "/ram/5.1",
    }
    assert d["attributes"]["system"]["constraints"] == {"ranks": ["1"]}
    sweep = jobspecs.sweep(PY, POLICY, {}, nodes=2, report_kept=True).jobspec
    assert parsed(sweep).values["REPORT_KEPT"] is True


def test_purge_jobspec():
    js = jobspecs.purge(
        PY, POLICY, {"jobid": 1, "path": "/ram/1.1/in", "data_in": "/p/in"}, 0, {}
    )
    assert task(js)[1] == {
        "RSA_OP": "purge",
        "RSA_ROOT": "/ram",
        "RSA_PATH": "/ram/1.1/in",
        "RSA_LINK": "/p/in",
    }
    js = jobspecs.purge(
        PY, POLICY, {"jobid": 1, "path": "/ram/1.1/in", "data_in": None}, 0, {}
    )
    assert "RSA_LINK" not in task(js)[1]


def test_a_one_node_holder_tells_its_image_what_a_compute_node_keeps_unwritten():
    """[rsa] image-writeback reaches the holder (and, in its volume, the
    attach); a RAM disk over several nodes, which is no image, gets none."""
    policy = dataclasses.replace(SPAN, image_writeback=24 * MiB)
    assert policy.images
    _, one = task(jobspecs.holder(PY, policy, 1234, 2, 64 * MiB, 1001, 1, {}, images=1))
    assert one["RSA_WRITEBACK"] == str(24 * MiB)
    assert variables.parse(one, 0, trusted=True)["WRITEBACK"] == 24 * MiB
    _, two = task(jobspecs.holder(PY, policy, 1234, 2, 2 * 64 * MiB, 1001, 2, {}))
    assert "RSA_WRITEBACK" not in two


def test_an_attach_keeps_the_site_bound_or_the_kernels_own():
    assert imagedisk.writeback_limit({}) == imagedisk.DIRTY_LIMIT
    assert imagedisk.writeback_limit({"WRITEBACK": 24 * MiB}) == 24 * MiB
    assert imagedisk.writeback_limit({"WRITEBACK": 0}) is None
