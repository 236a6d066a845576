"""Through the IMP, a stage or a measure acts as a job's owner only as the
owner's signed job request (J) asks: signed by RSA_OWNER, naming the
request's data directory and stage method.  check() is pure; unwrap() is
checked with flux-security itself (mechanism none, in this process)."""

import json
import os

import pytest

from flux_rsa.privileged import signed
from flux_rsa.privileged.variables import Refused, environment, parse

ROOT = "/var/lib/flux-rsa"
ALICE, BOB = 1001, 1002
RAMDISK = f"{ROOT}/12.1"


def jobspec(**rsa):
    return json.dumps({"version": 1, "attributes": {"system": {"rsa": rsa}}}).encode()


ASKED = jobspec(data_in="/home/alice/in", data_out="/home/alice/out")


def stage(direction="in", **changes):
    values = dict(
        root=ROOT,
        direction=direction,
        mode="copy",
        owner=ALICE,
        src="/home/alice/in" if direction == "in" else f"{RAMDISK}/out",
        dst=f"{RAMDISK}/in" if direction == "in" else "/home/alice/out",
    )
    values.update(changes)
    return parse(environment("stage", **values), 990)


def measure(path="/home/alice/in", owner=ALICE):
    return parse(environment("measure", path=path, owner=owner), 990)


def refused(request, payload, signer, match):
    with pytest.raises(Refused, match=match) as info:
        signed.check(request, payload, signer)
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize(
    "request_",
    [
        stage("in"),
        stage("out"),
        measure(),
        stage("in", mode="untar", src="/home/alice/in"),
    ],
    ids=["stage-in", "stage-out", "measure", "untar"],
)
def test_what_the_owner_signed_is_done(request_):
    payload = (
        ASKED
        if request_.get("MODE") != "untar"
        else jobspec(data_in="/home/alice/in", stage_in="tar")
    )
    signed.check(request_, payload, ALICE)  # no Refused


def test_paths_are_compared_as_the_service_reads_them():
    # the user wrote a trailing slash and a "."; the service normalised it
    signed.check(stage("in"), jobspec(data_in="/home/alice/./in/"), ALICE)


def test_another_users_signature_is_refused():
    text = refused(
        stage("in"), ASKED, BOB, "RSA_J is signed by uid 1002, not by RSA_OWNER=1001"
    )
    assert "needs a job request that user signed" in text


@pytest.mark.parametrize(
    "request_, match",
    [
        (
            stage("in", src="/home/alice"),
            r"RSA_SRC='/home/alice': not the rsa.data_in '/home/alice/in'",
        ),
        (
            stage("out", dst="/home/alice/.ssh"),
            r"RSA_DST='/home/alice/.ssh': not the rsa.data_out ",
        ),
        (
            measure("/home/alice/private"),
            r"RSA_PATH='/home/alice/private': not the rsa.data_in",
        ),
        # data_out is not data_in: the directions do not stand for one another
        (
            stage("in", src="/home/alice/out"),
            "RSA_SRC='/home/alice/out': not the rsa.data_in",
        ),
    ],
)
def test_a_path_the_owner_did_not_sign_is_refused(request_, match):
    refused(request_, ASKED, ALICE, match)


def test_a_job_without_that_directory_is_refused():
    refused(
        stage("out"),
        jobspec(data_in="/home/alice/in"),
        ALICE,
        "uid 1001's job sets no rsa.data_out: nothing of theirs to stage",
    )
    refused(
        measure(),
        jobspec(capacity="1G"),
        ALICE,
        "sets no rsa.data_in: nothing of theirs to measure",
    )


@pytest.mark.parametrize(
    "request_, payload, match",
    [
        # a script the user did not name, run as them
        (
            stage("in", mode="script", script="/tmp/evil.sh"),
            jobspec(data_in="/home/alice/in"),
            r"RSA_MODE=script RSA_SCRIPT='/tmp/evil.sh': not the rsa.stage_in 'copy'",
        ),
        (
            stage("out", mode="script", script="/tmp/evil.sh"),
            jobspec(data_out="/home/alice/out", stage_out="/home/alice/pack.sh"),
            r"not the rsa.stage_out '/home/alice/pack.sh'",
        ),
        # a plain copy where the user asked for their script
        (
            stage("out"),
            jobspec(data_out="/home/alice/out", stage_out="/home/alice/pack.sh"),
            "RSA_MODE=copy: not the rsa.stage_out '/home/alice/pack.sh'",
        ),
        (stage("out", mode="tar"), ASKED, "RSA_MODE=tar: not the rsa.stage_out 'copy'"),
    ],
)
def test_a_method_the_owner_did_not_sign_is_refused(request_, payload, match):
    refused(request_, payload, ALICE, match)


