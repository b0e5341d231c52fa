"""The fleet figure measures each count on a fleet of exactly that many clusters, created at once
from none and deleted before the next; the request baseline is taken while the largest one runs."""
from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks import fleet_figures
from benchmarks.apiserver_requests import RequestRate
from benchmarks.fleet_figures import IdleWindow, fleet_names, not_running, wait_until_none
from kube_sandbox.testing import WaitTimeout


def item(name: str, phase: str | None = "Running", ready: int | None = 1) -> dict[str, Any]:
    status = None if phase is None else {"phase": phase, "readyCount": ready}
    return {"metadata": {"name": name}, "status": status}


@pytest.mark.parametrize(("listed", "expected"), [
    ([item("a"), item("b")], []),
    ([item("a")], ["b"]),  # not listed (yet)
    ([item("a", phase=None), item("b")], ["a"]),  # no status yet
    ([item("a", phase="Creating", ready=0), item("b")], ["a"]),
    ([item("a", ready=0), item("b")], ["a"]),  # Running, but its member not ready
    ([item("a"), item("b"), item("someone-else", phase="Failed")], []),  # others are not ours to wait for
])
def test_not_running(listed: list[dict[str, Any]], expected: list[str]) -> None:
    assert not_running(["a", "b"], listed) == expected


def test_each_count_has_its_own_names() -> None:
    assert fleet_names(3) == ["fleet3-0", "fleet3-1", "fleet3-2"]
    assert not set(fleet_names(10)) & set(fleet_names(50))


def test_wait_until_none_names_what_is_left_on_timeout() -> None:
    with pytest.raises(WaitTimeout, match=r"2 still: pod fleet10-0, EtcdCluster fleet10-1"):
        wait_until_none(lambda: ["pod fleet10-0", "EtcdCluster fleet10-1"], timeout=0, interval=0, what="gone")
    answers = iter([["pod fleet10-0"], []])
    wait_until_none(lambda: next(answers), timeout=5, interval=0, what="gone")


class FakeClusters:
    """BenchClusters in one namespace: every cluster created says Running at once; pods never linger."""

    def __init__(self, events: list[str]) -> None:
        self.namespace = "bench-fleet-x"
        self.events = events
        self.items: list[dict[str, Any]] = []
        self.custom = self
        self.core = self

    def create(self, name: str, size: int) -> None:
        self.items.append(item(name))

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str) -> dict[str, Any]:
        return {"items": list(self.items)}

    def delete_collection_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                                   plural: str) -> None:
        self.events.append(f"delete {len(self.items)}")
        self.items.clear()

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        return type("PodList", (), {"items": []})()


def test_each_count_is_a_fleet_of_its_own_and_the_baseline_is_taken_at_the_largest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    clusters = FakeClusters(events)

    @contextlib.contextmanager
    def namespace(sandbox: object, figure: str) -> Iterator[str]:
        yield clusters.namespace

    def idle_window(sandbox: object, operator: object, bench: object, count: int, window: float) -> IdleWindow:
        events.append(f"window {count}: {len(clusters.items)} clusters")
        rate = RequestRate(seconds=window, by_kind=Counter({("get", "pods"): int(window)}))
        return IdleWindow(count, len(clusters.items), 0.1, 80.0, 0.01, rate)

    def baseline(sandbox: object, operator: object, fleet: fleet_figures.Fleet, window: float) -> RequestRate:
        events.append(f"baseline: {len(clusters.items)} clusters")
        return RequestRate(seconds=window, by_kind=Counter({("get", "pods"): int(window / 2)}))

    monkeypatch.setattr(fleet_figures, "bench_namespace", namespace)
    monkeypatch.setattr(fleet_figures, "BenchClusters", lambda sandbox, ns: clusters)
    monkeypatch.setattr(fleet_figures, "_idle_window", idle_window)
    monkeypatch.setattr(fleet_figures, "_baseline_requests", baseline)
    monkeypatch.setattr(fleet_figures, "SETTLE_SECONDS", 0.0)

    results = fleet_figures.measure_fleet(object(), object(), [50, 10, 100, 50], 60.0)  # type: ignore[arg-type]

    assert events == ["window 10: 10 clusters", "delete 10",
                      "window 50: 50 clusters", "delete 50",
                      "window 100: 100 clusters", "baseline: 100 clusters", "delete 100"]
    by_figure = {r.figure: r for r in results}
    assert [r.figure for r in results][:3] == [f"fleet: {n} clusters all Running" for n in (10, 50, 100)]
    requests = by_figure["fleet: idle API req/s per cluster (100 clusters)"]
    assert (requests.value, requests.floor) == ((1.0 - 0.5) / 100, 0.5)  # the same baseline for every count
    assert by_figure["fleet: idle API req/s per cluster (10 clusters)"].value == (1.0 - 0.5) / 10
