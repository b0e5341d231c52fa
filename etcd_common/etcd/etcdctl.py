"""The operator's only etcd client: runs `etcdctl` (v3 API, JSON output) and `etcdutl` (offline
snapshot files), and maps their errors.

etcdctl rather than a gRPC library: it is what etcd ships and tests against every release, and
its failures are plain text we can classify into a few exception classes the planner acts on
("unhealthy cluster" = retry later, "member not found" on remove = already done). One etcdctl
serves every etcd the operator runs: the 3.6 etcdctl (the default, see `default_binary`) speaks
to 3.4, 3.5 and 3.6 servers alike for every call made here (tests/integration/etcdctl proves it).
Snapshot files are read and restored with etcdutl: etcdctl 3.6 no longer has `snapshot status`/`restore`.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from etcd_common.etcd.types import (
    ClientTLS,
    EndpointHealth,
    EndpointStatus,
    HashKV,
    Member,
    MemberList,
    SnapshotStatus,
    format_member_id,
)

logger = logging.getLogger(__name__)

BINARY_ENV = "ETCDCTL_BINARY"
ETCDUTL_BINARY_ENV = "ETCDUTL_BINARY"
ETCD_BINARY_ENV = "ETCD_BINARY"
# Beyond etcdctl's own dial and command timeouts, how long we let the process run before
# killing it (it may hang in ways its own timeouts do not cover, e.g. a frozen server mid-TLS).
SUBPROCESS_GRACE_SECONDS = 5.0


# ---------------------------------------------------------------------------------------------
# Errors


class EtcdctlError(Exception):
    """etcdctl failed; `command` is what ran and `stderr` what it said."""

    def __init__(self, message: str, *, command: Sequence[str] = (), stderr: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.command = tuple(command)
        self.stderr = stderr


class ClusterUnhealthy(EtcdctlError):
    """The cluster refuses a membership change for now (not all members connected long
    enough, not enough started members, no leader): retry later."""


class NoLeader(ClusterUnhealthy):
    """The member answering has no leader (election in progress, or quorum lost)."""


class MemberNotFound(EtcdctlError):
    pass


class PeerURLExists(EtcdctlError):
    """A member with this peer URL is already in the cluster (maybe an earlier add that
    timed out on our side)."""


class TooManyLearners(EtcdctlError):
    pass


class LearnerNotReady(EtcdctlError):
    """The learner has not caught up with the leader yet: promote again later."""


class MemberNotLearner(EtcdctlError):
    """Promote of a member that is already a voting member."""


class Unreachable(EtcdctlError):
    """No answer in time: dial or command deadline exceeded, connection refused, or etcdctl
    itself had to be killed."""


class ClientTLSUnavailable(EtcdctlError):
    """The client certificate of a cluster serving TLS cannot be had (its secret is missing,
    incomplete or unreadable): its etcd cannot be reached until it can."""


class NotLeader(EtcdctlError):
    """The request needs the leader and the endpoint asked is not (or none is among the
    endpoints)."""


class LeaderChanged(EtcdctlError):
    pass


class SnapshotInvalid(EtcdctlError):
    """The snapshot file is not a readable etcd database (truncated, corrupt, not a snapshot)."""


# Checked in order: the first fragment found in etcdctl's error text decides the class.
# "learner member which is in sync" must come before the shorter "promote a learner member".
_ERROR_FRAGMENTS: tuple[tuple[str, type[EtcdctlError]], ...] = (
    ("member not found", MemberNotFound),
    ("peer urls already exists", PeerURLExists),
    # etcd derives a new member's id from its peer URLs and the current second: the same peer
    # URL added twice within one second collides on the id before the URL check is reached.
    ("member id already exist", PeerURLExists),
    ("too many learner members", TooManyLearners),
    ("learner member which is in sync with leader", LearnerNotReady),
    ("can only promote a learner member", MemberNotLearner),
    ("unhealthy cluster", ClusterUnhealthy),
    ("not enough started members", ClusterUnhealthy),
    ("no leader", NoLeader),
    ("not leader", NotLeader),
    ("leader changed", LeaderChanged),
    ("invalid database", SnapshotInvalid),
    # bbolt's answer for a file shorter than its two meta pages (etcdutl `snapshot status`).
    ("file size too small", SnapshotInvalid),
    ("snapshot file integrity check failed", SnapshotInvalid),
    # `snapshot restore` of a file without the hash etcd appends to every snapshot it sends.
    ("snapshot missing hash", SnapshotInvalid),
    ("context deadline exceeded", Unreachable),
    ("deadlineexceeded", Unreachable),
    ("request timed out", Unreachable),
    ("connection refused", Unreachable),
    ("no route to host", Unreachable),
    ("i/o timeout", Unreachable),
    ("connection reset", Unreachable),
    ("error reading from server", Unreachable),
    ("transport is closing", Unreachable),
    ("all subconns are in transientfailure", Unreachable),
)


def error_message(stderr: str, *, program: str = "etcdctl") -> str:
    """The line etcdctl meant for people: its last `Error: ...` line, else the crash (a Go panic,
    or a fatal error with the signal that caused it, such as SIGBUS reading a truncated file),
    else the last line.

    etcdctl also logs client-side retry warnings as JSON lines on stderr; they are noise
    unless nothing else was said.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("Error:"):
            return line[len("Error:"):].strip()
    crash = _crash_lines(lines)
    if crash:
        return f"{program} crashed: {crash}"
    for line in reversed(lines):
        if not line.startswith("{"):
            return line
    return lines[-1] if lines else ""


