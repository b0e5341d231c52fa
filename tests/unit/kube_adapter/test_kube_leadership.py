"""Leader election: the decisions as pure functions, then electors campaigning against a lease
kept by the scripted apiserver with the apiserver's optimistic-concurrency rules."""
from __future__ import annotations

import queue
import threading
import time
import types
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from kube_adapter import leadership
from kube_adapter.leadership import (
    LeaderElector,
    LeaseRecord,
    held_lease_spec,
    lease_expired,
    may_take_lease,
    micro_time,
    released_lease_spec,
)
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
    whole_second = datetime(2024, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert micro_time(whole_second) == "2024-01-01T12:00:00.000001Z"
    assert micro_time(whole_second.replace(microsecond=123456)) == "2024-01-01T12:00:00.123456Z"


def test_spec_when_taking_over_counts_a_transition() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0, 5, tzinfo=timezone.utc)
    spec = held_lease_spec("me", record("other", transitions=3), 15, now)
    assert spec == {
        "holderIdentity": "me", "leaseDurationSeconds": 15,
        "acquireTime": "2024-01-01T12:00:00.000005Z", "renewTime": "2024-01-01T12:00:00.000005Z",
        "leaseTransitions": 4,
    }


def test_spec_when_renewing_keeps_acquire_time_and_transitions() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0, 5, tzinfo=timezone.utc)
    spec = held_lease_spec("me", record("me", transitions=3), 15, now)
    assert (spec["acquireTime"], spec["leaseTransitions"]) == ("2024-01-01T00:00:00.000001Z", 3)
    assert held_lease_spec("me", None, 15, now)["leaseTransitions"] == 0


def test_released_spec_has_no_holder() -> None:
    spec = released_lease_spec(record("me", transitions=2), datetime(2024, 1, 1, tzinfo=timezone.utc))
    assert spec["holderIdentity"] == "" and spec["leaseTransitions"] == 2 and spec["leaseDurationSeconds"] == 1


def test_durations_must_nest() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, "ns", "lock", "me", lease_duration_seconds=10, renew_deadline_seconds=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(None, "ns", "lock", "")  # type: ignore[arg-type]


