"""What the privileged entry point trusts before root runs a site script:
an absolute path of a regular, executable file only root can change, in
directories only root can change; through flux-imp taken from the site's
root-owned [rsa] table, from the request only for a trusted caller."""

import os
import shutil
import tempfile

import pytest

from flux_rsa.privileged import trust
from flux_rsa.privileged.variables import Refused, environment, parse

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root-owned files need root")


@pytest.fixture
def top():
    d = tempfile.mkdtemp(prefix="rsa-trust-")
    yield d
    shutil.rmtree(d)


def script(top, name="create", mode=0o755, uid=0):
    path = os.path.join(top, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(path, mode)
    os.chown(path, uid, 0)
    return path


def refused(path, match):
    with pytest.raises(Refused, match=match) as info:
        trust.secure_file(path, "[rsa] command-create")
    assert "\n" not in str(info.value)


def test_a_root_owned_script_only_root_can_change_is_trusted(top):
    trust.secure_file(script(top), "[rsa] command-create")


def test_anything_else_is_refused_naming_the_file_and_the_fix(top):
    refused("create.sh", r"\[rsa\] command-create = 'create.sh': not an absolute path")
    refused(os.path.join(top, "missing"), "missing: No such file or directory")
    refused(
        script(top, "group-writable", 0o775),
        r"mode 0775: .*\(chown root and chmod go-w it\)",
    )
    refused(script(top, "users", uid=65534), "is owned by uid 65534 with mode 0755")
    refused(script(top, "plain", 0o644), r"is not executable \(chmod u\+x it\)")
    os.symlink(script(top), os.path.join(top, "link"))
    refused(
        os.path.join(top, "link"),
        r"link is a symbolic link \(root runs only regular files",
    )
    os.mkdir(os.path.join(top, "open"), 0o755)
    os.chmod(os.path.join(top, "open"), 0o777)
    refused(
        script(os.path.join(top, "open")),
        r"its directory .*/open is owned by uid 0 with mode 0777",
    )


def test_through_the_imp_the_scripts_are_the_site_tables_whatever_the_request(top):
    conf = os.path.join(top, "conf")
    os.mkdir(conf, 0o755)
    site = script(top, "site-detach")
    with open(os.path.join(conf, "rsa.toml"), "w") as f:
        f.write(
            f'[rsa]\nprovider = "command"\ncommand-detach = "{site}"\n'
            f'command-create = "{script(top)}"\n'
        )
    req = parse(environment("detach", root="/mnt", name="1.1", rank=0), 990)
    assert trust.scripts(req, conf) == {
        "detach": site
    }  # only the steps of its operation
    req = parse(environment("sweep", root="/r"), 990)
    assert trust.scripts(req, conf) == {}  # no destroy script configured
    trusted = parse(
        environment(
            "detach",
            root="/mnt",
            name="1.1",
            rank=0,
            command_detach=script(top, "mine"),
        ),
        0,
        trusted=True,
    )
    assert trust.scripts(trusted) == {"detach": os.path.join(top, "mine")}


def test_a_site_table_anyone_but_root_can_change_is_refused(top):
    conf = os.path.join(top, "conf")
    os.mkdir(conf, 0o755)
    path = os.path.join(conf, "rsa.toml")
    with open(path, "w") as f:
        f.write('[rsa]\nramdisk-root = "/r"\n')
    os.chmod(path, 0o644)
    assert trust.site_table(conf) == {"ramdisk-root": "/r"}
    os.chmod(path, 0o1664)  # the sticky bit makes a directory safe, never a file
    with pytest.raises(
        Refused,
        match=r"rsa.toml is not a regular file that only root can "
        r"change \(chown root and chmod go-w it\)",
    ):
        trust.site_table(conf)


def test_an_installed_package_may_lie_behind_a_link_root_made(top):
    real = os.path.join(top, "site-packages", "flux")
    os.makedirs(real, 0o755)
    os.symlink(os.path.join(top, "site-packages"), os.path.join(top, "python3"))
    trust.secure_installed(
        os.path.join(top, "python3", "flux"), "flux-core's Python package"
    )
    os.lchown(os.path.join(top, "python3"), 65534, 65534)
    with pytest.raises(
        Refused,
        match=r"python3 is a symbolic link owned by uid 65534: root "
        "follows only links root made",
    ):
        trust.secure_installed(
            os.path.join(top, "python3", "flux"), "flux-core's Python package"
        )
    os.chmod(real, 0o777)
    with pytest.raises(
        Refused, match=r"site-packages/flux is owned by uid 0 with mode 0777"
    ):
        trust.secure_installed(real, "flux-core's Python package")


def test_a_stage_works_only_on_areas_its_owner_owns(top):
    ramdisk = os.path.join(top, "12.1")
    for area, uid in (("in", 1001), ("out", 990)):
        os.makedirs(os.path.join(ramdisk, area))
        os.chown(os.path.join(ramdisk, area), uid, uid)

    def stage(direction, **more):
        values = dict(
            root=top,
            direction=direction,
            mode="copy",
            owner=1001,
            src="/home/a/in" if direction == "in" else f"{ramdisk}/out",
            dst=f"{ramdisk}/in" if direction == "in" else "/home/a/out",
            **more,
        )
        return parse(environment("stage", **values), 990)

    trust.owner_areas(stage("in"))
    # the out area here was filled by uid 990 (the instance owner), not the user
    with pytest.raises(
        Refused,
        match=r"RSA_SRC='.*/12.1/out' is a directory owned by uid 990, "
        "not by RSA_OWNER=1001: a stage works only on the areas of a RAM disk",
    ):
        trust.owner_areas(stage("out"))
    other = os.path.join(top, "13.1", "in")  # another RAM disk, filled by uid 990
    os.makedirs(other)
    os.chown(other, 990, 990)
    with pytest.raises(
        Refused, match=r"RSA_REPLICA='.*/13.1/in' is a directory owned by uid 990"
    ):
        trust.owner_areas(stage("in", replica=other))
    trust.owner_areas(
        parse(environment("sweep", root=top), 990)
    )  # not a stage: nothing to check
