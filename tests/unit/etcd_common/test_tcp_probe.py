"""Which etcd endpoints accept a TCP connection (`etcd_common.etcd.tcp_probe`): on real loopback
sockets, and names resolved for IPv6 as well as IPv4. (Nothing here connects outside 127.0.0.0/8:
IPv6 address selection is checked with a stand-in resolver.)"""
from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from etcd_common.etcd import tcp_probe
from etcd_common.etcd.tcp_probe import accepting_connections


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nobody listens once this socket is closed


def test_accepting_connections_tells_listening_from_closed_and_malformed(listener: int) -> None:
    # (No unresolvable name here: resolving one would ask the machine's resolver, off loopback.)
    open_url, closed_url = f"http://127.0.0.1:{listener}", f"http://127.0.0.1:{closed_port()}"
    malformed = "http://127.0.0.1:not-a-port"
    assert accepting_connections([open_url, closed_url, malformed, open_url], 2.0) == {open_url}
    assert accepting_connections([], 2.0) == set()


def test_member_probes_resolve_ipv6_names(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def getaddrinfo(host: str, port: int, family: int = 0, kind: int = 0) -> list[Any]:
        asked.append(family)
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fd00::7", port, 0, 0))]

    monkeypatch.setattr(tcp_probe.socket, "getaddrinfo", getaddrinfo)
    assert tcp_probe.resolve("http://m.example.default.svc:2379") == (socket.AF_INET6, ("fd00::7", 2379, 0, 0))
    assert asked == [socket.AF_UNSPEC]
