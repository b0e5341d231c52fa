"""Read-only questions to etcd over its own HTTP endpoints, from this process: member list and
member status through etcd's gRPC gateway (`POST /v3/cluster/member/list`,
`POST /v3/maintenance/status`), health through a linearizable read (`POST /v3/kv/range`) and the alarms a member's status
reports, as etcdctl checks it (but without the alarm API, which writes to the raft log), and a
member's view of its peers from its Prometheus `/metrics` (peer_metrics.py).

Every supervisor pass asks these; an etcdctl process per question would cost a Go program's
start-up each time (tens of milliseconds of CPU) and make an idle operator's CPU grow with its
clusters. Answers are the etcdctl wrapper's result types and failures its error classes, so
callers treat both alike. Membership changes stay with etcdctl (`etcd_common.etcd.etcdctl`).
"""
from __future__ import annotations

import base64
import functools
import http.client
import json
import logging
import ssl
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit

from etcd_common.etcd.etcdctl import (
    Etcdctl,
    EtcdctlError,
    classify_error,
    foreign_cluster_error,
    header_cluster_id,
    parse_hash_kv_answer,
    parse_member_list_answer,
    unreachable_status,
)
from etcd_common.etcd.peer_metrics import PeerView, parse_peer_view
from etcd_common.etcd.types import ClientTLS, EndpointHealth, EndpointStatus, HashKV, Member, MemberList

log = logging.getLogger(__name__)

MEMBER_LIST_PATH = "/v3/cluster/member/list"
STATUS_PATH = "/v3/maintenance/status"
RANGE_PATH = "/v3/kv/range"
HASH_KV_PATH = "/v3/maintenance/hashkv"
METRICS_PATH = "/metrics"
# etcdctl's health check reads the key "health" (base64 below), linearizable (the default).
HEALTH_READ_REQUEST = {"key": "aGVhbHRo"}
# etcd answers `member list` from its local view unless asked for a linearizable one; etcdctl
# (clientv3) asks for a linearizable list since 3.5, and so do we: a member cut off from the
# leader must not be believed.
MEMBER_LIST_REQUEST = {"linearizable": True}
# A member's own view (served without quorum): who answers at an address (`local_member_lists`).
LOCAL_MEMBER_LIST_REQUEST: dict[str, Any] = {}
# A check of a member list answer: why it must not be taken from that endpoint (None: take it).
AnswerCheck = Callable[[str, MemberList], str | None]
T = TypeVar("T")


class PermissionDenied(EtcdctlError):
    """The request was refused for want of permission (etcd auth is on)."""


@functools.lru_cache(maxsize=256)
def _ssl_context(ca_file: str, cert_file: str, key_file: str) -> ssl.SSLContext:
    """One context per certificate set (loading certificates costs more than a request).
    A rotated certificate is written to a new directory, so it gets a context of its own."""
    context = ssl.create_default_context(cafile=ca_file)
    context.load_cert_chain(cert_file, key_file)
    return context