def _crash_lines(lines: Sequence[str]) -> str:
    """A Go program's crash headline (`panic: ...` or `fatal error: ...`) and its `[signal ...]`."""
    headline = next((line for line in lines if line.startswith(("panic:", "fatal error:"))), "")
    if not headline:
        return ""
    signal = next((line for line in lines if line.startswith("[signal ")), "")
    return f"{headline} {signal}" if signal else headline


def crashed(stderr: str) -> bool:
    """Did the Go program die (panic, fatal error) rather than report an error?"""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return not any(line.startswith("Error:") for line in lines) and bool(_crash_lines(lines))


def classify_error(stderr: str, *, command: Sequence[str] = ()) -> EtcdctlError:
    """Map etcdctl's (or etcdutl's) error output to the exception class the caller acts on."""
    program = os.path.basename(command[0]) if command else "etcdctl"
    message = error_message(stderr, program=program) or f"{program} failed without a message"
    lowered = message.lower()
    for fragment, error_class in _ERROR_FRAGMENTS:
        if fragment in lowered:
            return error_class(message, command=command, stderr=stderr)
    # The headline may be generic while the retry warnings carry the gRPC cause.
    lowered_all = stderr.lower()
    for fragment, error_class in _ERROR_FRAGMENTS:
        if error_class is Unreachable and fragment in lowered_all:
            return Unreachable(message, command=command, stderr=stderr)
    return EtcdctlError(message, command=command, stderr=stderr)


# ---------------------------------------------------------------------------------------------
# Parsing etcdctl's JSON output (pure; unit-tested with captured output)


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(str(item) for item in value)


def parse_member(raw: Mapping[str, Any]) -> Member:
    return Member(
        id=int(raw["ID"]),
        name=str(raw.get("name") or ""),
        peer_urls=_strings(raw.get("peerURLs")),
        client_urls=_strings(raw.get("clientURLs")),
        is_learner=bool(raw.get("isLearner", False)),
    )


def parse_member_list(output: str) -> list[Member]:
    return list(parse_member_list_answer(_as_dict(json.loads(output), "member list")).members)


def parse_member_list_answer(document: Mapping[str, Any]) -> MemberList:
    """A `MemberListResponse` (etcdctl's JSON or the gateway's: the same fields)."""
    return MemberList(
        members=tuple(parse_member(_as_dict(raw, "member")) for raw in document.get("members") or []),
        cluster_id=header_cluster_id(document),
        member_id=int(_as_dict(document.get("header") or {}, "header").get("member_id", 0)),
    )


def header_cluster_id(document: Mapping[str, Any]) -> int:
    """`header.cluster_id` of an etcd answer (a uint64, a JSON string from the gateway); 0 if absent."""
    header = _as_dict(document.get("header") or {}, "header")
    return int(header.get("cluster_id", 0))