def test_the_users_script_is_run_when_signed():
    signed.check(
        stage("out", mode="script", script="/home/alice/pack.sh"),
        jobspec(data_out="/home/alice/out", stage_out="/home/alice/pack.sh"),
        ALICE,
    )


@pytest.mark.parametrize(
    "payload, match",
    [
        (b"not json", "RSA_J does not hold a jobspec"),
        (b"[1, 2]", "RSA_J does not hold a jobspec"),
        (
            jobspec(data_in="/a/../etc"),
            r"RSA_J: its job request is not one the service takes: rsa.data_in",
        ),
    ],
)
def test_a_payload_that_is_no_rsa_jobspec_is_refused(payload, match):
    refused(stage("in"), payload, ALICE, match)


def test_without_j_a_stage_or_measure_is_refused_and_other_operations_pass():
    for r in (stage("in"), measure()):
        with pytest.raises(
            Refused, match=r"RSA_J is not set: RSA_OP=\w+ acts as uid 1001 only"
        ):
            signed.verify(r, unwrap=lambda j: pytest.fail("nothing to unwrap"))
    sweep = parse(environment("sweep", root=ROOT), 990)
    signed.verify(sweep, unwrap=lambda j: pytest.fail("a sweep needs no J"))


def test_verify_checks_what_unwrap_returns():
    r = parse(
        environment("measure", path="/home/alice/in", owner=ALICE, j="x.y.none"), 990
    )
    signed.verify(r, unwrap=lambda j: (ASKED, ALICE))
    with pytest.raises(Refused, match="signed by uid 1002"):
        signed.verify(r, unwrap=lambda j: (ASKED, BOB))


@pytest.mark.parametrize("value", ["", "a b", "é" * 3, "x" * (128 * 1024 + 1)])
def test_a_j_that_cannot_be_one_is_refused_without_showing_it(value):
    with pytest.raises(Refused, match="RSA_J: not a signed job request") as info:
        parse({**environment("measure", path="/p", owner=ALICE), "RSA_J": value}, 990)
    assert len(str(info.value)) < 200


# --- flux-security itself ---------------------------------------------------


@pytest.fixture
def none_config(tmp_path):
    pytest.importorskip(
        "flux.security",
        reason="flux-security's Python bindings are missing: " "no signature tests",
    )
    conf = tmp_path / "sign.toml"
    conf.write_text(
        '[sign]\nmax-ttl = 3600\ndefault-type = "none"\nallowed-types = ["none"]\n'
    )
    return str(tmp_path / "*.toml")


def test_a_signed_request_unwraps_to_its_jobspec_and_signer(none_config):
    from flux.security import SecurityContext

    j = bytes(SecurityContext(none_config).sign_wrap(ASKED, b"none")).decode()
    assert signed.unwrap(j, none_config) == (ASKED, os.getuid())


def test_a_request_signed_for_someone_else_or_altered_is_refused(none_config):
    from flux.security import SecurityContext

    context = SecurityContext(none_config)
    other = bytes(context.sign_wrap_as(os.getuid() + 1, ASKED, b"none")).decode()
    with pytest.raises(Refused, match="RSA_J: not a valid signature: .*userid"):
        signed.unwrap(other, none_config)
    header, _, mech = bytes(context.sign_wrap(ASKED, b"none")).decode().split(".")
    with pytest.raises(Refused, match="RSA_J: not a valid signature"):
        signed.unwrap(f"{header}.!!.{mech}", none_config)


def test_a_missing_configuration_is_named(none_config, tmp_path):
    with pytest.raises(
        Refused, match="cannot check RSA_J: flux-security's configuration"
    ):
        signed.unwrap("a.b.none", str(tmp_path / "nothing" / "*.toml"))


def test_a_stage_scripts_environment_is_the_one_j_carries(none_config):
    """The job's environment as submitted (Flux keeps it in J alone), for
    its stage scripts; anything that is not one: none."""
    from flux.security import SecurityContext

    spec = json.dumps(
        {
            "version": 1,
            "attributes": {
                "system": {"environment": {"WAIT_FOR": "/p/x", "N": 5}, "rsa": {}}
            },
        }
    ).encode()
    j = bytes(SecurityContext(none_config).sign_wrap(spec, b"none")).decode()
    assert signed.environment(j) == {"WAIT_FOR": "/p/x"}  # a value must be a string
    header, _, mech = j.split(".")
    for bad in (None, "", "a.b", f"{header}.!!.{mech}", f"{header}.e30=.{mech}"):
        assert signed.environment(bad) == {}
