"""Leader election: the decisions as pure functions, then electors campaigning against a lease
kept by the scripted apiserver with the apiserver's optimistic-concurrency rules, on a fake clock
(every duration is virtual time the test moves, so timing is checked exactly and nothing sleeps)."""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3
from kubernetes.client import ApiClient

from kube_adapter import leadership
from kube_adapter.client import ServiceAccount
from kube_adapter.leadership import (
    LeaderElector,
    LeaseRecord,
    held_lease_spec,
    lease_expired,
    may_take_lease,
    micro_time,
    released_lease_spec,
    service_account_owner,
)
from tests.support.fake_clock import FakeClock
from tests.unit.kube_adapter.scripted_apiserver import Reply, Request, ScriptedApiServer, status_body

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


def record(holder: str, duration: int = 15, transitions: int = 0, acquire: str | None = "2024-01-01T00:00:00.000001Z") -> LeaseRecord:
    return LeaseRecord(holder, duration, acquire, acquire, transitions, "5")


@pytest.mark.parametrize(
    ("lease", "unchanged_for", "may_take"),
    [
        (None, 0.0, True),  # no lease yet: create it
        (record(""), 0.0, True),  # released: take at once
        (record("me"), 0.0, True),  # ours: renew
        (record("other"), 14.9, False),  # held and fresh
        (record("other"), 15.0, True),  # not renewed within its duration: expired
        (record("other", duration=0), 10.0, False),  # no duration recorded: ours (15 s) applies
    ],
)
def test_who_may_take_the_lease(lease: LeaseRecord | None, unchanged_for: float, may_take: bool) -> None:
    assert may_take_lease(lease, "me", unchanged_for, 15) is may_take


def test_expiry_uses_the_holders_duration() -> None:
    assert lease_expired(record("other", duration=5), 5.0, 15)
    assert not lease_expired(record("other", duration=30), 20.0, 15)


def test_micro_time_always_has_six_fraction_digits() -> None:
    whole_second = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert micro_time(whole_second) == "2024-01-01T12:00:00.000001Z"
    assert micro_time(whole_second.replace(microsecond=123456)) == "2024-01-01T12:00:00.123456Z"


def test_spec_when_taking_over_counts_a_transition() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0, 5, tzinfo=UTC)
    spec = held_lease_spec("me", record("other", transitions=3), 15, now)
    assert spec == {
        "holderIdentity": "me", "leaseDurationSeconds": 15,
        "acquireTime": "2024-01-01T12:00:00.000005Z", "renewTime": "2024-01-01T12:00:00.000005Z",
        "leaseTransitions": 4,
    }


def test_spec_when_renewing_keeps_acquire_time_and_transitions() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0, 5, tzinfo=UTC)
    spec = held_lease_spec("me", record("me", transitions=3), 15, now)
    assert (spec["acquireTime"], spec["leaseTransitions"]) == ("2024-01-01T00:00:00.000001Z", 3)
    assert held_lease_spec("me", None, 15, now)["leaseTransitions"] == 0


def test_released_spec_has_no_holder() -> None:
    spec = released_lease_spec(record("me", transitions=2), datetime(2024, 1, 1, tzinfo=UTC))
    assert spec["holderIdentity"] == "" and spec["leaseTransitions"] == 2 and spec["leaseDurationSeconds"] == 1


def test_durations_must_nest() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, "ns", "lock", "me", lease_duration_seconds=10, renew_deadline_seconds=10,  # type: ignore[arg-type]
                      retry_period_seconds=2)
    with pytest.raises(ValueError):
        LeaderElector(None, "ns", "lock", "", lease_duration_seconds=15, renew_deadline_seconds=10,  # type: ignore[arg-type]
                      retry_period_seconds=2)


