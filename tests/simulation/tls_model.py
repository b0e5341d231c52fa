"""spec.TLS.issued in the world: real Secrets, written as acting.py writes them (the planner parses
them, CA rotation annotations included), and beside each (`World.secret_cas`, derived from the
Secret's own PEMs) the CA that signed its certificate and the CAs its CA file trusts. A member
loads its trust only when its etcd starts (etcd reads its CA files once): it accepts a client
certificate only from a CA its server Secret's CA file held then, and a peer only with a
certificate from a CA its peer Secret's CA file held then. Certificates are read at every
handshake (the current Secret). The operator and the clients use the operator Secret as it is
now: its certificate, and its CA file to verify the members' server certificate."""
from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.serialization import Encoding

from etcd_common.api import constants as c
from etcd_common.api.issued_tls import (
    CA_CERT_KEY,
    CA_KEY_KEY,
    NEXT_CA_CERT_KEY,
    NEXT_CA_KEY_KEY,
    PREVIOUS_CA_CERT_KEY,
    issued_secret_names,
)
from etcd_operator import actions as a
from etcd_operator.observed import ObservedCluster, format_timestamp
from etcd_operator.tls import certificates as certs
from tests.simulation.world import Pod, Refused, World


def fingerprint(pem: bytes) -> str:
    return certs.trust_fingerprint(pem)


def fingerprints(pem: bytes) -> frozenset[str]:
    return frozenset(fingerprint(cert.public_bytes(Encoding.PEM)) for cert in certs.certificates_in(pem))


def identity(world: World) -> certs.Identity:
    return certs.Identity(world.cluster.name, world.cluster.namespace, world.spec.pod.cluster_domain)


def _derive(world: World, role: str) -> tuple[str, frozenset[str]]:
    """(the fingerprint of the CA that signed the Secret's certificate, the CAs its CA file holds)."""
    secret = world.secrets[role]
    files = certs.secret_files(secret)
    if role == "ca":
        return fingerprint(files.get(CA_CERT_KEY, b"")), fingerprints(certs.trust_bundle(secret))
    cert_key, _, ca_key = certs.LEAF_KEYS[role]  # type: ignore[index]
    leaf = certs.certificates_in(files.get(cert_key, b""))
    signer = next((fp for fp, pem in world.known_cas.items()
                   if leaf and certs.signed_by(leaf[0], certs.certificates_in(pem)[0])), "")
    return signer, fingerprints(files.get(ca_key, b""))


def _write(world: World, role: str, data: dict[str, str | None], annotations: dict[str, str | None] | None = None,
           *, replace: bool = False, create: bool = True) -> None:
    """Create the Secret, or merge-patch its data (None deletes a key; `replace`: keys not in
    `data` go, as ActionExecutor._write_secret does) and annotations."""
    existing = world.secrets.get(role)
    if existing is None and not create:
        raise Refused(f"secret {identity(world).secret_name(role)} is gone; the next pass issues it")  # type: ignore[arg-type]
    metadata = (existing or {}).get("metadata") or {
        "name": identity(world).secret_name(role), "namespace": world.cluster.namespace,  # type: ignore[arg-type]
        "labels": {c.LABEL_CLUSTER: world.cluster.name},
        "ownerReferences": [{"kind": c.KIND, "name": world.cluster.name, "uid": world.uid}]}
    old = dict((existing or {}).get("data") or {})
    merged = {**({} if replace else old), **data}
    kept = {**(metadata.get("annotations") or {}), **(annotations or {})}
    metadata = {**metadata, "resourceVersion": str(int(metadata.get("resourceVersion", "0")) + 1),
                "annotations": {k: v for k, v in kept.items() if v is not None}}
    world.secrets[role] = {"metadata": metadata, "data": {k: v for k, v in merged.items() if v is not None}}
    world.secret_cas[role] = _derive(world, role)


def _refuse(why: str) -> Any:
    def write() -> None:
        raise Refused(why)
    return write


def _new_ca(world: World) -> certs.KeyPair:
    issued = world.spec.issued_tls
    assert issued is not None
    ca = certs.issue_ca(identity(world), world.observed_at, issued.ca_validity_seconds)
    world.known_cas[fingerprint(ca.cert_pem)] = ca.cert_pem
    return ca


def _leaf(world: World, role: str, ca: certs.KeyPair) -> certs.KeyPair:
    issued = world.spec.issued_tls
    assert issued is not None
    return certs.issue_leaf(ca, identity(world), role, world.observed_at, issued.validity_seconds)  # type: ignore[arg-type]


def issue(world: World, roles: tuple[str, ...]) -> None:
    """What ActionExecutor._issue_certificates writes, at the world's time."""
    ca_secret = world.secrets.get("ca")
    if "ca" in roles or ca_secret is None:
        ca = _new_ca(world)
        roles, trust = certs.ROLES, ca.cert_pem
    else:
        ca = certs.ca_from_secret(ca_secret)
        trust = certs.trust_bundle(ca_secret)
    for role in certs.ROLES:
        if role in roles:
            pair = ca if role == "ca" else _leaf(world, role, ca)
            _write(world, role, certs.secret_data(role, pair, ca, trust), replace=True)  # type: ignore[arg-type]


def issue_certificates(world: World, action: a.IssueCertificates, observed: ObservedCluster) -> list[Any]:
    return [("write issued secrets", lambda: issue(world, action.roles))]


