"""A running plaintext cluster moved to TLS (spec.TLS with peer and client certificates added),
one member at a time, through the planner's upgrade rule (16): pods whose TLS mode is behind
the step are outdated. Two steps, each decided again from the pods on every pass:

1. some member pod serves plaintext (`ObservedPod.tls_mode` plain) -> the cluster bridges
   (`ClusterSpec.tls_bridge`): new pods mount the certificates, keep peers on http (dialling
   https peers with their peer certificate) and serve clients on http and https on the client
   port; plain pods are rolled to bridge pods; the operator speaks http to every member.
2. no pod serves plaintext -> bridge pods are rolled to TLS pods; on a volume the member's peer
   URL is changed to https (`member update`) right before its pod is restarted; on emptyDir a new
   member joins with an https peer URL and the bridge one is removed. The operator speaks https
   to every member (bridge pods serve it too).

Mixed peers work in either step: every member dials each peer by the scheme of the URL the member
list gives it, and every member that meets an https peer has a peer certificate.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec, EtcdCluster
from etcd_common.etcd.etcdctl import Member
from etcd_operator.observed import TLS_MODE_BRIDGE, TLS_MODE_PLAIN, TLS_MODE_TLS, ObservedCluster, ObservedPod

STEP_BRIDGE = "1 of 2 (certificates in, peers on http, clients on http and https)"
STEP_TLS = "2 of 2 (peers and clients on https)"
_ORDER = {TLS_MODE_PLAIN: 0, TLS_MODE_BRIDGE: 1, TLS_MODE_TLS: 2}


def moves_to_tls(spec: ClusterSpec) -> bool:
    """A spec a plaintext cluster can be moved to: TLS for peers and clients, etcd 3.5 or later."""
    return (spec.tls.peer_tls and spec.tls.client_tls
            and spec.version.minor_version not in c.UPGRADE_SOURCE_MINOR_VERSIONS)


def with_tls_step(cluster: EtcdCluster, pods: Iterable[ObservedPod]) -> EtcdCluster:
    """The cluster as this pass builds pods and reaches members: bridging (step 1) while the spec
    asks for TLS and a live member pod still serves plaintext."""
    spec = cluster.spec
    if spec is None:
        return cluster
    bridge = moves_to_tls(spec) and any(pod.tls_mode == TLS_MODE_PLAIN and not pod.deleting for pod in pods)
    if bridge == spec.tls_bridge:
        return cluster
    return replace(cluster, spec=replace(spec, tls_bridge=bridge))


def target_mode(spec: ClusterSpec) -> str | None:
    """The TLS mode member pods are rolled to (None: no move to TLS asked for)."""
    if not moves_to_tls(spec):
        return None
    return TLS_MODE_BRIDGE if spec.tls_bridge else TLS_MODE_TLS


def tls_outdated(observed: ObservedCluster, pod: ObservedPod) -> str | None:
    """Why the pod must be rolled for the move to TLS, or None."""
    target = target_mode(observed.cluster.require_spec())
    if target is None or _ORDER[pod.tls_mode] >= _ORDER[target]:
        return None
    step = STEP_BRIDGE if target == TLS_MODE_BRIDGE else STEP_TLS
    return f"moving to TLS, step {step}: its etcd runs {pod.tls_mode}"


def transition_step(observed: ObservedCluster) -> str | None:
    """The step under way (for status), or None when every member pod is where the spec wants it."""
    spec = observed.cluster.require_spec()
    if target_mode(spec) is None:
        return None
    if any(tls_outdated(observed, pod) for pod in observed.live_pods):
        return STEP_BRIDGE if spec.tls_bridge else STEP_TLS
    return None


def needs_bridge_pod(spec: ClusterSpec, member: Member) -> bool:
    """A member restarting on its volume in step 2 whose peer URL is still http (its pod went in
    step 1, the last plain one, so this pass sees step 2): a TLS pod would listen on https where
    its peers dial http; it gets a bridge pod, rolled on by step 2 with the peer URL change."""
    return (moves_to_tls(spec) and not spec.tls_bridge
            and any(url.startswith("http://") for url in member.peer_urls))


def interrupted_peer_change(spec: ClusterSpec, pod: ObservedPod, member: Member) -> bool:
    """Step 2 stopped between `member update` and the pod's deletion (an operator restart): its
    peers dial https where its bridge pod listens on http, so it is unhealthy until restarted."""
    return (moves_to_tls(spec) and pod.tls_mode == TLS_MODE_BRIDGE and bool(member.peer_urls)
            and all(url.startswith("https://") for url in member.peer_urls))


def peer_url_change(target_url: str, member: Member) -> str:
    """The peer URL to give the member (`member update`) before it restarts on its volume with
    another peer scheme; "" when its URLs already have the target's scheme."""
    scheme = target_url.split("://", 1)[0]
    if member.peer_urls and all(url.startswith(f"{scheme}://") for url in member.peer_urls):
        return ""
    return target_url