class LeaseStore:
    """One Lease with the apiserver's rules: create fails if it exists, a replace must carry
    the current resourceVersion, a delete's preconditions must match. `broken` makes every
    request fail with 500; `delete_forbidden` answers deletes 403 (RBAC without `delete`)."""

    def __init__(self, apiserver: ScriptedApiServer) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.broken = False
        self.delete_forbidden = False
        self.deletes = 0
        self.lock = threading.Lock()
        apiserver.fallback("GET", f"{LEASES}/lock", self.get)
        apiserver.fallback("POST", LEASES, self.create)
        apiserver.fallback("PUT", f"{LEASES}/lock", self.replace)
        apiserver.fallback("DELETE", f"{LEASES}/lock", self.delete)

    def _stored(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        uid = (self.lease or {}).get("metadata", {}).get("uid") or f"uid-{self.version}"
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version), "uid": uid}}
        return self.lease

    def get(self, request: Request) -> Reply:
        with self.lock:
            if self.broken:
                return Reply(500, status_body(500, "InternalError"))
            if self.lease is None:
                return Reply(404, status_body(404, "NotFound"))
            return Reply(body=self.lease)

    def create(self, request: Request) -> Reply:
        with self.lock:
            if self.broken:
                return Reply(500, status_body(500, "InternalError"))
            if self.lease is not None:
                return Reply(409, status_body(409, "AlreadyExists"))
            return Reply(201, self._stored(request.body))

    def replace(self, request: Request) -> Reply:
        with self.lock:
            if self.broken:
                return Reply(500, status_body(500, "InternalError"))
            assert self.lease is not None
            if request.body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return Reply(409, status_body(409, "Conflict", "the object has been modified"))
            return Reply(body=self._stored(request.body))

    def delete(self, request: Request) -> Reply:
        with self.lock:
            if self.broken:
                return Reply(500, status_body(500, "InternalError"))
            if self.delete_forbidden:
                return Reply(403, status_body(403, "Forbidden", "cannot delete leases"))
            if self.lease is None:
                return Reply(404, status_body(404, "NotFound"))
            preconditions = (request.body or {}).get("preconditions") or {}
            metadata = self.lease["metadata"]
            if any(preconditions.get(key) not in (None, metadata.get(key)) for key in ("uid", "resourceVersion")):
                return Reply(409, status_body(409, "Conflict", "Precondition failed"))
            self.lease = None
            self.deletes += 1
            return Reply(body={"kind": "Status", "apiVersion": "v1", "status": "Success"})

    @property
    def holder(self) -> str:
        with self.lock:
            return str(((self.lease or {}).get("spec") or {}).get("holderIdentity", ""))


class SlowApiClient(ApiClient):
    """The real client, with requests that take virtual time: a request whose latency (per
    HTTP method) reaches its timeout is not answered and fails as the client's own read timeout
    does, after that timeout; the others get their answer after the latency. Records
    (method, sent at, timeout) of each request."""

    def __init__(self, apiserver: ScriptedApiServer, clock: FakeClock) -> None:
        super().__init__(apiserver.api_client().configuration)
        self.clock = clock
        self.latency_seconds: dict[str, float] = {}
        self.sent: list[tuple[str, float, float]] = []

    def call_api(self, method: str, url: str, header_params: Any = None, body: Any = None, post_params: Any = None,
                 _request_timeout: Any = None) -> Any:
        latency = self.latency_seconds.get(method, 0.0)
        timeout = float(_request_timeout)
        self.sent.append((method, self.clock.monotonic(), timeout))
        if latency >= timeout:
            self.clock.advance(timeout)
            raise urllib3.exceptions.ReadTimeoutError(None, url, f"Read timed out. (read timeout={timeout})")  # type: ignore[arg-type]
        self.clock.advance(latency)
        return super().call_api(method, url, header_params, body, post_params, _request_timeout)


def run_elector(elector: LeaderElector, stop: threading.Event, work: Callable[[], None],
                on_stopped: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=elector.run, args=(stop, work, on_stopped), daemon=True)
    thread.start()
    return thread