class EtcdProbe:
    """Member list, status, health and peer views of a cluster's client endpoints, over HTTP(S)."""

    def __init__(self, endpoints: Sequence[str], *, tls: ClientTLS | None = None,
                 timeout_seconds: float = 2.0, etcdctl_binary: str | None = None) -> None:
        if isinstance(endpoints, str):
            raise TypeError("endpoints must be a sequence of URLs, not one string")
        self.endpoints: tuple[str, ...] = tuple(dict.fromkeys(endpoints))
        if not self.endpoints:
            raise ValueError("a probe needs at least one endpoint")
        self.tls = tls
        self.timeout_seconds = timeout_seconds
        self.etcdctl_binary = etcdctl_binary  # asked over gRPC when the gateway cannot be (`ask_over_grpc`)

    def __repr__(self) -> str:
        return f"EtcdProbe(endpoints={list(self.endpoints)!r})"

    # --- the questions

    def member_list(self) -> list[Member]:
        """The member list from the first endpoint that gives one (see `cluster_members`)."""
        return list(self.cluster_members().members)

    def cluster_members(self, check: AnswerCheck | None = None) -> MemberList:
        """The member list, with the ID of the cluster that answered it, from the first endpoint
        that gives one (a learner, or a member without a leader, refuses) and that `check` accepts
        (a reused name or address may reach another etcd cluster's member); raises the last
        endpoint's error if none does."""
        error: EtcdctlError | None = None
        for endpoint in self.endpoints:
            try:
                answer = parse_member_list_answer(self._request(endpoint, "POST", MEMBER_LIST_PATH, MEMBER_LIST_REQUEST))
            except EtcdctlError as e:
                error = e
                continue
            except (ValueError, KeyError) as e:
                error = EtcdctlError(f"{endpoint}: unreadable member list: {e}")
                continue
            problem = check(endpoint, answer) if check is not None else None
            if problem is None:
                return answer
            error = EtcdctlError(f"{endpoint}: {problem}")
        assert error is not None
        raise error

    def local_member_lists(self) -> list[MemberList | EtcdctlError]:
        """Each endpoint's own member list (not linearizable, so served without quorum too), in
        endpoint order: which member of which cluster answers at each address."""
        return self._each(self._local_list_of)

    def endpoint_status(self, cluster_id: int = 0) -> list[EndpointStatus]:
        """Status of every endpoint, in endpoint order; one that does not answer is reported
        (member_id 0, the failure in `errors`), and so is one that answers for another cluster
        than `cluster_id` (0: any). Raises only if none answered."""
        outcomes = self._each(functools.partial(self._status_of, cluster_id=cluster_id))
        if all(isinstance(outcome, EtcdctlError) for outcome in outcomes):
            first = outcomes[0]
            assert isinstance(first, EtcdctlError)
            raise first
        return [outcome if isinstance(outcome, EndpointStatus) else unreachable_status(endpoint, outcome.message)
                for endpoint, outcome in zip(self.endpoints, outcomes)]

    def endpoint_health(self, cluster_id: int = 0) -> list[EndpointHealth]:
        """Health of every endpoint, in endpoint order: a linearizable read answers (through the
        leader). Unlike `etcdctl endpoint health`, raised alarms do not make an endpoint unhealthy:
        a NOSPACE cluster still serves reads and has its quorum, and the operator must tell that
        apart from a lost quorum. Alarms are in `endpoint_status()` (`EndpointStatus.alarms`), a
        local read: not the alarm API, whose every call (even a list) is a raft proposal. One log
        entry per health check soon has the leader send each new member a snapshot instead of log
        entries, and a new etcd 3.6 member that receives one right after it started loses its first
        attempt to publish itself and serves no client until etcd's 7 s request timeout retries it.

        Not etcd's `/health`: etcd 3.4 serves it with a v2 QGET through the raft log, which an
        etcd 3.6 member replaying that log refuses (see tests/integration/etcdctl).

        An endpoint that answers for another cluster than `cluster_id` (0: any) is unhealthy:
        a reused name or address may reach a member of another etcd cluster."""
        return self._each(functools.partial(self._read_of, cluster_id=cluster_id))

    def peer_views(self) -> list[PeerView | EtcdctlError]:
        """Each endpoint's view of its peers (`etcd_network_active_peers` from its `/metrics`), in
        endpoint order; one that does not answer, or answers unreadably, gives its error."""
        return self._each(self._peer_view_of)

    def hash_kvs(self, revision: int, cluster_id: int = 0) -> list[HashKV | EtcdctlError]:
        """Each endpoint's keyspace hash at `revision` (`etcdctl endpoint hashkv --rev`), in
        endpoint order; one that does not answer, or answers for another cluster than `cluster_id`
        (0: any), gives its error. A read of the member's own store, served under any alarm."""
        return self._each(functools.partial(self._hash_kv_of, revision=revision, cluster_id=cluster_id))

    # --- one endpoint

    def _hash_kv_of(self, endpoint: str, revision: int, cluster_id: int = 0) -> HashKV | EtcdctlError:
        try:
            document = self._request(endpoint, "POST", HASH_KV_PATH, {"revision": revision})
            answer = parse_hash_kv_answer(document, revision)
            foreign = foreign_cluster_error(header_cluster_id(document), cluster_id)
        except EtcdctlError as e:
            return e
        except (ValueError, KeyError) as e:
            return EtcdctlError(f"{endpoint}: unreadable hashkv: {e}")
        return EtcdctlError(f"{endpoint}: {foreign}") if foreign else answer

    def _peer_view_of(self, endpoint: str) -> PeerView | EtcdctlError:
        try:
            return parse_peer_view(metrics_text(endpoint, tls=self.tls, timeout_seconds=self.timeout_seconds))
        except EtcdctlError as e:
            return e
        except ValueError as e:
            return EtcdctlError(f"{endpoint}: unreadable metrics: {e}")

    def _status_of(self, endpoint: str, cluster_id: int = 0) -> EndpointStatus | EtcdctlError:
        try:
            status = parse_status(endpoint, self._request(endpoint, "POST", STATUS_PATH, {}))
        except EtcdctlError as e:
            return e
        except (ValueError, KeyError) as e:
            return EtcdctlError(f"{endpoint}: unreadable status: {e}")
        foreign = foreign_cluster_error(status.cluster_id, cluster_id)
        return EtcdctlError(f"{endpoint}: {foreign}") if foreign else status

    def _local_list_of(self, endpoint: str) -> MemberList | EtcdctlError:
        try:
            return parse_member_list_answer(self._request(endpoint, "POST", MEMBER_LIST_PATH, LOCAL_MEMBER_LIST_REQUEST))
        except EtcdctlError as e:
            return e
        except (ValueError, KeyError) as e:
            return EtcdctlError(f"{endpoint}: unreadable member list: {e}")

    def _read_of(self, endpoint: str, cluster_id: int = 0) -> EndpointHealth:
        try:
            health = parse_health_read(endpoint, self._request(endpoint, "POST", RANGE_PATH, HEALTH_READ_REQUEST))
        except PermissionDenied:
            # With auth on, a refused read still went through raft (etcdctl counts it healthy);
            # the refusal carries no header, so its cluster is not known.
            return EndpointHealth(endpoint=endpoint, healthy=True, error="")
        except EtcdctlError as e:
            return EndpointHealth(endpoint=endpoint, healthy=False, error=e.message)
        except (ValueError, KeyError) as e:
            return EndpointHealth(endpoint=endpoint, healthy=False, error=f"unreadable health read: {e}")
        foreign = foreign_cluster_error(health.cluster_id, cluster_id)
        if foreign:
            return EndpointHealth(endpoint=endpoint, healthy=False, error=foreign, cluster_id=health.cluster_id)
        return health

    def _each(self, ask: Callable[[str], T]) -> list[T]:
        """`ask` each endpoint, all at once: a member that does not answer costs one timeout."""
        if len(self.endpoints) == 1:
            return [ask(self.endpoints[0])]
        with ThreadPoolExecutor(max_workers=len(self.endpoints), thread_name_prefix="etcd-probe") as pool:
            return list(pool.map(ask, self.endpoints))

    def _request(self, endpoint: str, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        try:
            return gateway_request(endpoint, method, path, body, tls=self.tls, timeout_seconds=self.timeout_seconds)
        except EtcdctlError as e:
            if not gateway_cannot_dial_itself(e) or path not in GRPC_QUESTIONS:
                raise
            log.debug("%s: etcd's gateway cannot dial its own gRPC port (%s); asking over gRPC", endpoint, e.message)
            return ask_over_grpc(endpoint, path, body, tls=self.tls, timeout_seconds=self.timeout_seconds,
                                 binary=self.etcdctl_binary)


def gateway_request(endpoint: str, method: str, path: str, body: dict[str, Any] | None, *,
                    tls: ClientTLS | None, timeout_seconds: float) -> dict[str, Any]:
    """One call to a member's gRPC gateway; the answer's JSON object, or the etcdctl wrapper's
    error class for what went wrong (classified as etcdctl would)."""
    payload = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if payload is not None else {}
    status, text = _http_request(endpoint, method, path, payload, headers, tls=tls, timeout_seconds=timeout_seconds)
    try:
        document = json.loads(text) if text.strip() else {}
    except ValueError:
        document = None
    if status != 200 or not isinstance(document, dict):
        # The gateway's error body: {"error": "...", "code": <gRPC code>, "message": "..."}.
        message = (document.get("message") or document.get("error")) if isinstance(document, dict) else None
        described = message or f"HTTP {status}: {text.strip()[:200]}"
        if "permission denied" in described.lower():
            raise PermissionDenied(described)
        code = document.get("code") if isinstance(document, dict) else None
        raise classify_error(f"Error: {described}") from GatewayAnswer(status, code if isinstance(code, int) else None)
    return document


def metrics_text(endpoint: str, *, tls: ClientTLS | None, timeout_seconds: float) -> str:
    """A member's Prometheus `/metrics` (text exposition format), from its client URL."""
    status, text = _http_request(endpoint, "GET", METRICS_PATH, None, {}, tls=tls, timeout_seconds=timeout_seconds)
    if status != 200:
        raise classify_error(f"Error: {endpoint}{METRICS_PATH}: HTTP {status}: {text.strip()[:200]}")
    return text


def _http_request(endpoint: str, method: str, path: str, payload: bytes | None, headers: dict[str, str], *,
                  tls: ClientTLS | None, timeout_seconds: float) -> tuple[int, str]:
    """One HTTP(S) request to a member's client URL: (status, body); connection failures as the
    etcdctl wrapper's error classes."""
    parts = urlsplit(endpoint)
    if not parts.hostname:
        raise EtcdctlError(f"not an endpoint URL: {endpoint!r}")
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        if tls is None:
            context = ssl.create_default_context()
        else:
            context = _ssl_context(tls.ca_file, tls.cert_file, tls.key_file)
        connection = http.client.HTTPSConnection(parts.hostname, parts.port or 2379,
                                                 timeout=timeout_seconds, context=context)
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port or 2379, timeout=timeout_seconds)
    try:
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", errors="replace")
    except TimeoutError as e:
        raise classify_error(f"Error: {endpoint}: context deadline exceeded ({e})") from e
    except (OSError, http.client.HTTPException) as e:
        raise classify_error(f"Error: {endpoint}: {_connection_error(e)}") from e
    finally:
        connection.close()


