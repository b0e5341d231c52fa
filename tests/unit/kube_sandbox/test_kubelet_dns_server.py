"""The cluster DNS server: DNS messages in and out, and a real UDP round trip on loopback."""
from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet.dns import HostsFile, parse_hosts
from kube_sandbox.kubelet.dns_server import (
    RCODE_FORMERR,
    RCODE_NOERROR,
    RCODE_NOTIMP,
    RCODE_NXDOMAIN,
    TYPE_A,
    DnsServer,
    answer,
    parse_query,
)

TYPE_AAAA = 28
RECORDS = {"m1.c.ns.svc": ["127.1.0.5"], "c-client.ns.svc": ["127.1.0.5", "127.1.0.6"]}


def lookup(name: str) -> list[str]:
    return RECORDS.get(name, [])


def query(name: str, qtype: int = TYPE_A, *, ident: int = 0x1234, flags: int = 0x0100) -> bytes:
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split("."))
    return struct.pack("!HHHHHH", ident, flags, 1, 0, 0, 0) + labels + b"\x00" + struct.pack("!HH", qtype, 1)


def decode(response: bytes, question_length: int) -> dict[str, Any]:
    ident, flags, qdcount, ancount, _, _ = struct.unpack("!HHHHHH", response[:12])
    offset = 12 + question_length
    addresses = []
    for _ in range(ancount):
        pointer, rtype, rclass, ttl, length = struct.unpack("!HHHIH", response[offset:offset + 12])
        assert (pointer, rtype, rclass, length) == (0xC00C, TYPE_A, 1, 4)
        addresses.append(socket.inet_ntoa(response[offset + 12:offset + 16]))
        offset += 16
    assert offset == len(response)
    return {"id": ident, "response": bool(flags & 0x8000), "authoritative": bool(flags & 0x0400),
            "recursion_desired": bool(flags & 0x0100), "rcode": flags & 0xF, "questions": qdcount,
            "addresses": addresses}


def test_a_query_for_a_known_name_gets_every_address() -> None:
    request = query("c-client.ns.svc")
    response = answer(request, lookup)
    assert response is not None
    decoded = decode(response, len(request) - 12)
    assert decoded == {"id": 0x1234, "response": True, "authoritative": True, "recursion_desired": True,
                       "rcode": RCODE_NOERROR, "questions": 1, "addresses": ["127.1.0.5", "127.1.0.6"]}
    assert response[12:len(request)] == request[12:], "the question is echoed"


def test_names_match_without_case_or_trailing_dot() -> None:
    request = query("M1.C.NS.SVC.")
    response = answer(request, lookup)
    assert response is not None
    assert decode(response, len(request) - 12)["addresses"] == ["127.1.0.5"]


def test_unknown_name_is_nxdomain_and_aaaa_for_a_known_name_is_empty() -> None:
    unknown = query("pypi.org")
    response = answer(unknown, lookup)
    assert response is not None
    assert decode(response, len(unknown) - 12)["rcode"] == RCODE_NXDOMAIN
    aaaa = query("m1.c.ns.svc", TYPE_AAAA)
    response = answer(aaaa, lookup)
    assert response is not None
    decoded = decode(response, len(aaaa) - 12)
    assert (decoded["rcode"], decoded["addresses"]) == (RCODE_NOERROR, []), "the name exists, with no IPv6 address"


def test_other_opcodes_are_not_implemented_and_garbage_is_a_format_error() -> None:
    update = query("m1.c.ns.svc", flags=5 << 11)
    response = answer(update, lookup)
    assert response is not None
    assert decode(response, len(update) - 12)["rcode"] == RCODE_NOTIMP
    truncated = query("m1.c.ns.svc")[:20]
    assert parse_query(truncated) is None
    error = answer(truncated, lookup)
    assert error is not None and struct.unpack("!HH", error[:4]) == (0x1234, 0x8000 | RCODE_FORMERR)
    assert answer(b"\x00", lookup) is None
    assert answer(query("m1.c.ns.svc", flags=0x8000), lookup) is None, "responses are never answered"


def test_hosts_file_lookup_follows_every_update(tmp_path: Path) -> None:
    hosts = HostsFile(tmp_path / "hosts", "cluster.local")
    pod = {"metadata": {"name": "m1", "namespace": "ns", "labels": {}},
           "spec": {"hostname": "m1", "subdomain": "c"},
           "status": {"phase": "Pending", "podIP": "127.1.0.9", "conditions": []}}
    hosts.update([pod], [])
    assert hosts.lookup("m1.c.ns.svc") == ["127.1.0.9"]
    assert hosts.lookup("M1.c.ns.svc.cluster.local.") == ["127.1.0.9"]
    assert hosts.lookup("localhost") == ["127.0.0.1"], "IPv6 lines are left out"
    hosts.update([], [])
    assert hosts.lookup("m1.c.ns.svc") == []


def test_parse_hosts_skips_comments_and_keeps_order() -> None:
    assert parse_hosts("# x\n127.0.0.2 a b # c\n127.0.0.3 a\n::1 a\n") == {"a": ["127.0.0.2", "127.0.0.3"],
                                                                           "b": ["127.0.0.2"]}


def test_server_answers_over_udp_on_loopback() -> None:
    server = DnsServer(lookup, "127.0.0.1", port=0)
    server.start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.settimeout(5)
            request = query("m1.c.ns.svc")
            client.sendto(request, ("127.0.0.1", server.port))
            response, _ = client.recvfrom(512)
        assert decode(response, len(request) - 12)["addresses"] == ["127.1.0.5"]
    finally:
        server.stop()
