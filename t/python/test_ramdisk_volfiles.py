"""The GlusterFS volume files of a parallel RAM disk (pure text)."""

import re

import pytest

from flux_rsa.ramdisk import volfiles
from flux_rsa.ramdisk.providers.base import Task
from flux_rsa.ramdisk.providers.glusterfs import volume_of

VOLUME = volume_of(
    Task(
        "/rsa",
        "12.3",
        1,
        0,
        nodes=("rsa0", "rsa7"),
        port=24100,
        secret="s" * 32,
        fs_host="{host}-ib",
    )
)


def blocks(text):
    """{volume name: (type, {option: value}, [subvolumes])}"""
    out = {}
    for body in re.findall(r"volume (\S+)\n(.*?)end-volume", text, re.S):
        name, lines = body
        kind = re.search(r"type (\S+)", lines).group(1)
        options = dict(re.findall(r"option (\S+) (.*)", lines))
        subs = re.search(r"subvolumes (.*)", lines)
        out[name] = (kind, options, subs.group(1).split() if subs else [])
    return out


def test_brick_i_serves_its_tmpfs_on_its_port_to_the_volumes_user_only():
    b = blocks(
        volfiles.brick(
            1, "/rsa/12.3.b1/brick", "10.0.0.7", 24101, VOLUME.user, VOLUME.secret
        )
    )
    assert b["brick1-posix"][0] == "storage/posix"
    assert b["brick1-posix"][1]["directory"] == '"/rsa/12.3.b1/brick"'
    spaced = blocks(volfiles.brick(0, "/my rsa/1.1.b0/brick", "h", 1, "u", "s" * 16))
    assert spaced["brick0-posix"][1]["directory"] == '"/my rsa/1.1.b0/brick"'
    with pytest.raises(ValueError, match="cannot hold"):
        volfiles.brick(0, '/a"b/brick', "h", 1, "u", "s" * 16)
    server = b["brick1-server"]
    assert server[0] == "protocol/server" and server[2] == ["brick1"]
    opts = server[1]
    assert (
        opts["transport.socket.bind-address"],
        opts["transport.socket.listen-port"],
    ) == ("10.0.0.7", "24101")
    assert opts["auth.login.brick1.allow"] == "rsa-12-3"
    assert opts["auth.login.rsa-12-3.password"] == "s" * 32
    # without it a client that sends no credentials would be let in
    assert opts["strict-auth-accept"] == "on"
    assert not any(key.startswith("auth.addr") for key in opts)


def test_the_client_distributes_over_every_brick_with_the_secret():
    assert VOLUME.servers == ("rsa0-ib:24100", "rsa7-ib:24101")
    b = blocks(volfiles.client(VOLUME))
    clients = [name for name, (kind, _, _) in b.items() if kind == "protocol/client"]
    assert clients == ["12.3-client-0", "12.3-client-1"]
    for i, name in enumerate(clients):
        opts = b[name][1]
        assert (opts["remote-host"], opts["remote-port"]) == (
            f"rsa{[0, 7][i]}-ib",
            f"{24100 + i}",
        )
        assert opts["remote-subvolume"] == f"brick{i}"
        assert (opts["username"], opts["password"]) == ("rsa-12-3", "s" * 32)
    assert b["12.3-dht"][0] == "cluster/distribute" and b["12.3-dht"][2] == clients
    # the top of the graph is what the mount serves, the caches below it
    below, chain = "12.3", []
    while b[below][2]:
        (below,) = b[below][2][:1]
        chain.append(b[below][0])
    assert chain[:5] == [
        "performance/md-cache",
        "performance/open-behind",
        "performance/quick-read",
        "features/shard",
        "cluster/distribute",
    ]
    # files cut into pieces spread over the bricks: a volume holds what was reserved
    assert b["12.3-shard"][1]["shard-block-size"] == "4MB"
    # no write-behind: GlusterFS 10.3's dies on ENOSPC with it (volfiles.client)
    assert "performance/write-behind" not in chain


def test_a_one_brick_volume_is_not_sharded():
    one = volfiles.Volume("5.1", ("rsa0:24100",), "rsa-5-1", "s" * 32)
    kinds = [kind for kind, _, _ in blocks(volfiles.client(one)).values()]
    assert "features/shard" not in kinds and "cluster/distribute" in kinds


def test_a_volume_travels_as_a_dict():
    assert volfiles.Volume.from_dict(VOLUME.to_dict()) == VOLUME