def adopt_ca(world: World, action: a.AdoptCA, observed: ObservedCluster) -> list[Any]:
    def write() -> None:
        world.secrets["ca"]["metadata"]["ownerReferences"] = [{"kind": c.KIND, "name": world.cluster.name,
                                                               "uid": world.uid}]
    return [("adopt ca", write)]


def _published(world: World) -> dict[str, str | None]:
    return {c.ANNOTATION_TRUST_PUBLISHED_AT: format_timestamp(world.observed_at)}


def publish_trust(world: World, action: a.PublishCATrust, observed: ObservedCluster) -> list[Any]:
    """ActionExecutor._publish_ca_trust: the CA file of the leaf Secrets of `action.roles`."""
    def write() -> None:
        trust = certs.trust_bundle(world.secrets.get("ca"))
        for role in certs.LEAF_ROLES:
            if role in action.roles:
                _write(world, role, certs.encode({certs.LEAF_KEYS[role][2]: trust}), _published(world), create=False)
    return [("publish trust", write)]


def start_rotation(world: World, action: a.StartCARotation, observed: ObservedCluster) -> list[Any]:
    """ActionExecutor._start_ca_rotation: a new CA as next-ca beside the signing one; a lost CA
    (`recovered_ca`): the CA Secret written again with the lost CA's certificate (no key)."""
    def write() -> None:
        new = _new_ca(world)
        incoming = {NEXT_CA_CERT_KEY: new.cert_pem, NEXT_CA_KEY_KEY: new.key_pem}
        annotations = {c.ANNOTATION_CA_ROTATION_REQUEST: action.request or None,
                       c.ANNOTATION_CA_ROTATION_STARTED_AT: format_timestamp(world.observed_at)}
        if action.recovered_ca:
            _write(world, "ca", certs.encode({CA_CERT_KEY: action.recovered_ca.encode(), **incoming}), annotations,  # type: ignore[arg-type]
                   replace=True)
        else:
            _write(world, "ca", certs.encode(incoming), annotations, create=False)  # type: ignore[arg-type]
    return [("write ca secret", write)]


def reissue_from_new_ca(world: World, action: a.ReissueFromNewCA, observed: ObservedCluster) -> list[Any]:
    """ActionExecutor._reissue_from_new_ca: the new CA signs, the old one stays as previous-ca;
    then every leaf from the new CA (a crash may stop in between)."""
    ca_secret = world.secrets.get("ca")
    new = certs.next_ca_from_secret(ca_secret)
    if ca_secret is None or new is None:
        return [("patch ca secret", _refuse("ReissueFromNewCA without an incoming CA"))]
    old = certs.ca_from_secret(ca_secret)
    trust = new.cert_pem.strip() + b"\n" + old.cert_pem.strip() + b"\n"
    writes: list[Any] = [("patch ca secret", lambda: _write(world, "ca", {
        **certs.encode({CA_CERT_KEY: new.cert_pem, CA_KEY_KEY: new.key_pem, PREVIOUS_CA_CERT_KEY: old.cert_pem}),
        NEXT_CA_CERT_KEY: None, NEXT_CA_KEY_KEY: None}, create=False))]
    for role in certs.LEAF_ROLES:
        writes.append((f"write {role} secret", lambda role=role: _write(  # type: ignore[misc]
            world, role, certs.secret_data(role, _leaf(world, role, new), new, trust), replace=True)))
    return writes


def drop_old_ca(world: World, action: a.DropOldCA, observed: ObservedCluster) -> list[Any]:
    """ActionExecutor._drop_old_ca: previous-ca leaves the CA Secret, then the leaf CA files."""
    ca_secret = world.secrets.get("ca")
    if ca_secret is None:
        return [("patch ca secret", _refuse(f"secret {identity(world).secret_name('ca')} is gone"))]
    signing = certs.ca_from_secret(ca_secret).cert_pem
    writes: list[Any] = [("patch ca secret", lambda: _write(world, "ca", {PREVIOUS_CA_CERT_KEY: None}, create=False))]
    for role in certs.LEAF_ROLES:
        writes.append((f"patch {role} secret", lambda role=role: _write(  # type: ignore[misc]
            world, role, certs.encode({certs.LEAF_KEYS[role][2]: signing}), _published(world), create=False)))
    return writes


def mount(world: World, pod: Pod) -> None:
    """A new member pod mounts the peer and server Secrets; the operator records the CAs they
    hold (its trusted-ca annotation, as acting.py does). Its etcd loads them when it starts."""
    if world.spec.issued_tls is None or not world.secrets:
        return
    names = issued_secret_names(world.cluster.name)
    pod.secret_volumes = frozenset({names.peer, names.server})
    pod.trusted_ca = certs.mounted_trust_fingerprint(world.secrets)


def load_trust(world: World, pod: Pod) -> bool:
    """Its etcd starts: it trusts the CAs the mounted server and peer Secrets hold now. False:
    it cannot start (a Secret it mounts is missing and it never ran: the volume cannot be set up)."""
    if world.spec.issued_tls is None or not pod.secret_volumes:
        return True
    if "server" not in world.secret_cas or "peer" not in world.secret_cas:
        return pod.started  # a restart keeps the files the volume last had
    pod.trusts, pod.peer_trusts = world.secret_cas["server"][1], world.secret_cas["peer"][1]
    return True


def lose_ca(world: World) -> str:
    world.secrets.pop("ca", None)
    world.secret_cas.pop("ca", None)
    return "the CA Secret was deleted"
