"""Pod IP allocation on loopback."""
from __future__ import annotations

import pytest

from kube_sandbox.kubelet.ipam import AddressesExhausted, IpAllocator


def test_addresses_are_unique_round_robin_and_stable_per_pod() -> None:
    ipam = IpAllocator("127.1")
    first = ipam.allocate("a")
    second = ipam.allocate("b")
    assert (first, second) == ("127.1.0.1", "127.1.0.2")
    assert ipam.allocate("a") == first
    ipam.release("a")
    assert ipam.allocate("c") == "127.1.0.3"  # a freed address is not reused at once
    assert ipam.ip_of("a") is None


def test_allocation_crosses_blocks_and_skips_network_and_broadcast_like_addresses() -> None:
    ipam = IpAllocator("127.1")
    addresses = [ipam.allocate(str(i)) for i in range(256)]
    assert addresses[253] == "127.1.0.254"
    assert addresses[254] == "127.1.1.1"
    assert len(set(addresses)) == 256


def test_reserve_recovers_addresses_and_moves_the_cursor_past_them() -> None:
    ipam = IpAllocator("127.1")
    assert ipam.reserve("old", "127.1.0.9")
    assert not ipam.reserve("other", "127.1.0.9")
    assert not ipam.reserve("foreign", "10.0.0.1")
    assert ipam.allocate("old") == "127.1.0.9"
    assert ipam.allocate("new") == "127.1.0.10"


def test_exhaustion_is_an_error() -> None:
    ipam = IpAllocator("127.1")
    for i in range(ipam.size):
        ipam.allocate(str(i))
    with pytest.raises(AddressesExhausted):
        ipam.allocate("one-too-many")


@pytest.mark.parametrize("prefix", ["10.1", "127", "127.300", "127.1.2"])
def test_prefix_must_be_loopback(prefix: str) -> None:
    with pytest.raises(ValueError):
        IpAllocator(prefix)