def _connection_error(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, ConnectionResetError):
        return f"connection reset ({error})"
    if isinstance(error, ssl.SSLError):
        return f"TLS handshake failed ({error})"
    return str(error) or type(error).__name__


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def parse_status(endpoint: str, document: dict[str, Any]) -> EndpointStatus:
    """The gateway's `StatusResponse` (uint64 fields as JSON strings, zero values left out)."""
    header = _as_dict(document.get("header") or {}, "status: header")
    return EndpointStatus(
        endpoint=endpoint,
        member_id=int(header.get("member_id", 0)),
        leader_id=int(document.get("leader", 0)),
        version=str(document.get("version", "")),
        raft_index=int(document.get("raftIndex", 0)),
        raft_term=int(document.get("raftTerm", 0)),
        db_size=int(document.get("dbSize", 0)),
        db_size_in_use=int(document.get("dbSizeInUse", 0)),
        is_learner=bool(document.get("isLearner", False)),
        errors=tuple(str(e) for e in document.get("errors") or ()),
        revision=int(header.get("revision", 0)),
        cluster_id=header_cluster_id(document),
    )


def parse_health_read(endpoint: str, document: dict[str, Any]) -> EndpointHealth:
    """The health read's `RangeResponse`: it answered, so the endpoint is healthy (for the
    cluster in its header)."""
    return EndpointHealth(endpoint=endpoint, healthy=True, error="", cluster_id=header_cluster_id(document))