class LeaseStore:
    """One Lease with the apiserver's rules: create fails if it exists, a replace must carry
    the current resourceVersion. `broken` makes every request fail with 500; the delays make
    reads and writes slow (a loaded or partitioned apiserver)."""

    def __init__(self, apiserver: ScriptedApiServer) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.broken = False
        self.delay_get_seconds = 0.0
        self.delay_put_seconds = 0.0
        self.lock = threading.Lock()
        apiserver.fallback("GET", f"{LEASES}/lock", self.get)
        apiserver.fallback("POST", LEASES, self.create)
        apiserver.fallback("PUT", f"{LEASES}/lock", self.replace)

    def _stored(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        return self.lease

    def get(self, request: Request) -> Reply:
        time.sleep(self.delay_get_seconds)
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
        time.sleep(self.delay_put_seconds)
        with self.lock:
            if self.broken:
                return Reply(500, status_body(500, "InternalError"))
            assert self.lease is not None
            if request.body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return Reply(409, status_body(409, "Conflict", "the object has been modified"))
            return Reply(body=self._stored(request.body))

    @property
    def holder(self) -> str:
        with self.lock:
            return str(((self.lease or {}).get("spec") or {}).get("holderIdentity", ""))


class Candidate:
    def __init__(self, apiserver: ScriptedApiServer, identity: str) -> None:
        self.identity = identity
        self.elector = LeaderElector(
            apiserver.api_client(), "ns", "lock", identity,
            lease_duration_seconds=2, renew_deadline_seconds=1, retry_period_seconds=0.1,
        )
        self.stop = threading.Event()
        self.log: "queue.Queue[str]" = queue.Queue()
        self.thread = threading.Thread(
            target=self.elector.run,
            args=(self.stop, lambda: self.log.put("started"), lambda: self.log.put("stopped")),
            daemon=True,
        )

    def next_transition(self, timeout: float = 5.0) -> str:
        try:
            return self.log.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"{self.identity}: no leadership change within {timeout}s")

    def quit(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


@pytest.fixture
def store(apiserver: ScriptedApiServer) -> LeaseStore:
    return LeaseStore(apiserver)


@pytest.fixture
def candidates(apiserver: ScriptedApiServer) -> Iterator[list[Candidate]]:
    made = [Candidate(apiserver, "a"), Candidate(apiserver, "b")]
    yield made
    for candidate in made:
        candidate.stop.set()


def test_one_leads_and_a_clean_stop_hands_over_at_once(store: LeaseStore, candidates: list[Candidate]) -> None:
    first, second = candidates
    first.thread.start()
    assert first.next_transition() == "started"
    second.thread.start()

    with pytest.raises(queue.Empty):
        second.log.get(timeout=0.5)  # several renew periods: the lease stays with `first`
    assert first.elector.is_leader and not second.elector.is_leader and store.holder == "a"

    stopped_at = time.monotonic()
    first.quit()
    assert first.next_transition() == "stopped"
    assert second.next_transition() == "started"
    assert time.monotonic() - stopped_at < 1.0, "the released lease should be taken without waiting for expiry"
    assert store.holder == "b"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1
    second.quit()
    assert store.holder == ""


def test_failing_renewals_end_leadership_after_the_deadline(store: LeaseStore, candidates: list[Candidate]) -> None:
    leader = candidates[0]
    leader.thread.start()
    assert leader.next_transition() == "started"

    store.broken = True
    broke_at = time.monotonic()
    assert leader.next_transition() == "stopped"
    # The deadline counts from the last renewal, at most one retry period before the break.
    assert 0.8 <= time.monotonic() - broke_at < 4.0
    assert not leader.elector.is_leader and not leader.stop.is_set()
    leader.thread.join(timeout=5)
    assert not leader.thread.is_alive()


def test_an_expired_lease_of_a_vanished_holder_is_taken_over(store: LeaseStore, candidates: list[Candidate]) -> None:
    store.lease = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "lock", "namespace": "ns", "resourceVersion": "1"},
        "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 1, "leaseTransitions": 0,
                 "acquireTime": "2024-01-01T00:00:00.000001Z", "renewTime": "2024-01-01T00:00:00.000001Z"},
    }
    store.version = 1
    candidate = candidates[0]
    started = time.monotonic()
    candidate.thread.start()

    assert candidate.next_transition() == "started"
    assert time.monotonic() - started >= 1.0, "must wait a full lease duration before taking over"
    assert store.holder == "a"


def test_leadership_is_given_up_when_the_work_fails(apiserver: ScriptedApiServer, store: LeaseStore) -> None:
    elector = LeaderElector(
        apiserver.api_client(), "ns", "lock", "a", lease_duration_seconds=2, renew_deadline_seconds=1, retry_period_seconds=0.1
    )
    stopped = threading.Event()

    def crash() -> None:
        raise RuntimeError("controller failed to start")

    thread = threading.Thread(target=elector.run, args=(threading.Event(), crash, stopped.set), daemon=True)
    thread.start()

    assert stopped.wait(timeout=5), "on_stopped_leading was not called"
    thread.join(timeout=5)
    assert not thread.is_alive() and not elector.is_leader
    assert store.holder == "", "the lease should be handed back"


