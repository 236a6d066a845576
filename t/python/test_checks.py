"""Submit-time checks of rsa attributes against the file system."""

import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile

import pytest

from flux_rsa.checks import check_request

ROOT = os.geteuid() == 0
USER = "rsa-check-test"


@pytest.fixture(scope="module")
def user():
    if not ROOT:
        pytest.skip("needs root to create a test user")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
        )
    return pwd.getpwnam(USER)


@pytest.fixture
def tree():
    # not pytest's tmp_path: its parents are private to root
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="rsa-checks.", dir="/tmp"))
    yield _populate(tmp_path)
    shutil.rmtree(tmp_path)


def _populate(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    script = tmp_path / "stage.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    tmp_path.chmod(0o755)
    return tmp_path


def test_a_good_request_passes(tree):
    attrs = {
        "data_in": str(tree / "in"),
        "data_out": str(tree / "out"),
        "stage_out": str(tree / "stage.sh"),
    }
    assert check_request(attrs, os.geteuid()) is None


def test_no_rsa_attributes_is_fine():
    assert check_request({}, 0) is None


@pytest.mark.parametrize(
    "attrs, message",
    [
        (
            {"data_in": "{t}/missing"},
            "rsa.data_in: {t}/missing: No such directory (must be an existing directory you can read)",
        ),
        ({"data_in": "{t}/stage.sh"}, "rsa.data_in: {t}/stage.sh: Not a directory"),
        (
            {"data_out": "{t}/missing"},
            "rsa.data_out: {t}/missing: No such directory (must be an existing directory you can write)",
        ),
        (
            {"data_in": "{t}/in", "stage_in": "{t}/in"},
            "rsa.stage_in: {t}/in: Not a regular file",
        ),
        (
            {"data_in": "{t}/in", "stage_in": "{t}/nope.sh"},
            "rsa.stage_in: {t}/nope.sh: No such file",
        ),
    ],
)
def test_bad_paths_name_the_key_and_the_fix(tree, attrs, message):
    attrs = {k: v.format(t=tree) for k, v in attrs.items()}
    assert check_request(attrs, os.geteuid()).startswith(message.format(t=tree))


def test_a_script_that_is_not_executable_is_refused(tree):
    (tree / "stage.sh").chmod(0o644)
    why = check_request(
        {"data_in": str(tree / "in"), "stage_in": str(tree / "stage.sh")}, os.geteuid()
    )
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert (
        why
        == f"rsa.stage_in: {tree}/stage.sh: Permission denied (user {me} cannot execute it) (must be an executable script you can read)"
    )


def test_data_out_reached_through_a_link_into_data_in_is_refused(tree):
    (tree / "in" / "sub").mkdir()
    (tree / "link").symlink_to(tree / "in" / "sub")
    why = check_request(
        {"data_in": str(tree / "in"), "data_out": str(tree / "link")}, os.geteuid()
    )
    assert "is inside rsa.data_in" in why and "once links are followed" in why


def test_permissions_are_judged_as_the_submitting_user(tree, user):
    (tree / "in").chmod(0o700)  # root's
    (tree / "out").chmod(0o755)
    why = check_request({"data_in": str(tree / "in")}, user.pw_uid)
    assert (
        why
        == f"rsa.data_in: {tree}/in: Permission denied (user {USER} cannot read it) (must be an existing directory you can read)"
    )
    why = check_request(
        {"data_in": str(tree / "out"), "data_out": str(tree / "out")}, user.pw_uid
    )
    assert "rsa.data_out" in why or "inside" in why
    os.chown(tree / "out", user.pw_uid, user.pw_gid)
    (tree / "in").chmod(0o755)
    assert (
        check_request(
            {"data_in": str(tree / "in"), "data_out": str(tree / "out")}, user.pw_uid
        )
        is None
    )


def test_a_parent_the_user_cannot_enter_is_named(tree, user):
    (tree / "in" / "deep").mkdir()
    (tree / "in").chmod(0o700)
    why = check_request({"data_in": str(tree / "in" / "deep")}, user.pw_uid)
    assert why.startswith(
        f"rsa.data_in: {tree}/in: Permission denied (user {USER} cannot enter it)"
    )


def test_a_link_into_a_closed_directory_tells_nothing_of_what_is_behind_it(tree, user):
    """The validator runs as the instance owner but must answer as the
    user: whether the target exists or not, the answer is the same."""
    (tree / "closed" / "there").mkdir(parents=True)
    (tree / "closed").chmod(0o700)
    (tree / "to-there").symlink_to(tree / "closed" / "there")
    (tree / "to-nothing").symlink_to(tree / "closed" / "nothing")
    there = check_request({"data_in": str(tree / "to-there")}, user.pw_uid)
    nothing = check_request({"data_in": str(tree / "to-nothing")}, user.pw_uid)
    assert (
        there
        == nothing
        == (
            f"rsa.data_in: {tree}/closed: Permission denied (user {USER} cannot enter it) "
            "(must be an existing directory you can read)"
        )
    )
