"""Leader election on a coordination.k8s.io/v1 Lease, so that of several operator replicas
exactly one acts at a time.

The algorithm is client-go's: take the lease if it is free (no holder), ours, or expired; write
it with the resourceVersion we read (optimistic concurrency: two candidates cannot both win);
renew every retry period; give up leadership if renewals keep failing past the renew deadline
(the operator then exits, so a replica that lost touch never acts alongside its successor; no
request may outlast that deadline, which leaves the rest of the lease duration for the exit);
on a clean stop, release the lease once the leader's work has ended, so a successor takes over
at once but never while we may still act. Releasing deletes the Lease (preconditions: its uid and
the resourceVersion we last wrote), so an uninstalled operator leaves no Lease behind; a successor
creates it anew. Without permission to delete, the lease is handed back with no holder instead.
In a cluster the Lease is also owned by the operator's ServiceAccount (`service_account_owner`),
so the garbage collector removes it with the rest of an uninstalled operator even when the
operator could not delete it itself (its RBAC or account gone before it stopped).

Expiry is judged by how long *we* have seen the same lease record unchanged, not by comparing
its renewTime with our clock, so clock skew between replicas cannot cause two leaders.
"""
from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient, CoordinationV1Api

from kube_adapter.client import ServiceAccount, fetch_json_once
from kube_adapter.clock import SYSTEM_CLOCK, Clock
from kube_adapter.errors import AlreadyExists, Conflict, Forbidden, KubeError, NotFound

logger = logging.getLogger(__name__)

# Candidates retry at a random point of [1, ACQUIRE_RETRY_JITTER] retry periods, so that several
# started together do not keep colliding.
ACQUIRE_RETRY_JITTER = 1.2
# The shortest timeout a request gets when little is left before the renew deadline.
MIN_REQUEST_TIMEOUT_SECONDS = 0.1


@dataclass(frozen=True)
class LeaseRecord:
    holder_identity: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    lease_transitions: int
    resource_version: str

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            lease_transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
        )


# --- decisions (pure)


def lease_expired(record: LeaseRecord, unchanged_for_seconds: float, default_duration_seconds: int) -> bool:
    """Whether the holder has let the lease lapse: we have seen this very record for longer
    than the duration the holder promised to renew within."""
    duration = record.lease_duration_seconds or default_duration_seconds
    return unchanged_for_seconds >= duration


def may_take_lease(
    record: LeaseRecord | None, identity: str, unchanged_for_seconds: float, default_duration_seconds: int
) -> bool:
    """Whether `identity` may write the lease now: it does not exist, has no holder, is ours,
    or its holder let it expire."""
    if record is None or record.holder_identity in ("", identity):
        return True
    return lease_expired(record, unchanged_for_seconds, default_duration_seconds)


def micro_time(moment: datetime) -> str:
    """A Lease timestamp (metav1.MicroTime: RFC 3339 with exactly six fractional digits).

    The client turns the string into a datetime and back with isoformat(), which drops the
    fraction when it is zero, and the apiserver rejects a MicroTime without one: never send
    a whole second.
    """
    if moment.microsecond == 0:
        moment = moment.replace(microsecond=1)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def held_lease_spec(
    identity: str, previous: LeaseRecord | None, lease_duration_seconds: int, now: datetime
) -> dict[str, Any]:
    """The spec that says `identity` holds the lease as of `now`."""
    keeps_holder = previous is not None and previous.holder_identity == identity
    transitions = previous.lease_transitions if previous is not None else 0
    if previous is not None and not keeps_holder:
        transitions += 1
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": lease_duration_seconds,
        "acquireTime": previous.acquire_time if keeps_holder and previous and previous.acquire_time else micro_time(now),
        "renewTime": micro_time(now),
        "leaseTransitions": transitions,
    }


def released_lease_spec(previous: LeaseRecord, now: datetime) -> dict[str, Any]:
    """The spec that hands the lease back: no holder, so the next candidate takes it at once."""
    return {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": micro_time(now),
        "renewTime": micro_time(now),
        "leaseTransitions": previous.lease_transitions,
    }


def service_account_owner(account: ServiceAccount | None, lease_namespace: str) -> dict[str, Any] | None:
    """The owner reference that ties a Lease in `lease_namespace` to the service account the
    operator runs as: it lives as long as the operator is installed (across rollouts and restarts,
    unlike a pod) and goes with it. None outside a cluster, or when the Lease is in another
    namespace (an owner must be in the same namespace; the garbage collector would otherwise
    delete the Lease at once)."""
    if account is None or account.namespace != lease_namespace:
        return None
    return {"apiVersion": "v1", "kind": "ServiceAccount", "name": account.name, "uid": account.uid}


# --- the elector


