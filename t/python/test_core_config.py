"""Site configuration, job requests and units: every refusal is actionable."""

import pytest

from flux_rsa.core import BadConfig, BadRequest, Policy, parse_request
from flux_rsa.core.units import format_size, parse_duration, parse_size


def test_defaults_follow_the_thesis():
    p = Policy.from_config({})
    assert (p.proportion, p.delay, p.on_late, p.lock_in) == (128, 300.0, "ignore", True)


def test_config_values_with_units():
    p = Policy.from_config(
        {
            "node-capacity": "64M",
            "granule": "4M",
            "lookahead": "2m",
            "property": "bigmem",
        }
    )
    assert (p.node_capacity, p.granule, p.lookahead, p.node_property) == (
        64 << 20,
        4 << 20,
        120.0,
        "bigmem",
    )
    assert p.node_granules == 16


@pytest.mark.parametrize(
    "table, message",
    [
        (
            {"proportion": 0},
            "[rsa] proportion: 0 is not valid (use compute nodes per RSA node)",
        ),
        ({"granule": "lots"}, "[rsa] granule: 'lots' is not a size"),
        ({"image-writeback": "fast"}, "[rsa] image-writeback: 'fast' is not a size"),
        ({"delay": "-5s"}, "[rsa] delay: '-5s' is not a duration"),
        (
            {"on-late": "maybe"},
            '[rsa] on-late: \'maybe\' is not valid (use "ignore" or "wait")',
        ),
        ({"colour": "red"}, "[rsa] colour: unknown key (known keys: proportion,"),
        ({"node-capacity": "1M", "granule": "1G"}, "smaller than one granule"),
        (
            {"ramdisk-root": "relative/dir"},
            "[rsa] ramdisk-root: 'relative/dir' is not valid (use an absolute directory",
        ),
    ],
)
def test_bad_config_is_refused_with_the_key_and_value(table, message):
    with pytest.raises(BadConfig) as err:
        Policy.from_config(table)
    assert message in str(err.value)


def test_capacity_follows_the_proportion_rule_in_whole_granules():
    p = Policy.from_config(
        {
            "proportion": 4,
            "node-capacity": "64M",
            "granule": "4M",
            "provider": "glusterfs",
        }
    )
    assert p.need(8, parse_request({"data_in": "/a"})) == 128 << 20  # 2 RSA nodes
    assert p.need(1, parse_request({"data_in": "/a"})) == 16 << 20  # a quarter node
    assert (
        p.need(1, parse_request({"data_in": "/a", "capacity": "5M"})) == 8 << 20
    )  # rounded up


def test_a_provider_that_cannot_span_nodes_holds_one_node_at_most():
    """(A default asking more is clamped by the on-deck pass: test_core_ondeck.)"""
    p = Policy.from_config({"proportion": 4, "node-capacity": "64M", "granule": "4M"})
    assert p.provider == "tmpfs" and not p.spans
    assert p.need(8, parse_request({"data_in": "/a"})) == 128 << 20  # 2 nodes' worth
    assert p.largest(2) == 64 << 20 and p.layout(128 << 20, 2) is None
    spans = Policy.from_config(
        {
            "proportion": 4,
            "node-capacity": "64M",
            "granule": "4M",
            "provider": "glusterfs",
        }
    )
    assert spans.layout(128 << 20, 2) is None  # its headroom does not fit 64M
    assert spans.layout(56 << 20, 2) == (1, 14)


@pytest.mark.parametrize(
    "attrs, message",
    [
        (5, "rsa: 5 is not a table of settings"),
        ({"data_in": "rel/in"}, "rsa.data_in: 'rel/in' is not absolute"),
        ({"data_in": ["/a"]}, 'rsa.data_in: ["/a"] is not a path'),
        (
            {"data_in": "/a", "data_out": "/a/b"},
            "rsa.data_out: '/a/b' is inside rsa.data_in '/a'",
        ),
        ({"data_in": "/a", "data_out": "/a"}, "is inside rsa.data_in"),
        ({"data_in": "/a/../b"}, "contains '..'"),
        ({"data_in": "/a", "delay": "soon"}, "rsa.delay: 'soon' is not a duration"),
        ({"data_in": "/a", "capacity": "-1G"}, "rsa.capacity: '-1G' is negative"),
        (
            {"data_in": "/a", "capacity": 0},
            "rsa.capacity: 0 is not a usable RAM-disk size",
        ),
        ({"data_in": "/a", "on_late": "never"}, "rsa.on_late: 'never' is not allowed"),
        ({"data_in": "/a", "speed": "fast"}, "rsa.speed: unknown key"),
        ({"stage_out": "tar"}, "rsa.stage_out: 'tar' needs rsa.data_out too"),
    ],
)
def test_bad_requests_are_refused_with_the_key_and_value(attrs, message):
    with pytest.raises(BadRequest) as err:
        parse_request(attrs)
    assert message in str(err.value)


