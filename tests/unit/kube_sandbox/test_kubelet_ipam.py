"""Pod IP allocation on loopback, one address range per node."""
from __future__ import annotations

import ipaddress

import pytest

from kube_sandbox.kubelet.ipam import MAX_NODES, AddressesExhausted, IpAllocator, node_blocks, node_pod_cidr


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


@pytest.mark.parametrize("index, first, last, cidr", [
    (0, "127.1.1.1", "127.1.63.254", "127.1.0.0/18"),
    (1, "127.1.64.1", "127.1.127.254", "127.1.64.0/18"),
    (2, "127.1.128.1", "127.1.191.254", "127.1.128.0/18"),
])
def test_each_node_owns_its_own_range(index: int, first: str, last: str, cidr: str) -> None:
    ipam = IpAllocator("127.1", node_blocks(index))
    addresses = [ipam.allocate(str(i)) for i in range(ipam.size)]
    assert (addresses[0], addresses[-1]) == (first, last)
    network = ipaddress.ip_network(node_pod_cidr("127.1", index))
    assert str(network) == cidr
    assert all(ipaddress.ip_address(a) in network for a in addresses)
    assert ipaddress.ip_address("127.1.0.0") not in addresses  # the cluster DNS server


def test_node_ranges_do_not_overlap_and_are_bounded() -> None:
    ranges = [set(node_blocks(i)) for i in range(3)]
    assert not (ranges[0] & ranges[1]) and not (ranges[1] & ranges[2]) and 0 not in ranges[0]
    with pytest.raises(ValueError):
        node_blocks(MAX_NODES)


def test_a_node_does_not_reserve_another_nodes_address() -> None:
    first, second = IpAllocator("127.1", node_blocks(0)), IpAllocator("127.1", node_blocks(1))
    address = second.allocate("pod")
    assert not first.reserve("pod", address)
    assert second.reserve("pod", address)
