"""A running plaintext cluster moved to TLS (issue 24) by adding `spec.TLS.issued`, and back by
removing it, under
continuous writes through its client Service: the operator rolls the members one at a time in two
steps (tls_transition.py: bridge pods with the certificates, peers on http and clients on both
schemes; then TLS pods, the peer URL changed with `member update` on a volume). No acknowledged
write is lost, ready members never fall below a quorum (2 of 3), writes fail only as etcd drops
them at a leader change, and at the end every member serves TLS on its peer and client ports,
advertises https URLs, and refuses plaintext clients. Moving off TLS goes the same two steps
backwards (bridge pods, the peer URL changed to http; then plain pods), with the same guarantees,
and ends with every member serving plaintext only and advertising http URLs.

The writer speaks http until no member pod serves plaintext (step 1 done; every member then
serves https), then https, as docs/tls.md tells clients to; moving off, https until no member pod
serves TLS only, then http."""
from __future__ import annotations

import json
import re
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.client_writes import Writer, assert_only_leader_change_drops
from tests.integration.etcd_operator.etcd_data import read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import conditions
from tests.integration.etcd_operator.tls_certs import IssuedClient, etcdctl

PREFIX = "to-tls/"
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
TRANSITION_TIMEOUT_SECONDS = 240.0


def _raft_term(clusters: Clusters, url: str, flags: list[str]) -> int:
    """The highest raft term a member reports (each leader change raises it by one)."""
    result = clusters.sandbox.etcdctl([url], *flags, "endpoint", "status", "--cluster", "-w", "json")
    return max((int(t) for t in re.findall(r'"raft_term":(\d+)', result.stdout)), default=0)


def _command(pod: Any) -> list[str]:
    return list(pod.spec.containers[0].command or [])


def _serves_plaintext(pod: Any) -> bool:
    """Not yet a bridge or TLS pod: no peer certificate among its etcd flags."""
    return not any(flag.startswith("--peer-cert-file=") for flag in _command(pod))


def _serves_tls_only(pod: Any) -> bool:
    """A TLS pod (not a bridge): its peers listen on https."""
    return any(flag.startswith("--listen-peer-urls=https://") for flag in _command(pod))


class ReadyWatch:
    """Samples the member pods' readiness every 0.2 s; the fewest ready seen."""

    def __init__(self, clusters: Clusters, name: str) -> None:
        self.clusters, self.name = clusters, name
        self.fewest = 3
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ready-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            pods = self.clusters.live_pods(self.name)
            ready = sum(any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
                        for p in pods)
            self.fewest = min(self.fewest, ready)

    def finish(self) -> None:
        self.stop.set()
        self._thread.join(10)


def _all_tls(clusters: Clusters, name: str, client: IssuedClient, seen: list[str]) -> bool:
    """Three pods, each serving TLS on 2379 and 2380, their members advertising https only, and
    the Upgrading condition back to False."""
    pods = clusters.live_pods(name)
    status = clusters.status(name)
    upgrading = conditions(status).get("Upgrading", ("", "", ""))
    seen[:] = [f"pods {[(p.metadata.name, p.status.pod_ip) for p in pods]}; Upgrading {upgrading}"]
    if len(pods) != 3 or upgrading[0] != "False" or status.get("readyCount") != 3:
        return False
    for pod in pods:
        if not pod.status.pod_ip:
            return False
        for port in (2379, 2380):
            try:
                client.served_certificate(pod.status.pod_ip, port)
            except (OSError, ssl.SSLError) as e:
                seen.append(f"{pod.metadata.name}:{port} {e!r}")
                return False
    members = json.loads(etcdctl(clusters, [f"https://{name}-client.{clusters.namespace}.svc:2379"],
                                 client.flags(), "member", "list", "-w", "json"))["members"]
    urls = [u for m in members for u in (*m.get("peerURLs", ()), *m.get("clientURLs", ()))]
    seen.append(f"member URLs {urls}")
    return len(members) == 3 and all(u.startswith("https://") for u in urls)


@pytest.mark.parametrize("storage", ["emptyDir", "pvc"])
def test_a_plaintext_cluster_moves_to_tls_and_back_under_writes(clusters: Clusters, tmp_path: Path, storage: str) -> None:
    name = f"to-tls-{storage.lower()}"
    ns = clusters.namespace
    spec: dict[str, Any] = {"pod": {"persistentVolumeClaimSpec": PVC_SPEC}} if storage == "pvc" else {}
    clusters.create(etcd_cluster(name, size=3, **spec))
    clusters.wait_running(name, ready=3, timeout=180)
    plain_url, tls_url = clusters.client_url(name), f"https://{name}-client.{ns}.svc:2379"

    writer = Writer(clusters.sandbox, plain_url, PREFIX)
    writer.start()
    ready = ReadyWatch(clusters, name)
    term_before = _raft_term(clusters, plain_url, [])
    seen: list[str] = []
    try:
        wait_for(lambda: writer.progressed(5), timeout=30, what="plaintext writes before the move")
        started = time.monotonic()
        clusters.patch_spec(name, {"TLS": {"issued": {}}})
        # Step 1 ends when no pod serves plaintext: every member then serves https as well.
        wait_for(lambda: all(not _serves_plaintext(p) for p in clusters.live_pods(name))
                 and len(clusters.live_pods(name)) == 3, timeout=TRANSITION_TIMEOUT_SECONDS, interval=0.2,
                 what="every member pod a bridge (step 1)")
        client = IssuedClient(clusters, name, tmp_path / "client")
        writer.flags = tuple(client.flags())  # flags first: http with them is still plain http
        writer.endpoint = tls_url
        try:
            wait_for(lambda: _all_tls(clusters, name, client, seen), timeout=TRANSITION_TIMEOUT_SECONDS,
                     interval=1.0, what="every member serving TLS on its peer and client ports")
        except AssertionError as e:
            raise AssertionError(f"{e}\nlast seen: {seen}") from None
        finished = time.monotonic()
        count = len(writer.acknowledged)
        wait_for(lambda: writer.progressed(count + 5), timeout=30, what="TLS writes after the move")
    finally:
        writer.finish()
        ready.finish()
    leader_changes = _raft_term(clusters, tls_url, client.flags()) - term_before

    print(f"\nmoved to TLS in {finished - started:.1f}s; writes: {len(writer.acknowledged)} acknowledged, "
          f"{len(writer.failures)} failed; {leader_changes} leader change(s); fewest ready {ready.fewest}")
    for _, error in writer.failures:
        print(f"  failed write: {error}")
    assert ready.fewest >= 2, f"ready members fell to {ready.fewest} of 3: below a quorum"
    assert_only_leader_change_drops([e for _, e in writer.failures], max(leader_changes, 0), "the move to TLS")
    stored = read_prefix(clusters.sandbox, [tls_url], PREFIX, flags=client.flags())
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost or changed, e.g. {sorted(lost)[:5]}"
    refused = clusters.sandbox.etcdctl([plain_url], "put", f"{PREFIX}plain", "x", "--command-timeout=5s")
    assert refused.returncode != 0, "a plaintext client still writes once the move is done"
    assert any(e.reason == "MemberUpgrading" or e.reason == "MemberAdded" for e in clusters.events(name))
    _moves_off_tls_under_writes(clusters, name, client)
    clusters.delete(name)


