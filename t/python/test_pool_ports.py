"""File-system servers' ports: blocks that never overlap and come round
the range, [rsa] fs-ports among the ephemeral ports named with the fix."""

import pytest

flux = pytest.importorskip(
    "flux",
    reason="no Flux (flux-core and flux-sched not installed): the pool tests need a real instance",
)


def test_port_blocks_never_overlap_and_come_round_the_range():
    from flux_rsa.pool.ports import Ports, PortsExhausted

    ports = Ports(100, 109)
    assert ports.take("a", 4) == 100 and ports.take("b", 2) == 104
    assert ports.take("a", 4) == 100  # the same holder asks again
    ports.give("a")
    assert ports.take("c", 3) == 106  # next fit: the block just freed waits its turn
    assert ports.take("d", 4) == 100  # round the range, into the free gap
    with pytest.raises(
        PortsExhausted, match="no 2 free ports left in \\[rsa\\] fs-ports 100-109"
    ):
        ports.take("e", 2)
    blocks = sorted(ports.blocks.values())
    assert all(a + n <= b for (a, n), (b, _) in zip(blocks, blocks[1:]))


def test_fs_ports_among_the_ephemeral_ports_are_named_with_the_fix():
    from flux_rsa.pool.ports import ephemeral_clash

    linux = (32768, 60999)
    assert ephemeral_clash(24100, 24999, linux) is None  # the default
    assert ephemeral_clash(61000, 61999, linux) is None
    why = ephemeral_clash(40000, 40999, linux)
    assert "[rsa] fs-ports 40000-40999" in why and "32768-60999" in why
    assert "below 32768" in why and "ip_local_reserved_ports" in why
    assert ephemeral_clash(32000, 32768, linux) is not None  # one port is enough
