"""Cluster DNS in the sandbox: a pod's own name resolves from its first instruction, the sandbox's
DNS server answers for pods at once, and no lookup inside the sandbox leaves loopback."""
from __future__ import annotations

import json
import random
import socket
import struct
from typing import Any

import pytest

from kube_sandbox.testing import Sandbox, wait_for

pytestmark = pytest.mark.sandbox

TYPE_A = 1
RCODE_NXDOMAIN = 3


def dns_query(server: str, name: str) -> tuple[int, list[str]]:
    """(rcode, IPv4 addresses) for an A query sent to `server`:53 over UDP."""
    ident = random.randrange(1 << 16)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    request = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\x00" + struct.pack("!HH", TYPE_A, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        client.settimeout(5)
        client.sendto(request, (server, 53))
        response, _ = client.recvfrom(512)
    answer_id, flags, _, count, _, _ = struct.unpack("!HHHHHH", response[:12])
    assert answer_id == ident and flags & 0x8000
    offset = len(request)
    addresses = []
    for _ in range(count):
        addresses.append(socket.inet_ntoa(response[offset + 12:offset + 16]))
        offset += 16
    return flags & 0xF, addresses


def pod(name: str, script: str, *, restart_policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"hostname": name, "subdomain": "dns-test", "restartPolicy": restart_policy,
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}]},
    }


def test_a_pod_resolves_its_own_name_as_soon_as_it_starts(sandbox: Sandbox, namespace: str) -> None:
    fqdn = f"self.dns-test.{namespace}.svc"
    # No retry: the lookup is the container's first instruction, so the name must be there already.
    manifest = pod("self", f"getent hosts {fqdn} && echo resolved", restart_policy="Never")
    sandbox.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(manifest))

    def finished() -> Any:
        phase = sandbox.kubectl("-n", namespace, "get", "pod", "self", "-o", "jsonpath={.status.phase}").stdout
        return phase if phase in ("Succeeded", "Failed") else None

    assert wait_for(finished, timeout=60, what="the pod to finish") == "Succeeded"
    ip = sandbox.kubectl("-n", namespace, "get", "pod", "self", "-o", "jsonpath={.status.podIP}").stdout
    log = sandbox.kubectl("-n", namespace, "logs", "self").stdout
    assert ip and ip in log and "resolved" in log


def test_the_dns_server_answers_for_pods_and_nothing_else(sandbox: Sandbox, namespace: str) -> None:
    server = sandbox.config.dns_address
    resolv_conf = sandbox.exec(["cat", "/etc/resolv.conf"]).stdout
    assert [line.split() for line in resolv_conf.splitlines() if line.startswith("nameserver")] == [
        ["nameserver", server]], "inside the sandbox, only the sandbox's DNS server is asked"

    sandbox.kubectl("-n", namespace, "apply", "-f", "-",
                    input=json.dumps(pod("sleeper", "sleep 3600", restart_policy="Always")))
    fqdn = f"sleeper.dns-test.{namespace}.svc"
    ip = wait_for(lambda: sandbox.kubectl("-n", namespace, "get", "pod", "sleeper", "-o",
                                          "jsonpath={.status.podIP}").stdout, timeout=60, what="a pod IP")
    assert dns_query(server, fqdn) == (0, [ip])
    assert dns_query(server, f"{fqdn}.cluster.local".upper()) == (0, [ip])
    assert dns_query(server, "example.com") == (RCODE_NXDOMAIN, [])

    sandbox.kubectl("-n", namespace, "delete", "pod", "sleeper", "--wait=true", "--timeout=60s")
    assert wait_for(lambda: dns_query(server, fqdn)[0] == RCODE_NXDOMAIN, timeout=30,
                    what="the deleted pod's name to go")
