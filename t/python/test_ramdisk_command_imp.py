"""Provider command through flux-imp (``rsa-imp-run``): the site's scripts
come from the site's [rsa] table alone, never from the caller's request
(test_ramdisk_command.py has the site and its helpers)."""

import os
import subprocess

import test_ramdisk_command
from test_ramdisk_command import PY, PYPATH, attach_vars, leftovers, ramdisk_with_a_file

#: the fixture (a site with its scripts), from the main file
site = test_ramdisk_command.site

# --- through flux-imp: the site's scripts, never the caller's ------------------


def imp_run(site, variables):
    """The installed entry point's main (``rsa-imp-run``) as root, the way
    flux-imp starts it: only RSA_* variables and FLUX_OWNER_USERID."""
    env = {"FLUX_OWNER_USERID": "990", **{k: str(v) for k, v in variables.items()}}
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from flux_rsa.privileged.main import imp_main; sys.exit(imp_main(sys.argv[2]))"
    )
    return subprocess.run(
        [PY, "-I", "-c", code, PYPATH, site.conf],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def site_config(site, **keys):
    table = {
        "ramdisk-root": site.root,
        "mount-root": site.mnt,
        "provider": "command",
        "command-create": site.path("create"),
        "command-destroy": site.path("destroy"),
        "command-attach": site.path("attach"),
        "command-detach": site.path("detach"),
        **keys,
    }
    with open(os.path.join(site.conf, "rsa.toml"), "w") as f:
        f.write("[rsa]\n" + "".join(f'{k} = "{v}"\n' for k, v in table.items()))


def test_through_the_imp_the_scripts_come_from_the_site_table(site):
    ramdisk_with_a_file(site)
    site_config(site)
    done = imp_run(site, attach_vars(site, "attach", 3))
    assert done.returncode == 0, done.stderr
    assert site.recorded("attach", 3)["RSA_PATH"] == os.path.join(site.mnt, "12.1")
    done = imp_run(site, attach_vars(site, "detach", 3))
    assert done.returncode == 0, done.stderr
    assert site.recorded("detach", 3) is not None and leftovers(site) == ["12.1"]


def test_through_the_imp_a_request_naming_a_script_is_refused(site):
    ramdisk_with_a_file(site)
    site_config(site)
    evil = site.script("evil", "touch $LOG/evil\n")
    done = imp_run(site, {**attach_vars(site, "attach", 3), "RSA_COMMAND_ATTACH": evil})
    assert done.returncode == 2
    assert (
        "RSA_COMMAND_ATTACH: the site's scripts are read from the [rsa] table"
        in done.stderr
    )
    assert not os.path.exists(os.path.join(site.log, "evil"))
    assert site.recorded("attach", 3) is None


def test_through_the_imp_attach_only_mounts_ram_disks_of_the_site(site):
    site_config(site)
    done = imp_run(site, attach_vars(site, "attach", 3, source="/etc/12.1"))
    assert done.returncode == 2
    assert (
        f"RSA_SOURCE='/etc/12.1': not a RAM disk under the site's RAM-disk root "
        f"'{site.root}'"
    ) in done.stderr
    assert site.recorded("attach", 3) is None


def test_through_the_imp_a_site_script_others_can_change_is_refused(site):
    ramdisk_with_a_file(site)
    site_config(site)
    os.chmod(site.bin, 0o777)
    done = imp_run(site, attach_vars(site, "attach", 3))
    assert done.returncode == 2
    assert f"[rsa] command-attach {site.path('attach')}: its directory" in done.stderr
    assert "only root can change (chown root and chmod go-w it)" in done.stderr
    assert site.recorded("attach", 3) is None


def test_the_pools_start_up_check_names_a_site_script_root_would_not_run(site):
    from flux_rsa.privileged import caller

    site_config(site)
    assert imp_run(site, {"RSA_OP": "check"}).returncode == 0
    os.chmod(site.path("destroy"), 0o757)
    done = imp_run(site, {"RSA_OP": "check"})
    assert done.returncode == 2
    assert (
        f"[rsa] command-destroy {site.path('destroy')} is owned by uid 0 with mode 0757"
        in done.stderr
    )
    # a pool run by root checks the scripts of its own policy the same way
    direct = caller.choose(PY, "direct", "", 0, {"destroy": site.path("destroy")})
    said = caller.problem(direct, site.conf, "root")
    assert said.startswith(
        f"[rsa] command-destroy {site.path('destroy')} is owned by uid 0 "
        "with mode 0757: root runs only scripts that only root can change"
    )
    os.chmod(site.path("destroy"), 0o755)
    assert caller.problem(direct, site.conf, "root") is None