class Candidate:
    """An elector on the fake clock whose leadership changes are logged with their (virtual) time."""

    def __init__(self, apiserver: ScriptedApiServer, clock: FakeClock, identity: str) -> None:
        self.identity = identity
        self.clock = clock
        self.elector = LeaderElector(
            apiserver.api_client(), "ns", "lock", identity,
            lease_duration_seconds=2, renew_deadline_seconds=1, retry_period_seconds=0.1, clock=clock,
        )
        self.stop = threading.Event()
        self.log: queue.Queue[str] = queue.Queue()
        self.at: dict[str, float] = {}
        self.thread = threading.Thread(
            target=self.elector.run, args=(self.stop, self._logger("started"), self._logger("stopped")), daemon=True,
        )

    def _logger(self, what: str) -> Callable[[], None]:
        def log() -> None:
            self.at[what] = self.clock.monotonic()
            self.log.put(what)
        return log

    def next_transition(self, timeout: float = 10.0) -> str:
        try:
            return self.log.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"{self.identity}: no leadership change within {timeout}s")

    def quit(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(apiserver: ScriptedApiServer) -> LeaseStore:
    return LeaseStore(apiserver)


@pytest.fixture
def candidates(apiserver: ScriptedApiServer, clock: FakeClock) -> Iterator[list[Candidate]]:
    made = [Candidate(apiserver, clock, "a"), Candidate(apiserver, clock, "b")]
    yield made
    for candidate in made:
        candidate.stop.set()


def test_one_leads_and_a_clean_stop_hands_over_at_once(
    store: LeaseStore, candidates: list[Candidate], clock: FakeClock,
) -> None:
    first, second = candidates
    first.thread.start()
    assert first.next_transition() == "started"
    second.thread.start()
    clock.wait_until_waiting(2)  # `first` renewing, `second` retrying

    # Three lease durations: `first` renews every retry period, so its lease never expires.
    clock.advance(3 * first.elector.lease_duration_seconds)
    assert second.log.empty() and not second.elector.is_leader
    assert first.elector.is_leader and store.holder == "a"

    first.quit()
    assert first.next_transition() == "stopped"
    assert store.lease is None and store.deletes == 1, "a clean stop releases the lease by deleting it"
    released_at = clock.monotonic()
    assert clock.advance_until(lambda: second.elector.is_leader,
                               within=second.elector.retry_period_seconds * leadership.ACQUIRE_RETRY_JITTER), \
        "the released lease should be taken at the next retry, without waiting for expiry"
    assert second.next_transition() == "started"
    assert clock.monotonic() - released_at < second.elector.lease_duration_seconds
    assert store.holder == "b"
    second.quit()
    assert store.lease is None and store.deletes == 2


def test_without_permission_to_delete_a_clean_stop_hands_the_lease_back(
    store: LeaseStore, candidates: list[Candidate], clock: FakeClock,
) -> None:
    store.delete_forbidden = True
    first, second = candidates
    first.thread.start()
    assert first.next_transition() == "started"
    second.thread.start()
    clock.wait_until_waiting(2)

    first.quit()
    assert first.next_transition() == "stopped"
    assert store.lease is not None and store.holder == "", "the lease is handed back with no holder"
    assert clock.advance_until(lambda: second.elector.is_leader,
                               within=second.elector.retry_period_seconds * leadership.ACQUIRE_RETRY_JITTER)
    assert store.holder == "b" and store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1


def test_failing_renewals_end_leadership_after_the_deadline(
    store: LeaseStore, candidates: list[Candidate], clock: FakeClock,
) -> None:
    leader = candidates[0]
    leader.thread.start()
    assert leader.next_transition() == "started"
    clock.wait_until_waiting(1)
    renewed_at = clock.monotonic()  # no time has passed since it took the lease

    store.broken = True
    assert clock.advance_until(lambda: not leader.elector.is_leader, within=2 * leader.elector.lease_duration_seconds)
    assert leader.next_transition() == "stopped"
    # Given up at the first check at or after the deadline (checks come every retry period).
    led_on = leader.at["stopped"] - renewed_at
    deadline, retry = leader.elector.renew_deadline_seconds, leader.elector.retry_period_seconds
    assert deadline - 1e-9 <= led_on < deadline + retry + 1e-9, f"gave up {led_on:.3f}s after the last renewal"
    assert not leader.elector.is_leader and not leader.stop.is_set()
    leader.thread.join(timeout=10)
    assert not leader.thread.is_alive()


def test_an_expired_lease_of_a_vanished_holder_is_taken_over(
    store: LeaseStore, candidates: list[Candidate], clock: FakeClock,
) -> None:
    store.lease = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "lock", "namespace": "ns", "resourceVersion": "1"},
        "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 1, "leaseTransitions": 0,
                 "acquireTime": "2024-01-01T00:00:00.000001Z", "renewTime": "2024-01-01T00:00:00.000001Z"},
    }
    store.version = 1
    candidate = candidates[0]
    first_seen = clock.monotonic()
    candidate.thread.start()
    clock.wait_until_waiting(1)  # it has read the lease, found it held, and waits to retry
    assert not candidate.elector.is_leader

    retry = candidate.elector.retry_period_seconds * leadership.ACQUIRE_RETRY_JITTER
    assert clock.advance_until(lambda: candidate.elector.is_leader, within=1.0 + retry)
    took_over_after = clock.monotonic() - first_seen
    assert took_over_after >= 1.0, "must wait a full lease duration (the holder's: 1s) before taking over"
    assert took_over_after < 1.0 + retry, "taken at the first retry after it expired"
    assert candidate.next_transition() == "started"
    assert store.holder == "a"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1