def foreign_cluster_error(answered_id: int, cluster_id: int) -> str | None:
    """Why an answer must be ignored: it came from another etcd cluster than `cluster_id` (a reused
    DNS name or address). None when it is this cluster's, or either ID is unknown (0)."""
    if not answered_id or not cluster_id or answered_id == cluster_id:
        return None
    return (f"answers for etcd cluster {format_member_id(answered_id)}, "
            f"not this cluster's {format_member_id(cluster_id)}")


def parse_member_add(output: str) -> Member:
    document = _as_dict(json.loads(output), "member add")
    return parse_member(_as_dict(document.get("member"), "member add: member"))


def parse_endpoint_status(output: str) -> list[EndpointStatus]:
    entries = json.loads(output)
    if not isinstance(entries, list):
        raise ValueError("endpoint status: expected a JSON list")
    statuses = []
    for entry in entries:
        entry = _as_dict(entry, "endpoint status entry")
        status = _as_dict(entry.get("Status"), "endpoint status: Status")
        header = _as_dict(status.get("header") or {}, "endpoint status: header")
        statuses.append(
            EndpointStatus(
                endpoint=str(entry.get("Endpoint", "")),
                member_id=int(header.get("member_id", 0)),
                leader_id=int(status.get("leader", 0)),
                version=str(status.get("version", "")),
                raft_index=int(status.get("raftIndex", 0)),
                raft_term=int(status.get("raftTerm", 0)),
                db_size=int(status.get("dbSize", 0)),
                db_size_in_use=int(status.get("dbSizeInUse", 0)),
                is_learner=bool(status.get("isLearner", False)),
                errors=_strings(status.get("errors")),
                revision=int(header.get("revision", 0)),
                cluster_id=header_cluster_id(status),
            )
        )
    return statuses


def parse_endpoint_health(output: str) -> list[EndpointHealth]:
    entries = json.loads(output)
    if not isinstance(entries, list):
        raise ValueError("endpoint health: expected a JSON list")
    results = []
    for entry in entries:
        entry = _as_dict(entry, "endpoint health entry")
        results.append(
            EndpointHealth(
                endpoint=str(entry.get("endpoint", "")),
                healthy=bool(entry.get("health", False)),
                error=str(entry.get("error") or ""),
            )
        )
    return results


def parse_get_value(output: str) -> str | None:
    document = _as_dict(json.loads(output), "get")
    kvs = document.get("kvs") or []
    if not kvs:
        return None
    encoded = _as_dict(kvs[0], "get: kv").get("value") or ""
    return base64.b64decode(encoded).decode("utf-8")


def parse_key_count(output: str) -> int:
    """The `count` of `etcdctl get -w json` (absent when zero)."""
    return int(_as_dict(json.loads(output), "get").get("count", 0))


def parse_hash_kv(output: str) -> HashKV:
    answers = json.loads(output)
    if not isinstance(answers, list) or len(answers) != 1:
        raise ValueError(f"endpoint hashkv: expected one answer, got {answers!r}")
    document = _as_dict(_as_dict(answers[0], "endpoint hashkv").get("HashKV"), "endpoint hashkv: HashKV")
    return parse_hash_kv_answer(document)


def parse_hash_kv_answer(document: Mapping[str, Any], revision: int = 0) -> HashKV:
    """A `HashKVResponse` (etcdctl's JSON, or the gateway's: uint64s as strings, zero values left
    out). etcd 3.5 does not report `hash_revision`: it is then the revision asked (0: unknown)."""
    return HashKV(hash=int(document.get("hash", 0)), compact_revision=int(document.get("compact_revision", 0)),
                  hash_revision=int(document.get("hash_revision", 0)) or revision)


def parse_snapshot_status(output: str) -> SnapshotStatus:
    document = _as_dict(json.loads(output), "snapshot status")
    return SnapshotStatus(
        hash=int(document.get("hash", 0)),
        revision=int(document.get("revision", 0)),
        total_keys=int(document.get("totalKey", 0)),
        total_size=int(document.get("totalSize", 0)),
        storage_version=str(document.get("version") or ""),
    )