def _all_plain(clusters: Clusters, name: str, seen: list[str]) -> bool:
    """Three plain pods (no certificate among their flags), the Upgrading condition back to False,
    and every member advertising http URLs only."""
    pods = clusters.live_pods(name)
    status = clusters.status(name)
    upgrading = conditions(status).get("Upgrading", ("", "", ""))
    seen[:] = [f"pods {[(p.metadata.name, _serves_plaintext(p)) for p in pods]}; Upgrading {upgrading}"]
    if len(pods) != 3 or upgrading[0] != "False" or status.get("readyCount") != 3:
        return False
    if not all(_serves_plaintext(p) for p in pods):
        return False
    listed = clusters.sandbox.etcdctl([clusters.client_url(name)], "member", "list", "-w", "json")
    if listed.returncode != 0:
        seen.append(f"member list: {listed.stderr.strip()}")
        return False
    members = json.loads(listed.stdout)["members"]
    urls = [u for m in members for u in (*m.get("peerURLs", ()), *m.get("clientURLs", ()))]
    seen.append(f"member URLs {urls}")
    return len(members) == 3 and all(u.startswith("http://") for u in urls)


def _moves_off_tls_under_writes(clusters: Clusters, name: str, client: IssuedClient) -> None:
    """spec.TLS removed from the running TLS cluster: back to plaintext, no acknowledged write lost,
    never below a quorum, writes failing only as etcd drops them at a leader change."""
    plain_url, tls_url = clusters.client_url(name), f"https://{name}-client.{clusters.namespace}.svc:2379"
    writer = Writer(clusters.sandbox, tls_url, f"{PREFIX}off/", flags=tuple(client.flags()))
    writer.start()
    ready = ReadyWatch(clusters, name)
    term_before = _raft_term(clusters, tls_url, client.flags())
    seen: list[str] = []
    try:
        wait_for(lambda: writer.progressed(5), timeout=30, what="TLS writes before the move off")
        started = time.monotonic()
        clusters.patch_spec(name, {"TLS": None})
        # Step 1 ends when no pod serves TLS only: every member then serves http as well.
        wait_for(lambda: not any(_serves_tls_only(p) for p in clusters.live_pods(name))
                 and len(clusters.live_pods(name)) == 3, timeout=TRANSITION_TIMEOUT_SECONDS, interval=0.2,
                 what="every member pod a bridge (step 1 off TLS)")
        writer.endpoint = plain_url  # endpoint first: http with the TLS flags is still plain http
        writer.flags = ()
        try:
            wait_for(lambda: _all_plain(clusters, name, seen), timeout=TRANSITION_TIMEOUT_SECONDS, interval=1.0,
                     what="every member serving plaintext only")
        except AssertionError as e:
            raise AssertionError(f"{e}\nlast seen: {seen}") from None
        finished = time.monotonic()
        count = len(writer.acknowledged)
        wait_for(lambda: writer.progressed(count + 5), timeout=30, what="plaintext writes after the move off")
    finally:
        writer.finish()
        ready.finish()
    leader_changes = _raft_term(clusters, plain_url, []) - term_before

    print(f"moved off TLS in {finished - started:.1f}s; writes: {len(writer.acknowledged)} acknowledged, "
          f"{len(writer.failures)} failed; {leader_changes} leader change(s); fewest ready {ready.fewest}")
    for _, error in writer.failures:
        print(f"  failed write: {error}")
    assert ready.fewest >= 2, f"ready members fell to {ready.fewest} of 3 moving off TLS: below a quorum"
    assert_only_leader_change_drops([e for _, e in writer.failures], max(leader_changes, 0), "the move off TLS")
    stored = read_prefix(clusters.sandbox, [plain_url], PREFIX)
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost or changed moving off TLS, e.g. {sorted(lost)[:5]}"
    assert clusters.status(name).get("tls") in (None, {}), "status names no certificate once TLS is off"
    assert any(e.reason == "MemberUpgrading" or e.reason == "MemberAdded" for e in clusters.events(name))