def test_a_clean_stop_releases_the_lease_only_once_the_work_has_ended(
    apiserver: ScriptedApiServer, store: LeaseStore
) -> None:
    """The controller finishes its current pass after `stop`: a successor must not start
    while it may still act."""
    elector = LeaderElector(
        apiserver.api_client(), "ns", "lock", "a", lease_duration_seconds=4, renew_deadline_seconds=3, retry_period_seconds=0.1
    )
    stop, work_may_end, stopped = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        stop.wait()
        work_may_end.wait()  # still finishing a pass

    thread = threading.Thread(target=elector.run, args=(stop, work, stopped.set), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while store.holder != "a" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store.holder == "a"

    stop.set()
    assert not stopped.wait(timeout=0.5), "leadership ended while the work was still running"
    assert store.holder == "a", "the lease was released while the work was still running"
    work_may_end.set()
    assert stopped.wait(timeout=5)
    thread.join(timeout=5)
    assert not thread.is_alive() and store.holder == ""


def test_work_that_outlasts_the_renew_deadline_leaves_the_lease_to_expire(
    apiserver: ScriptedApiServer, store: LeaseStore
) -> None:
    elector = LeaderElector(
        apiserver.api_client(), "ns", "lock", "a", lease_duration_seconds=2, renew_deadline_seconds=1, retry_period_seconds=0.1
    )
    stop, stopped, never = threading.Event(), threading.Event(), threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop, never.wait, stopped.set), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while store.holder != "a" and time.monotonic() < deadline:
        time.sleep(0.02)

    stop.set()
    assert stopped.wait(timeout=3), "a clean stop must not wait for the work beyond the renew deadline"
    assert store.holder == "a", "the lease was released while the work was still running"
    never.set()


def test_a_slow_apiserver_cannot_stretch_leadership_past_the_renew_deadline(
    apiserver: ScriptedApiServer, store: LeaseStore
) -> None:
    """Requests that hang must not keep a leader believing it leads after the renew deadline:
    other replicas may take the lease a lease duration after its last renewal."""
    elector = LeaderElector(
        apiserver.api_client(), "ns", "lock", "a", lease_duration_seconds=4, renew_deadline_seconds=3, retry_period_seconds=0.1
    )
    stopped = threading.Event()
    thread = threading.Thread(target=elector.run, args=(threading.Event(), lambda: None, stopped.set), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while store.holder != "a" and time.monotonic() < deadline:
        time.sleep(0.02)
    renewed_version = store.version
    while store.version == renewed_version and time.monotonic() < deadline:
        time.sleep(0.005)
    # Just renewed: from now on each read is slow and each write times out (1.5 s), so one
    # attempt takes 2 s; the second would end 4.2 s after the renewal, when others may lead.
    last_renewal = time.monotonic()
    store.delay_get_seconds, store.delay_put_seconds = 0.5, 10.0

    assert stopped.wait(timeout=10)
    gave_up_after = time.monotonic() - last_renewal
    assert gave_up_after < 3 + 0.5, f"led on {gave_up_after:.1f}s after the last renewal (renew deadline 3s)"
    thread.join(timeout=5)
    assert not thread.is_alive() and not elector.is_leader


def test_holds_lease_only_within_the_renew_deadline_of_the_last_renewal(
    store: LeaseStore, candidates: list[Candidate], monkeypatch: pytest.MonkeyPatch,
) -> None:
    leader = candidates[0]
    assert not leader.elector.holds_lease()
    leader.thread.start()
    assert leader.next_transition() == "started"
    assert leader.elector.holds_lease()
    # A process frozen past its renew deadline wakes up: its elector has not noticed yet (still
    # "leading"), but it must not act.
    store.broken = True
    woke_at = time.monotonic() + leader.elector.renew_deadline_seconds + 0.5
    monkeypatch.setattr(leadership, "time", types.SimpleNamespace(monotonic=lambda: woke_at))
    assert leader.elector.is_leader and not leader.elector.holds_lease()


def test_holds_lease_for_an_action_only_if_it_ends_within_the_renew_deadline(
    store: LeaseStore, candidates: list[Candidate], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An action that would outlast the renew deadline is not started: the lease must surely
    stay ours until it ends."""
    leader = candidates[0]
    leader.thread.start()
    assert leader.next_transition() == "started"
    deadline = leader.elector.renew_deadline_seconds
    store.broken = True  # no renewal from now on
    renewed_at = leader.elector._renewal_started_at
    monkeypatch.setattr(leadership, "time", types.SimpleNamespace(monotonic=lambda: renewed_at + deadline / 2))
    assert leader.elector.holds_lease(deadline / 4)
    assert not leader.elector.holds_lease(deadline / 2 + 0.1)