def unreachable_status(endpoint: str, error: str) -> EndpointStatus:
    return EndpointStatus(
        endpoint=endpoint,
        member_id=0,
        leader_id=0,
        version="",
        raft_index=0,
        raft_term=0,
        db_size=0,
        is_learner=False,
        errors=(error,),
    )


# ---------------------------------------------------------------------------------------------
# Running etcdctl


def default_binary() -> str:
    """$ETCDCTL_BINARY, else the etcdctl installed next to this Python (in our virtualenv, the
    3.6 build), else the one on PATH (in the operator image, the 3.6 release's)."""
    return _find_program("etcdctl", BINARY_ENV)


def default_etcdutl_binary() -> str:
    """$ETCDUTL_BINARY, else the etcdutl next to this Python, else the one on PATH."""
    return _find_program("etcdutl", ETCDUTL_BINARY_ENV)


def default_etcd_binary() -> str:
    """$ETCD_BINARY, else the etcd next to this Python, else the one on PATH (the backup
    operator's trial restores run one, throwaway, on a restored snapshot)."""
    return _find_program("etcd", ETCD_BINARY_ENV)


def _find_program(name: str, environment_variable: str) -> str:
    configured = os.environ.get(environment_variable)
    if configured:
        return configured
    beside_python = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(beside_python, os.X_OK):
        return beside_python
    return shutil.which(name) or name


def _go_duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def _etcdctl_environment() -> dict[str, str]:
    # Flags carry all configuration; stray ETCDCTL_* variables (e.g. ETCDCTL_ENDPOINTS) in the
    # operator's environment must not change what we talk to.
    environment = {key: value for key, value in os.environ.items() if not key.startswith("ETCDCTL_")}
    environment["ETCDCTL_API"] = "3"
    return environment