def test_leadership_is_given_up_when_the_work_fails(
    apiserver: ScriptedApiServer, store: LeaseStore, clock: FakeClock,
) -> None:
    elector = LeaderElector(
        apiserver.api_client(), "ns", "lock", "a",
        lease_duration_seconds=2, renew_deadline_seconds=1, retry_period_seconds=0.1, clock=clock,
    )
    stopped, crashed = threading.Event(), threading.Event()

    def crash() -> None:
        crashed.set()
        raise RuntimeError("controller failed to start")

    thread = run_elector(elector, threading.Event(), crash, stopped.set)
    assert crashed.wait(timeout=10)
    clock.wait_until_waiting(1)
    # Renewals succeed, so nothing but the failed work ends leadership: noticed at a renewal.
    assert clock.advance_until(stopped.is_set, within=60), "on_stopped_leading was not called"
    thread.join(timeout=10)
    assert not thread.is_alive() and not elector.is_leader
    assert store.holder == "", "the lease should be handed back"


def test_a_clean_stop_releases_the_lease_only_once_the_work_has_ended(
    apiserver: ScriptedApiServer, store: LeaseStore, clock: FakeClock,
) -> None:
    """The controller finishes its current pass after `stop`: a successor must not start
    while it may still act."""
    elector = LeaderElector(
        apiserver.api_client(), "ns", "lock", "a",
        lease_duration_seconds=4, renew_deadline_seconds=3, retry_period_seconds=0.1, clock=clock,
    )
    stop, work_may_end, stopped = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        stop.wait()
        work_may_end.wait()  # still finishing a pass

    thread = run_elector(elector, stop, work, stopped.set)
    clock.wait_until_waiting(1)
    assert elector.is_leader and store.holder == "a"
    stopped_at = clock.monotonic()

    stop.set()
    clock.wait_until_waiting(1)  # now waiting for the work to end
    # Until just before the renew deadline (counted from the last renewal, when it stopped):
    clock.advance(elector.renew_deadline_seconds - 0.01)
    assert clock.waiting() == 1 and not stopped.is_set(), "leadership ended while the work was still running"
    assert store.holder == "a", "the lease was released while the work was still running"
    assert clock.monotonic() - stopped_at < elector.renew_deadline_seconds

    work_may_end.set()
    assert stopped.wait(timeout=10)
    thread.join(timeout=10)
    assert not thread.is_alive() and store.holder == ""


