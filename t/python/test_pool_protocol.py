"""The pool's wire: requests checked and named when wrong, their defaults,
notifications' payloads."""

import pytest

flux = pytest.importorskip(
    "flux",
    reason="no Flux (flux-core and flux-sched not installed): the pool tests need a real instance",
)

from test_pool_units import stage_request  # noqa: E402

from flux_rsa.pool import protocol  # noqa: E402


@pytest.mark.parametrize(
    "method, payload, message",
    [
        (
            "hold",
            {"jobid": 1, "gen": 1, "userid": 5},
            "rsa-pool.hold: missing field 'need'",
        ),
        (
            "hold",
            {"jobid": 1, "gen": "1", "need": 4, "userid": 5},
            "rsa-pool.hold: gen='1' must be int",
        ),
        (
            "hold",
            {"jobid": 1, "gen": 1, "need": 0, "userid": 5},
            "need=0 must be more than 0 bytes",
        ),
        (
            "cancel",
            {"jobid": True, "gen": 1},
            "rsa-pool.cancel: jobid=True must be int",
        ),
        (
            "stage",
            dict(stage_request("sideways", None)),
            "direction='sideways' must be",
        ),
        ("stage", dict(stage_request("in", 5)), "method=5 must be str or NoneType"),
        ("stage", dict(stage_request("in", None), nodes=[]), "nodes is empty"),
        (
            "purge",
            {"jobid": 1, "path": "/ram/in", "userid": 5, "nodes": ["a"]},
            "missing field 'data_in'",
        ),
        ("frobnicate", {}, "rsa-pool.frobnicate: unknown method"),
        ("hold", [1, 2], "payload must be a JSON object"),
        (
            "hold",
            {"jobid": 1, "gen": 1, "need": 4, "userid": 5, "adopt": 7},
            "adopt=7 must be str or NoneType",
        ),
        (
            "hold",
            {"jobid": 1, "gen": 1, "need": 4, "userid": 5, "adopt": "ram/1.1"},
            "adopt='ram/1.1' must be an absolute path",
        ),
        (
            "stage",
            dict(stage_request("in", None), size=-1),
            "size=-1 must be 0 or more bytes",
        ),
        ("shutdown", {"keep": [{"jobid": 1}]}, "keep entry {'jobid': 1} must be"),
        (
            "shutdown",
            {"keep": {"jobid": 1, "gen": 1}},
            "keep={'jobid': 1, 'gen': 1} must be list",
        ),
        ("drain", {"reason": "x"}, "rsa-pool.drain: missing field 'host'"),
        ("undrain", {"host": 5}, "rsa-pool.undrain: host=5 must be str"),
        ("discard", {"path": "1.1"}, "path='1.1' must be an absolute path"),
        (
            "measure",
            {"jobid": 1, "seq": 1, "path": "/p", "userid": "root"},
            "userid='root' must be int",
        ),
    ],
)
def test_bad_requests_are_named(method, payload, message):
    with pytest.raises(
        protocol.BadRequest, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        protocol.check(method, payload)


def test_good_requests_pass():
    assert protocol.check("list", None) == {}
    assert (
        protocol.check(
            "purge",
            {
                "jobid": 1,
                "path": "/r/in",
                "data_in": None,
                "userid": 0,
                "nodes": ["rsa0"],
            },
        )["data_in"]
        is None
    )


def test_optional_fields_get_their_defaults():
    assert protocol.check("stage", stage_request("in", None))["size"] == 0
    assert (
        protocol.check("hold", {"jobid": 1, "gen": 1, "need": 4, "userid": 5})["adopt"]
        is None
    )
    assert protocol.check("shutdown", {}) == {"keep": []}
    assert (
        protocol.check("shutdown", None)["keep"]
        is not protocol.FIELDS["shutdown"]["keep"].default
    )
    assert protocol.check("drain", {"host": "rsa0"}) == {"host": "rsa0", "reason": ""}
    keep = protocol.check("shutdown", {"keep": [{"jobid": 3, "gen": 2, "x": 1}]})[
        "keep"
    ]
    assert keep == [{"jobid": 3, "gen": 2}]


def test_notification_payload():
    assert protocol.notification(
        "holder-end", 42, jobid=1, gen=2, error=None, kept=None
    ) == {
        "kind": "holder-end",
        "pool": 42,
        "jobid": 1,
        "gen": 2,
        "error": None,
        "kept": None,
    }
    with pytest.raises(ValueError):
        protocol.notification("holder-ended", 42)
    with pytest.raises(
        ValueError, match="notification 'measure-end' without bytes, files"
    ):
        protocol.notification("measure-end", 42, jobid=1, seq=1, ok=True, error=None)
    assert set(protocol.NOTIFY_FIELDS) == set(protocol.NOTIFICATIONS)