class Etcdctl:
    """etcdctl bound to a cluster's client endpoints (and TLS files, if any)."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        binary: str | None = None,
        tls: ClientTLS | None = None,
        dial_timeout_seconds: float = 2.0,
        command_timeout_seconds: float = 5.0,
    ) -> None:
        if isinstance(endpoints, str):
            raise TypeError("endpoints must be a sequence of URLs, not one string")
        self.endpoints: tuple[str, ...] = tuple(dict.fromkeys(endpoints))
        if not self.endpoints:
            raise ValueError("etcdctl needs at least one endpoint")
        self.binary = binary or default_binary()
        self.tls = tls
        self.dial_timeout_seconds = dial_timeout_seconds
        self.command_timeout_seconds = command_timeout_seconds

    def __repr__(self) -> str:
        return f"Etcdctl(endpoints={list(self.endpoints)!r})"

    # --- membership

    def member_list(self) -> list[Member]:
        return parse_member_list(self._run(["member", "list"]))

    def cluster_members(self) -> MemberList:
        """The member list with the ID of the etcd cluster that answered it (see `MemberList`)."""
        return parse_member_list_answer(_as_dict(json.loads(self._run(["member", "list"])), "member list"))

    def member_add(self, name: str, peer_urls: Sequence[str], *, learner: bool) -> Member:
        """Add a member; the result is its entry as etcd records it (id set, name still empty
        until the member starts)."""
        args = ["member", "add", name, "--peer-urls", ",".join(peer_urls)]
        if learner:
            args.append("--learner")
        member = parse_member_add(self._run(args))
        logger.info(
            "etcd member added: %s id=%s peer_urls=%s learner=%s (via %s)",
            name, member.hex_id, ",".join(peer_urls), learner, ",".join(self.endpoints),
        )
        return member

    def member_promote(self, member_id: int) -> None:
        """Promote a learner to a voting member. Raises LearnerNotReady until it has caught up;
        a member that is already voting counts as done."""
        try:
            # Plain output: etcdctl 3.5.1's JSON printer for promote dereferences nil and panics
            # after a successful promote (exit 2), which would read as a failure.
            self._run(["member", "promote", format_member_id(member_id)], output="simple")
        except MemberNotLearner:
            logger.info("etcd member %s is already a voting member; nothing to promote", format_member_id(member_id))
            return
        logger.info("etcd member promoted: id=%s (via %s)", format_member_id(member_id), ",".join(self.endpoints))

    def member_update(self, member_id: int, peer_urls: Sequence[str]) -> None:
        """Give a member other peer URLs (its peers dial it there from then on)."""
        self._run(["member", "update", format_member_id(member_id), "--peer-urls", ",".join(peer_urls)],
                  output="simple")
        logger.info("etcd member updated: id=%s peer_urls=%s (via %s)", format_member_id(member_id),
                    ",".join(peer_urls), ",".join(self.endpoints))

    def member_remove(self, member_id: int) -> None:
        """Remove a member; one that is not there (already removed) counts as done."""
        try:
            self._run(["member", "remove", format_member_id(member_id)], output="simple")
        except MemberNotFound:
            logger.info("etcd member %s not found: already removed", format_member_id(member_id))
            return
        logger.info("etcd member removed: id=%s (via %s)", format_member_id(member_id), ",".join(self.endpoints))

    def move_leader(self, target_member_id: int) -> None:
        """Hand leadership to `target_member_id`. The current leader must be among the
        endpoints; it is found first so that a dead endpoint does not fail the move."""
        statuses = self.endpoint_status()
        leaders = [status for status in statuses if status.is_leader]
        if not leaders:
            raise NotLeader(
                f"no leader among endpoints {list(self.endpoints)}",
                command=("move-leader", format_member_id(target_member_id)),
            )
        leader = leaders[0]
        if leader.member_id == target_member_id:
            logger.info("etcd member %s is already the leader", format_member_id(target_member_id))
            return
        self._run(["move-leader", format_member_id(target_member_id)], endpoints=[leader.endpoint], output="simple")
        logger.info(
            "etcd leadership moved: %s -> %s (via %s)",
            format_member_id(leader.member_id), format_member_id(target_member_id), leader.endpoint,
        )

    # --- health

    def endpoint_status(self) -> list[EndpointStatus]:
        """Status of every endpoint, in endpoint order. Endpoints that do not answer are
        reported (member_id 0, the failure in `errors`); raises only if none answered.

        etcdctl exits non-zero when any endpoint fails, so each endpoint gets its own etcdctl
        run, all at once: a dead member costs one command timeout, not one per member.
        """
        with ThreadPoolExecutor(max_workers=len(self.endpoints), thread_name_prefix="etcdctl-status") as pool:
            outcomes = list(pool.map(self._status_of, self.endpoints))
        if all(isinstance(outcome, EtcdctlError) for outcome in outcomes):
            first_error = outcomes[0]
            assert isinstance(first_error, EtcdctlError)
            raise first_error
        return [
            outcome if isinstance(outcome, EndpointStatus) else unreachable_status(endpoint, outcome.message)
            for endpoint, outcome in zip(self.endpoints, outcomes)
        ]

    def _status_of(self, endpoint: str) -> EndpointStatus | EtcdctlError:
        try:
            statuses = parse_endpoint_status(self._run(["endpoint", "status"], endpoints=[endpoint]))
        except EtcdctlError as error:
            return error
        except ValueError as error:
            return EtcdctlError(f"unreadable endpoint status output: {error}")
        if not statuses:
            return EtcdctlError("endpoint status returned nothing")
        return statuses[0]

    def endpoint_health(self) -> list[EndpointHealth]:
        """Health of every endpoint, in endpoint order (etcdctl reports each one, healthy or
        not, and exits non-zero if any is unhealthy)."""
        completed = self._execute(["endpoint", "health"], self.endpoints)
        try:
            reported = parse_endpoint_health(completed.stdout)
        except ValueError:
            raise classify_error(completed.stderr, command=completed.args) from None
        by_endpoint = {health.endpoint: health for health in reported}
        return [
            by_endpoint.get(endpoint, EndpointHealth(endpoint=endpoint, healthy=False, error="no answer"))
            for endpoint in self.endpoints
        ]

    # --- snapshots

    def snapshot_save(self, path: str, *, endpoint: str | None = None, timeout_seconds: float = 600.0) -> None:
        """Stream a snapshot of one member's database into `path` (etcdctl writes `<path>.part`
        and renames it only once complete). etcd serves a snapshot from one member only: name it
        with `endpoint`, unless this client has a single endpoint."""
        if endpoint is None:
            if len(self.endpoints) != 1:
                raise ValueError(f"snapshot_save needs one endpoint; this client has {list(self.endpoints)}")
            endpoint = self.endpoints[0]
        # The transfer of a large database takes long: etcdctl's command timeout bounds the whole
        # transfer, so it gets the snapshot's timeout, and the process a little more.
        command = self.command_line(["snapshot", "save", path], [endpoint], output="simple",
                                    command_timeout_seconds=timeout_seconds)
        try:
            completed = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                       timeout=timeout_seconds + self.dial_timeout_seconds + SUBPROCESS_GRACE_SECONDS,
                                       env=_etcdctl_environment(), check=False)
        except subprocess.TimeoutExpired as error:
            raise Unreachable(f"snapshot save did not finish within {timeout_seconds:.0f}s", command=command) from error
        except OSError as error:
            raise EtcdctlError(f"cannot run etcdctl {self.binary!r}: {error}", command=command) from error
        if completed.returncode != 0:
            raise classify_error(completed.stderr, command=completed.args)
        logger.info("etcd snapshot saved: %s (from %s)", path, endpoint)

    # --- keys (tests and probes)

    def put(self, key: str, value: str) -> None:
        self._run(["put", "--", key, value], output="simple")

    def get(self, key: str) -> str | None:
        return parse_get_value(self._run(["get", "--", key]))

    # --- a revision's content (the backup operator's trial restores compare them)

    def key_count(self, revision: int = 0) -> int:
        """How many keys there are at `revision` (0: now); raises if it is compacted."""
        args = ["get", "--prefix", "--keys-only", "--limit=1"]
        if revision:
            args.append(f"--rev={revision}")
        return parse_key_count(self._run([*args, "--", ""]))

    def hash_kv(self, revision: int, *, endpoint: str | None = None) -> HashKV:
        """The keyspace hash at `revision` of one member (`endpoint`, or this client's only one)."""
        target = [endpoint] if endpoint is not None else list(self.endpoints[:1])
        return parse_hash_kv(self._run(["endpoint", "hashkv", f"--rev={revision}"], endpoints=target))

    # --- plumbing

    def command_line(
        self, args: Sequence[str], endpoints: Sequence[str] | None = None, *, output: str = "json",
        command_timeout_seconds: float | None = None,
    ) -> list[str]:
        command_timeout = self.command_timeout_seconds if command_timeout_seconds is None else command_timeout_seconds
        command = [
            self.binary,
            "--endpoints", ",".join(endpoints if endpoints is not None else self.endpoints),
            "--dial-timeout", _go_duration(self.dial_timeout_seconds),
            "--command-timeout", _go_duration(command_timeout),
            "--write-out", output,
        ]
        if self.tls is not None:
            command += ["--cacert", self.tls.ca_file, "--cert", self.tls.cert_file, "--key", self.tls.key_file]
        return command + list(args)

    def _execute(
        self, args: Sequence[str], endpoints: Sequence[str], *, output: str = "json"
    ) -> subprocess.CompletedProcess[str]:
        command = self.command_line(args, endpoints, output=output)
        timeout = self.dial_timeout_seconds + self.command_timeout_seconds + SUBPROCESS_GRACE_SECONDS
        logger.debug("running %s", " ".join(command))
        try:
            return subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=_etcdctl_environment(),
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else (error.stderr or "")
            raise Unreachable(f"etcdctl did not finish within {timeout:.0f}s", command=command, stderr=stderr) from error
        except OSError as error:
            raise EtcdctlError(f"cannot run etcdctl {self.binary!r}: {error}", command=command) from error

    def _run(self, args: Sequence[str], *, endpoints: Sequence[str] | None = None, output: str = "json") -> str:
        """Run etcdctl; return stdout, or raise the classified error if it failed."""
        completed = self._execute(args, endpoints if endpoints is not None else self.endpoints, output=output)
        if completed.returncode != 0:
            raise classify_error(completed.stderr, command=completed.args)
        return completed.stdout