# ---------------------------------------------------------------------------------------------
# When the gateway cannot answer: the same question over gRPC (etcdctl)
#
# etcd's gRPC gateway (the JSON endpoints above) is a gRPC client of its own member: it dials the
# client port with the member's server certificate as its client certificate, and checks the
# member against the trusted CA file (`--trusted-ca-file`). In CoreOS's static TLS layout that file
# (`server-ca.crt`) is the CA of the clients, which did not sign `server.crt`: etcd refuses its own
# gateway ("remote error: tls: unknown certificate authority", measured on 3.5.35 and 3.6.16), and
# every JSON request fails, while a gRPC client with the same files (etcdctl, the members' peers)
# is served. Then, and only then, the question goes over gRPC; the gateway stays the cheap path.

# gRPC's code for Unavailable: with a message not from etcd's server ("etcdserver: no leader" is
# Unavailable too), the gateway's own connection to its member failed. The message varies with
# the moment ("remote error: tls: unknown certificate authority", "write: broken pipe", ...).
GRPC_UNAVAILABLE = 14


class GatewayAnswer(Exception):
    """The cause of an error the gateway answered (HTTP `status`, gRPC `code` if it gave one)."""

    def __init__(self, status: int, code: int | None) -> None:
        super().__init__(f"HTTP {status}, gRPC code {code}")
        self.status = status
        self.code = code