def test_request_normalises_paths_and_methods():
    req = parse_request(
        {
            "data_in": "/a//b/./",
            "stage_in": "copy",
            "stage_out": "tar",
            "data_out": "/o",
            "delay": "1m",
        }
    )
    assert (req.data_in, req.stage_in, req.stage_out, req.delay) == (
        "/a/b",
        None,
        "tar",
        60.0,
    )


@pytest.mark.parametrize(
    "text, value",
    [("4G", 4 << 30), ("512MiB", 512 << 20), ("1.5K", 1536), (100, 100), ("7", 7)],
)
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize(
    "text, value",
    [("90s", 90), ("5m", 300), ("2h", 7200), ("1d", 86400), (30, 30), ("0.5", 0.5)],
)
def test_durations(text, value):
    assert parse_duration(text) == value


def test_format_size():
    assert [format_size(n) for n in (0, 1536, 4 << 30, 150 << 30)] == [
        "0",
        "1.5K",
        "4G",
        "150G",
    ]


COMMAND = {
    "provider": "command",
    "command-create": "/etc/flux/rsa/create",
    "command-destroy": "/etc/flux/rsa/destroy",
}


def test_provider_command_runs_the_sites_scripts_and_spans_nodes_unless_told_not_to():
    p = Policy.from_config(COMMAND)
    assert p.spans
    assert p.scripts == {
        "create": "/etc/flux/rsa/create",
        "destroy": "/etc/flux/rsa/destroy",
    }
    p = Policy.from_config(
        {**COMMAND, "command-spans": False, "node-capacity": "64M", "granule": "4M"}
    )
    assert not p.spans and p.largest(4) == 64 << 20
    p = Policy.from_config({**COMMAND, "command-attach": "/a", "command-detach": "/d"})
    assert set(p.scripts) == {"create", "destroy", "attach", "detach"}


@pytest.mark.parametrize(
    "table, message",
    [
        (
            {"provider": "command"},
            '[rsa] provider = "command" needs command-create (the absolute path of the site\'s script',
        ),
        ({"provider": "command", "command-create": "/c"}, "needs command-destroy"),
        (
            {**COMMAND, "command-create": "create.sh"},
            "[rsa] command-create: 'create.sh' is not valid (use the absolute path of a site script",
        ),
        (
            {**COMMAND, "command-destroy": "/etc/../tmp/d"},
            "[rsa] command-destroy: '/etc/../tmp/d' is not a plain absolute path (no '.', '..', '//' "
            "or trailing '/'; e.g. '/tmp/d')",
        ),
        (
            {**COMMAND, "command-attach": "/a"},
            "[rsa] command-attach needs command-detach too",
        ),
        (
            {**COMMAND, "command-detach": "/d"},
            "[rsa] command-detach needs command-attach too",
        ),
        (
            {**COMMAND, "command-spans": "yes"},
            "[rsa] command-spans: 'yes' is not valid (use true or false)",
        ),
        (
            {"command-create": "/c"},
            "[rsa] command-create: only used with provider = \"command\" (provider is 'tmpfs'): remove "
            'it or set provider = "command"',
        ),
    ],
)
def test_bad_command_settings_name_the_key_and_the_fix(table, message):
    with pytest.raises(BadConfig) as err:
        Policy.from_config(table)
    assert message in str(err.value)


def test_the_schema_is_a_valid_json_schema():
    # from_config no longer checks the schema itself on every call (it is
    # checked here, once)
    import jsonschema

    from flux_rsa.core.config import SCHEMA

    jsonschema.validators.validator_for(SCHEMA).check_schema(SCHEMA)


def test_image_writeback_is_a_size_128M_unless_the_site_says():
    assert Policy.from_config({}).image_writeback == 128 * 2**20
    assert (
        Policy.from_config({"image-writeback": "256M"}).image_writeback == 256 * 2**20
    )
    assert Policy.from_config({"image-writeback": 0}).image_writeback == 0