class LeaderElector:
    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration_seconds: int,
        renew_deadline_seconds: float,
        retry_period_seconds: float,
        clock: Clock = SYSTEM_CLOCK,
        owner: dict[str, Any] | None = None,
    ) -> None:
        """The timing has no default here: the caller is the one place it is chosen. `clock` is
        the time every duration here is measured and waited on (tests pass a fake); `owner`, an owner
        reference every write of the Lease carries (`service_account_owner`)."""
        if not identity:
            raise ValueError("leader election needs a non-empty identity")
        if not lease_duration_seconds > renew_deadline_seconds > retry_period_seconds > 0:
            raise ValueError("need lease_duration_seconds > renew_deadline_seconds > retry_period_seconds > 0")
        self._coordination = CoordinationV1Api(api)
        self._clock = clock
        self._owner = owner
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration_seconds = lease_duration_seconds
        self.renew_deadline_seconds = renew_deadline_seconds
        self.retry_period_seconds = retry_period_seconds
        # One API call must not eat the whole renew deadline.
        self._request_timeout = max(1.0, renew_deadline_seconds / 2)
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        # When the attempt that last wrote the lease began: the lease is ours until at least
        # then + lease duration, whatever the write's latency.
        self._renewal_started_at = 0.0
        self._leading = threading.Event()
        self._work_failed = threading.Event()

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def holds_lease(self, for_seconds: float = 0.0) -> bool:
        """Leading, and the lease surely still ours `for_seconds` from now: the last renewal began
        less than the renew deadline before then. Asked before every action (with how long the
        action may take), so a leader that was frozen (a paused process, a cut network) and wakes
        up does not act on before its elector notices the loss, and an action is not started that
        could still run when another replica may lead."""
        return self._leading.is_set() and \
            self._clock.monotonic() + for_seconds < self._renewal_started_at + self.renew_deadline_seconds

    def run(
        self,
        stop: threading.Event,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
    ) -> None:
        """Campaign until `stop`; while leading, keep the lease renewed.

        `on_started_leading` runs in a thread of its own (it may block, e.g. run the
        controller, and must return soon after `stop` is set); if it raises, leadership is
        given up rather than held with nobody working. `on_stopped_leading` runs in this
        thread when leadership ends: lost (renewals failed past the deadline, or another
        holder appeared) or given up because `stop` was set or the work failed. When given up,
        the lease is released first, but only once `on_started_leading` has returned (and
        only if it does so within the renew deadline: otherwise the lease is left to expire).
        Returns after that.
        """
        lease = f"{self.namespace}/{self.name}"
        logger.info("leader election: %s campaigning for lease %s", self.identity, lease)
        if not self._acquire(stop):
            return
        self._leading.set()
        logger.info("leader election: %s became leader (lease %s)", self.identity, lease)
        self._work_failed.clear()
        work_ended = threading.Event()
        work = threading.Thread(target=self._lead, args=(on_started_leading, work_ended), name="leading", daemon=True)
        work.start()
        lost = True
        try:
            lost = self._renew_until_lost(stop)
        finally:
            self._leading.clear()
            if not lost:
                self._release_after(work_ended)
            logger.info("leader election: %s stopped leading (lease %s)", self.identity, lease)
            on_stopped_leading()

    def _acquire(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self._try_acquire_or_renew():
                return True
            self._clock.wait(stop, self.retry_period_seconds * random.uniform(1.0, ACQUIRE_RETRY_JITTER))
        return False

    def _lead(self, on_started_leading: Callable[[], None], ended: threading.Event) -> None:
        try:
            on_started_leading()
        except Exception:
            logger.exception("leader election: the leader's work failed; giving up leadership")
            self._work_failed.set()
        finally:
            ended.set()

    def _renew_until_lost(self, stop: threading.Event) -> bool:
        """Renew until `stop` or the work fails (returns False: ours to release) or the lease
        is lost (returns True)."""
        while not self._clock.wait(stop, self.retry_period_seconds):
            if self._work_failed.is_set():
                return False
            deadline = self._renewal_started_at + self.renew_deadline_seconds
            if self._clock.monotonic() < deadline and self._try_acquire_or_renew(deadline):
                continue
            observed = self._observed
            if observed is not None and observed.holder_identity not in ("", self.identity):
                logger.error("leader election: lease taken over by %s", observed.holder_identity)
                return True
            if self._clock.monotonic() >= deadline:
                logger.error(
                    "leader election: could not renew lease for %.0fs (deadline %.0fs); giving up leadership",
                    self._clock.monotonic() - self._renewal_started_at, self.renew_deadline_seconds,
                )
                return True
        return False

    def _release_after(self, work_ended: threading.Event) -> None:
        """Release the lease once the leader's work has ended: until then it may still act, and a
        successor must not start alongside it. The lease is surely ours until the renew deadline;
        work that outlasts it leaves the lease to expire instead."""
        remaining = self._renewal_started_at + self.renew_deadline_seconds - self._clock.monotonic()
        if not self._clock.wait(work_ended, max(0.0, remaining)):
            logger.warning("leader election: the leader's work has not ended by the renew deadline; "
                           "not releasing the lease (it expires in %ds)", self.lease_duration_seconds)
            return
        self._release()

    def _observe(self, record: LeaseRecord) -> None:
        if self._observed is None or record.resource_version != self._observed.resource_version:
            self._observed = record
            self._observed_at = self._clock.monotonic()

    def _request_timeout_until(self, deadline: float | None) -> float:
        """A request timeout that does not reach past `deadline` (a monotonic clock value)."""
        if deadline is None:
            return self._request_timeout
        return max(MIN_REQUEST_TIMEOUT_SECONDS, min(self._request_timeout, deadline - self._clock.monotonic()))

    def _try_acquire_or_renew(self, deadline: float | None = None) -> bool:
        """One attempt to write the lease as ours; no request outlasts `deadline`."""
        started_at = self._clock.monotonic()
        now = self._clock.now()
        try:
            lease = self._get(self._request_timeout_until(deadline))
        except NotFound:
            if not self._create(now, self._request_timeout_until(deadline)):
                return False
            self._renewal_started_at = started_at
            return True
        except KubeError as error:
            logger.warning("leader election: cannot read lease: %s", error)
            return False
        record = LeaseRecord.from_lease(lease)
        self._observe(record)
        unchanged_for = self._clock.monotonic() - self._observed_at
        if not may_take_lease(record, self.identity, unchanged_for, self.lease_duration_seconds):
            return False
        if record.holder_identity not in ("", self.identity):
            logger.info("leader election: lease held by %s expired; taking over", record.holder_identity)
        spec = held_lease_spec(self.identity, record, self.lease_duration_seconds, now)
        if not self._replace(lease, spec, self._request_timeout_until(deadline)):
            return False
        self._renewal_started_at = started_at
        return True

    def _get(self, timeout: float) -> dict[str, Any]:
        return fetch_json_once(
            self._coordination.read_namespaced_lease, name=self.name, namespace=self.namespace,
            _request_timeout=timeout,
        )

    def _create(self, now: datetime, timeout: float) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": self._with_owner({"name": self.name, "namespace": self.namespace}),
            "spec": held_lease_spec(self.identity, None, self.lease_duration_seconds, now),
        }
        try:
            created = fetch_json_once(
                self._coordination.create_namespaced_lease, namespace=self.namespace, body=body,
                _request_timeout=timeout,
            )
        except AlreadyExists:
            return False  # another candidate created it first
        except KubeError as error:
            logger.warning("leader election: cannot create lease: %s", error)
            return False
        self._observe(LeaseRecord.from_lease(created))
        return True

    def _replace(self, lease: dict[str, Any], spec: dict[str, Any], timeout: float) -> bool:
        metadata = {key: value for key, value in (lease.get("metadata") or {}).items() if key != "managedFields"}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": self._with_owner(metadata),
                "spec": spec}
        try:
            written = fetch_json_once(
                self._coordination.replace_namespaced_lease, name=self.name, namespace=self.namespace, body=body,
                _request_timeout=timeout,
            )
        except Conflict:
            return False  # someone wrote it since we read it; judge again next round
        except KubeError as error:
            logger.warning("leader election: cannot write lease: %s", error)
            return False
        self._observe(LeaseRecord.from_lease(written))
        return True

    def _with_owner(self, metadata: dict[str, Any]) -> dict[str, Any]:
        if self._owner is None:
            return metadata
        return {**metadata, "ownerReferences": [self._owner]}

    def _release(self) -> None:
        try:
            lease = self._get(self._request_timeout)
            record = LeaseRecord.from_lease(lease)
            if record.holder_identity != self.identity:
                return
            metadata = lease.get("metadata") or {}
            preconditions = {"uid": metadata.get("uid"), "resourceVersion": metadata.get("resourceVersion")}
            try:
                fetch_json_once(
                    self._coordination.delete_namespaced_lease, name=self.name, namespace=self.namespace,
                    body={"preconditions": preconditions}, _request_timeout=self._request_timeout,
                )
                logger.info("leader election: released lease %s/%s (deleted)", self.namespace, self.name)
                return
            except (Conflict, NotFound):
                return  # written or deleted by someone else since we read it: no longer ours to release
            except Forbidden:
                logger.info("leader election: not allowed to delete lease %s/%s; handing it back instead",
                            self.namespace, self.name)
            if self._replace(lease, released_lease_spec(record, self._clock.now()), self._request_timeout):
                logger.info("leader election: released lease %s/%s", self.namespace, self.name)
        except KubeError as error:
            logger.warning("leader election: could not release lease (it will expire instead): %s", error)