def test_work_that_outlasts_the_renew_deadline_leaves_the_lease_to_expire(
    apiserver: ScriptedApiServer, store: LeaseStore, clock: FakeClock,
) -> None:
    elector = LeaderElector(
        apiserver.api_client(), "ns", "lock", "a",
        lease_duration_seconds=2, renew_deadline_seconds=1, retry_period_seconds=0.1, clock=clock,
    )
    stop, stopped, never = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        never.wait()  # a pass that hangs

    thread = run_elector(elector, stop, work, stopped.set)
    clock.wait_until_waiting(1)
    assert store.holder == "a"

    stopped_leading_at = clock.monotonic()  # also its last renewal
    stop.set()
    clock.wait_until_waiting(1)  # waiting for the work to end
    clock.advance(elector.renew_deadline_seconds - 0.01)
    assert not stopped.is_set(), "gave up waiting for the work before the renew deadline"
    assert clock.advance_until(stopped.is_set, within=0.02), \
        "a clean stop must not wait for the work beyond the renew deadline"
    assert clock.monotonic() - stopped_leading_at == pytest.approx(elector.renew_deadline_seconds)
    assert store.holder == "a", "the lease was released while the work was still running"
    thread.join(timeout=10)
    assert not thread.is_alive()
    never.set()


def test_a_slow_apiserver_cannot_stretch_leadership_past_the_renew_deadline(
    apiserver: ScriptedApiServer, store: LeaseStore, clock: FakeClock,
) -> None:
    """Requests that hang must not keep a leader believing it leads after the renew deadline:
    other replicas may take the lease a lease duration after its last renewal."""
    api = SlowApiClient(apiserver, clock)
    elector = LeaderElector(
        api, "ns", "lock", "a", lease_duration_seconds=4, renew_deadline_seconds=3, retry_period_seconds=0.1,
        clock=clock,
    )
    stopped_at: list[float] = []
    thread = run_elector(elector, threading.Event(), lambda: None, lambda: stopped_at.append(clock.monotonic()))
    clock.wait_until_waiting(1)
    assert store.holder == "a"
    last_renewal = clock.monotonic()  # it just took the lease
    # From now on each read takes 0.5s and each write times out (at most 1.5s each): one attempt
    # takes 2s, so a second one with the usual timeouts would end 4.2s after the renewal, when
    # others may lead.
    api.latency_seconds = {"GET": 0.5, "PUT": 10.0}
    sent_before = len(api.sent)

    assert clock.advance_until(lambda: bool(stopped_at), within=2 * elector.lease_duration_seconds)
    gave_up_after = stopped_at[0] - last_renewal
    assert gave_up_after <= elector.renew_deadline_seconds + leadership.MIN_REQUEST_TIMEOUT_SECONDS + 1e-9, \
        f"led on {gave_up_after:.2f}s after the last renewal (renew deadline 3s)"
    slow = api.sent[sent_before:]
    assert len(slow) >= 4, f"expected two attempts (read and write each), got {slow}"
    latest_end = last_renewal + elector.renew_deadline_seconds + leadership.MIN_REQUEST_TIMEOUT_SECONDS + 1e-9
    assert all(sent_at + timeout <= latest_end for _, sent_at, timeout in slow), \
        f"a request could outlast the renew deadline: {slow}"
    thread.join(timeout=10)
    assert not thread.is_alive() and not elector.is_leader