# Path -> etcdctl arguments (given the request body) and how to pick the gateway's answer out of
# etcdctl's JSON (the same protobuf fields; numbers as JSON numbers, which the parsers accept).
GRPC_QUESTIONS: dict[str, tuple[Callable[[dict[str, Any]], list[str]], Callable[[Any], Any]]] = {
    STATUS_PATH: (lambda body: ["endpoint", "status"], lambda answer: answer[0]["Status"]),
    MEMBER_LIST_PATH: (lambda body: ["member", "list"] + ([] if body.get("linearizable") else ["--consistency=s"]),
                       lambda answer: answer),
    RANGE_PATH: (lambda body: ["get", base64.b64decode(body["key"]).decode()], lambda answer: answer),
    HASH_KV_PATH: (lambda body: ["endpoint", "hashkv", f"--rev={int(body.get('revision', 0))}"],
                   lambda answer: answer[0]["HashKV"]),
}


def gateway_cannot_dial_itself(error: EtcdctlError) -> bool:
    """The gateway answered (our connection to the member works), and its own connection to the
    member's gRPC server failed (see above). Never our own TLS failure: no gateway answered it."""
    answer = error.__cause__
    return (isinstance(answer, GatewayAnswer) and answer.code == GRPC_UNAVAILABLE
            and not error.message.lower().startswith("etcdserver:"))


def ask_over_grpc(endpoint: str, path: str, body: dict[str, Any] | None, *, tls: ClientTLS | None,
                  timeout_seconds: float, binary: str | None = None) -> dict[str, Any]:
    """The gateway's answer to `path`, asked with etcdctl (gRPC) of the one `endpoint`; errors as
    `gateway_request` raises them (a refused read: PermissionDenied)."""
    arguments, pick = GRPC_QUESTIONS[path]
    etcdctl = Etcdctl([endpoint], binary=binary, tls=tls, dial_timeout_seconds=timeout_seconds,
                      command_timeout_seconds=timeout_seconds)
    try:
        output = etcdctl._run(arguments(body or {}))
    except EtcdctlError as e:
        if "permission denied" in e.message.lower():
            raise PermissionDenied(e.message) from e
        raise
    try:
        document = pick(json.loads(output))
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise EtcdctlError(f"{endpoint}: unreadable etcdctl answer to {path}: {e}") from e
    return _as_dict(document, f"etcdctl answer to {path}")
