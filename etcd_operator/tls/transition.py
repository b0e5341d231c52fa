"""A running cluster moved between plaintext and TLS for peers and clients, one member at a time,
through the planner's upgrade rule (16): pods whose TLS mode is on the wrong side of the step are
outdated. Each step is decided again from the pods on every pass, so an operator restarted at any
point picks the move up where it was.

Moving to TLS (spec.TLS with peer and client certificates added), two steps:

1. some member pod serves plaintext (`ObservedPod.tls_mode` plain) -> the cluster bridges
   (`ClusterSpec.tls_bridge`): new pods mount the certificates, keep peers on http (dialling
   https peers with their peer certificate) and serve clients on http and https on the client
   port; plain pods are rolled to bridge pods; the operator speaks http to every member.
2. no pod serves plaintext -> bridge pods are rolled to TLS pods; on a volume the member's peer
   URL is changed to https (`member update`) right before its pod is restarted; on emptyDir a new
   member joins with an https peer URL and the bridge one is removed. The operator speaks https
   to every member (bridge pods serve it too).

Moving off TLS (spec.TLS removed), the same two steps backwards:

1. some member pod serves TLS only -> the cluster bridges (`tls_bridge` and `tls_off`) on the
   Secrets its members run with, remembered from the last status (`status.tls.<role>.secret`,
   which this step keeps writing): TLS pods are rolled to bridge pods, the peer URL changed to
   http (`member update`) right before a restart on a volume, or a new member joining on http
   peers on emptyDir. The operator speaks https to every member (bridge pods serve it too).
2. no pod serves TLS only -> bridge pods are rolled to plain pods (peer URLs are http already).
   The operator speaks http to every member (bridge pods serve it too).

Mixed peers work in every step: every member dials each peer by the scheme of the URL the member
list gives it, and every member that meets an https peer has a peer certificate.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import cert_manager_secret_names
from etcd_common.api.etcd_cluster import ClusterSpec, EtcdCluster, StaticTLS
from etcd_common.etcd.types import Member
from etcd_operator.observed import TLS_MODE_BRIDGE, TLS_MODE_PLAIN, TLS_MODE_TLS, ObservedCluster, ObservedPod

STEP_BRIDGE = "1 of 2 (certificates in, peers on http, clients on http and https)"
STEP_TLS = "2 of 2 (peers and clients on https)"
STEP_OFF_BRIDGE = "1 of 2 (peers on http, clients on http and https)"
STEP_OFF_PLAIN = "2 of 2 (certificates out, peers and clients on http)"
_ORDER = {TLS_MODE_PLAIN: 0, TLS_MODE_BRIDGE: 1, TLS_MODE_TLS: 2}


def moves_to_tls(spec: ClusterSpec) -> bool:
    """A spec a plaintext cluster can be moved to: TLS for peers and clients, etcd 3.5 or later."""
    return (spec.tls.peer_tls and spec.tls.client_tls
            and spec.version.minor_version not in c.UPGRADE_SOURCE_MINOR_VERSIONS)


def without_tls(spec: ClusterSpec) -> bool:
    """A spec that asks for no TLS at all (the one a move off TLS goes to)."""
    return not spec.tls.peer_tls and not spec.tls.client_tls


def with_tls_step(cluster: EtcdCluster, pods: Iterable[ObservedPod]) -> EtcdCluster:
    """The cluster as this pass builds pods and reaches members: bridging while the spec asks for
    TLS and a live member pod still serves plaintext (step 1 to TLS), or while the spec asks for
    none and a live member pod still serves TLS only (step 1 off TLS, on the remembered Secrets)."""
    if cluster.spec is None:
        return cluster
    if cluster.spec.tls_off:  # stepped before: the user's spec asks for no TLS (so this is idempotent)
        cluster = replace(cluster, spec=replace(cluster.spec, tls=StaticTLS(), tls_off=False))
    spec = cluster.require_spec()
    live = [pod for pod in pods if not pod.deleting]
    remembered = remembered_tls(cluster, live)
    if remembered is not None:
        stepped = replace(spec, tls=remembered, tls_bridge=True, tls_off=True)
    else:
        bridge = moves_to_tls(spec) and any(pod.tls_mode == TLS_MODE_PLAIN for pod in live)
        stepped = replace(spec, tls_bridge=bridge, tls_off=False)
    return cluster if stepped == spec else replace(cluster, spec=stepped)


def remembered_tls(cluster: EtcdCluster, live: Iterable[ObservedPod]) -> StaticTLS | None:
    """Step 1 off TLS: the Secrets the members run with, when the spec asks for no TLS, a live member
    pod serves TLS only, and the last status named peer, server and operator Secrets of a source
    whose keys are CoreOS's (static or issued; cert-manager's Secrets carry other key names)."""
    spec = cluster.require_spec()
    if not without_tls(spec) or not any(pod.tls_mode == TLS_MODE_TLS for pod in live):
        return None
    names = cluster.recorded.tls_secrets
    remembered = StaticTLS(member_peer_secret=names.get("peer", ""), member_server_secret=names.get("server", ""),
                           operator_secret=names.get("operator", ""))
    if not moves_to_tls(replace(spec, tls=remembered)) or not remembered.member_server_secret:
        return None
    if _ran_on_cert_manager(cluster):
        return None
    return remembered


def _ran_on_cert_manager(cluster: EtcdCluster) -> bool:
    """The Secrets the last status names are cert-manager's (their key names are not CoreOS's)."""
    return cluster.recorded.tls_secrets.get("peer") == cert_manager_secret_names(cluster.name).peer


def off_tls_problem(cluster: EtcdCluster) -> str:
    """Why a cluster whose spec no longer asks for TLS cannot be moved off it (nothing remembered
    that would let the operator reach and roll its TLS members)."""
    spec = cluster.require_spec()
    if spec.version.minor_version in c.UPGRADE_SOURCE_MINOR_VERSIONS:
        return f"etcd {spec.version} cannot be moved off TLS (etcd 3.5 or later can)"
    if _ran_on_cert_manager(cluster):
        return "a cluster on spec.TLS.certManager cannot be moved off TLS yet"
    return ("the status no longer names the peer, server and operator Secrets its members run with "
            "(status.tls), which the move off TLS needs")


def target_mode(spec: ClusterSpec) -> str | None:
    """The TLS mode member pods are rolled to (None: no move asked for): moving to TLS, bridge
    then TLS; moving off, bridge then plain (a bridge pod left under a spec without TLS, e.g. a move
    to TLS taken back, goes plain too)."""
    if spec.tls_off:
        return TLS_MODE_BRIDGE
    if moves_to_tls(spec):
        return TLS_MODE_BRIDGE if spec.tls_bridge else TLS_MODE_TLS
    if without_tls(spec):
        return TLS_MODE_PLAIN
    return None


def _spec_moves_off_tls(spec: ClusterSpec) -> bool:
    """Step 1 off TLS (`tls_off`, set by `with_tls_step`) or step 2 (a spec without TLS)."""
    return spec.tls_off or without_tls(spec)


def tls_outdated(observed: ObservedCluster, pod: ObservedPod) -> str | None:
    """Why the pod must be rolled for a move to or off TLS, or None."""
    spec = observed.cluster.require_spec()
    target = target_mode(spec)
    if target is None:
        return None
    if _spec_moves_off_tls(spec):
        if _ORDER[pod.tls_mode] <= _ORDER[target]:
            return None
        if target == TLS_MODE_PLAIN and any(p.tls_mode == TLS_MODE_TLS for p in observed.live_pods):
            return None  # TLS-only members and nothing remembered to bridge with: refused (planning/)
        step = STEP_OFF_BRIDGE if target == TLS_MODE_BRIDGE else STEP_OFF_PLAIN
        return f"moving off TLS, step {step}: its etcd runs {pod.tls_mode}"
    if _ORDER[pod.tls_mode] >= _ORDER[target]:
        return None
    step = STEP_BRIDGE if target == TLS_MODE_BRIDGE else STEP_TLS
    return f"moving to TLS, step {step}: its etcd runs {pod.tls_mode}"


def transition_step(observed: ObservedCluster) -> str | None:
    """The step under way (for status), or None when every member pod is where the spec wants it."""
    spec = observed.cluster.require_spec()
    if target_mode(spec) is None or not any(tls_outdated(observed, pod) for pod in observed.live_pods):
        return None
    if _spec_moves_off_tls(spec):
        return STEP_OFF_BRIDGE if spec.tls_off else STEP_OFF_PLAIN
    return STEP_BRIDGE if spec.tls_bridge else STEP_TLS


def moving_off_tls(observed: ObservedCluster) -> bool:
    """The step under way moves off TLS (status says so)."""
    return _spec_moves_off_tls(observed.cluster.require_spec())


def restart_bridge(spec: ClusterSpec, member: Member) -> bool | None:
    """Whether the pod of a member restarting on its volume must bridge, when the step's own pods
    would listen on the other peer scheme than the member's peer URL (None: as the step builds):
    to TLS, step 2, a member whose peer URL is still http (its pod went in step 1, the last plain
    one) gets a bridge pod, rolled on by step 2 with the peer URL change; off TLS, step 1, a member
    whose peer URL is still https (its pod went, not by the step) gets a TLS pod."""
    if not (moves_to_tls(spec) or spec.tls_off) or not member.peer_urls:
        return None
    http_peers = any(url.startswith("http://") for url in member.peer_urls)
    if http_peers == spec.tls_bridge:
        return None  # bridge pods listen on http, TLS pods on https
    return http_peers


def interrupted_peer_change(spec: ClusterSpec, pod: ObservedPod, member: Member) -> bool:
    """A step stopped between `member update` and the pod's deletion (an operator restart): its
    peers dial the new scheme where its pod listens on the old one, so it is unhealthy until
    restarted. To TLS: https peer URL, bridge pod; off TLS: http peer URL, TLS pod."""
    if not member.peer_urls:
        return False
    if moves_to_tls(spec) and pod.tls_mode == TLS_MODE_BRIDGE:
        return all(url.startswith("https://") for url in member.peer_urls)
    if spec.tls_off and pod.tls_mode == TLS_MODE_TLS:
        return all(url.startswith("http://") for url in member.peer_urls)
    return False


def peer_url_change(target_url: str, member: Member) -> str:
    """The peer URL to give the member (`member update`) before it restarts on its volume with
    another peer scheme; "" when its URLs already have the target's scheme."""
    scheme = target_url.split("://", 1)[0]
    if member.peer_urls and all(url.startswith(f"{scheme}://") for url in member.peer_urls):
        return ""
    return target_url
