"""Who sees and acts on a job's record (service.records): its owner and the
instance owner; others are told there is no record; a RAM disk's secret
is never shown."""

import errno

import pytest
import test_pool_helpers  # noqa: F401  (puts Flux's Python bindings on the path)

access = pytest.importorskip(
    "flux_rsa.service.records",
    reason="Flux's Python bindings are missing: no service tests",
)

import flux_rsa.core.events as E  # noqa: E402
from flux_rsa.core import Policy, admit, parse_request  # noqa: E402

POLICY = Policy.from_config({"proportion": 1, "node-capacity": "64M", "granule": "4M"})


def record(jobid, userid):
    return admit(jobid, userid, 1, parse_request({"data_out": "/out"}), POLICY, 0.0)


RECORDS = {1: record(1, 1000), 2: record(2, 2000)}


def test_a_user_sees_their_own_records_the_owner_sees_all():
    assert [r["jobid"] for r in access.status(RECORDS, [], 1000, False)] == [1]
    assert [r["jobid"] for r in access.status(RECORDS, [1, 2, 3], 2000, False)] == [2]
    assert sorted(r["jobid"] for r in access.status(RECORDS, [], 5, True)) == [1, 2]


def test_a_volume_secret_is_not_shown():
    import dataclasses

    rec = dataclasses.replace(RECORDS[1], volume={"name": "v", "secret": "s3cret"})
    assert access.shown(rec)["volume"] == {"name": "v"}


def test_acting_on_another_users_job_is_as_if_it_had_no_record():
    with pytest.raises(OSError) as exc:
        access.check_request(RECORDS[2], 2, E.Release(1.0), 1000, False)
    assert (
        exc.value.errno == errno.ENOENT
        and "no RSA record for this job (or not yours)" in str(exc.value)
    )
    with pytest.raises(OSError) as exc:
        access.check_request(None, 9, E.Release(1.0), 1000, True)
    assert exc.value.errno == errno.ENOENT


def test_a_request_the_record_does_not_accept_is_invalid():
    with pytest.raises(OSError) as exc:
        access.check_request(RECORDS[1], 1, E.Retry(1.0), 1000, False)
    assert exc.value.errno == errno.EINVAL and "not possible in" in str(exc.value)