def test_holds_lease_only_within_the_renew_deadline_of_the_last_renewal(
    store: LeaseStore, candidates: list[Candidate], clock: FakeClock,
) -> None:
    leader = candidates[0]
    assert not leader.elector.holds_lease()
    leader.thread.start()
    assert leader.next_transition() == "started"
    assert leader.elector.holds_lease()
    clock.wait_until_waiting(1)
    # A process frozen past its renew deadline wakes up: its elector has not noticed yet (still
    # "leading"), but it must not act.
    store.broken = True
    clock.jump(leader.elector.renew_deadline_seconds + 0.5, wake=False)
    assert leader.elector.is_leader and not leader.elector.holds_lease()
    # Its elector notices as soon as it runs.
    clock.advance(0)
    assert leader.next_transition() == "stopped" and not leader.elector.is_leader


def test_holds_lease_for_an_action_only_if_it_ends_within_the_renew_deadline(
    store: LeaseStore, candidates: list[Candidate], clock: FakeClock,
) -> None:
    """An action that would outlast the renew deadline is not started: the lease must surely
    stay ours until it ends."""
    leader = candidates[0]
    leader.thread.start()
    assert leader.next_transition() == "started"
    clock.wait_until_waiting(1)
    deadline = leader.elector.renew_deadline_seconds
    store.broken = True  # no renewal from now on
    clock.advance(deadline / 2)  # renewals fail all along
    assert leader.elector.is_leader
    assert leader.elector.holds_lease(deadline / 4)
    assert not leader.elector.holds_lease(deadline / 2 + 0.1)


OWNER = {"apiVersion": "v1", "kind": "ServiceAccount", "name": "etcd-operator", "uid": "sa-uid"}


@pytest.mark.parametrize("account, lease_namespace, expected", [
    (ServiceAccount("ops", "etcd-operator", "sa-uid"), "ops", OWNER),
    (ServiceAccount("ops", "etcd-operator", "sa-uid"), "elsewhere", None),  # owners are same-namespace only
    (None, "ops", None),  # outside a cluster
])
def test_the_lease_is_owned_by_the_operators_service_account(
        account: ServiceAccount | None, lease_namespace: str, expected: dict[str, str] | None) -> None:
    assert service_account_owner(account, lease_namespace) == expected


def test_every_write_of_the_lease_carries_the_owner(
    apiserver: ScriptedApiServer, store: LeaseStore, clock: FakeClock,
) -> None:
    """Created with the owner, and a takeover of a lease written without one adds it, so the
    garbage collector removes the Lease with the service account (an uninstall)."""
    store.lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "lock", "namespace": "ns", "resourceVersion": "7", "uid": "lease-uid"},
                   "spec": {"holderIdentity": ""}}
    elector = LeaderElector(apiserver.api_client(), "ns", "lock", "a", lease_duration_seconds=2,
                            renew_deadline_seconds=1, retry_period_seconds=0.1, clock=clock, owner=OWNER)
    stop, stopped = threading.Event(), threading.Event()
    thread = run_elector(elector, stop, stop.wait, stopped.set)
    clock.wait_until_waiting(1)
    assert store.holder == "a"
    assert store.lease is not None and store.lease["metadata"]["ownerReferences"] == [OWNER]
    stop.set()  # a clean stop deletes the lease: the next elector creates it
    assert stopped.wait(timeout=10)
    thread.join(timeout=10)
    assert store.lease is None
    elector = LeaderElector(apiserver.api_client(), "ns", "lock", "b", lease_duration_seconds=2,
                            renew_deadline_seconds=1, retry_period_seconds=0.1, clock=clock, owner=OWNER)
    stop, stopped = threading.Event(), threading.Event()
    thread = run_elector(elector, stop, stop.wait, stopped.set)
    clock.wait_until_waiting(1)
    assert store.holder == "b" and store.lease is not None
    assert store.lease["metadata"]["ownerReferences"] == [OWNER], "a created lease has the owner"
    stop.set()
    assert stopped.wait(timeout=10)
    thread.join(timeout=10)
