"""watch_forever through the real kubernetes client against a scripted apiserver: list then
watch, bookmarks, expiry, ERROR events, dropped connections, failing consumers, prompt stop."""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client import CoreV1Api, CustomObjectsApi

from kube_adapter.watching import RELISTED, SYNC, object_key, watch_forever
from tests.unit.kube_adapter.recording_clock import RecordingClock
from tests.unit.kube_adapter.scripted_apiserver import Reply, ScriptedApiServer, Stream, status_body

PODS = "/api/v1/namespaces/ns/pods"
CLUSTERS = "/apis/etcd.database.coreos.com/v1beta2/etcdclusters"


def pod(name: str, resource_version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": resource_version, "uid": f"uid-{name}"}}


def pod_list(resource_version: str, *pods: dict[str, Any], continue_token: str = "") -> dict[str, Any]:
    metadata = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": list(pods)}


def event(event_type: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": event_type, "object": obj}


def bookmark(resource_version: str) -> dict[str, Any]:
    return event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": resource_version}})


class Recorder:
    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()

    def __call__(self, event_type: str, obj: dict[str, Any]) -> None:
        self.events.put((event_type, obj))

    def next(self, timeout: float = 5.0) -> tuple[str, str]:
        """(type, key) of the next event; RELISTED gives its keys joined by commas."""
        try:
            event_type, obj = self.events.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no watch event within {timeout}s")
        if event_type == RELISTED:
            return event_type, ",".join(map(str, obj["keys"]))
        return event_type, str(object_key(obj))

    def take(self, count: int) -> list[tuple[str, str]]:
        return [self.next() for _ in range(count)]


@pytest.fixture
def run_watch(apiserver: ScriptedApiServer, recording_clock: RecordingClock) -> Iterator[Callable[..., Recorder]]:
    """Start watch_forever in a thread, its backoff on `recording_clock`; stop it (and check that
    it returned) afterwards."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(list_fn: Callable[..., Any] | None = None, on_event: Callable[..., None] | None = None, **kwargs: Any) -> Recorder:
        recorder = Recorder()
        target = list_fn or CoreV1Api(apiserver.api_client()).list_namespaced_pod
        if list_fn is None:
            kwargs.setdefault("namespace", "ns")
        thread = threading.Thread(
            target=watch_forever,
            args=(target,),
            kwargs=dict(stop=stop, on_event=on_event or recorder, name="test", clock=recording_clock, **kwargs),
            daemon=True,
        )
        thread.start()
        threads.append(thread)
        return recorder

    yield start
    stop.set()
    for thread in threads:
        thread.join(timeout=5)  # a bound for failing only: a stop ends a held stream at once
        assert not thread.is_alive(), "watch_forever did not return after stop"


def test_lists_then_watches_from_the_list_resource_version(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10", pod("a", "5"), pod("b", "7"))))
    apiserver.script(
        "GET", PODS,
        Stream([event("ADDED", pod("c", "11")), event("MODIFIED", pod("a", "12")), event("DELETED", pod("b", "13"))], end="hold"),
        watch=True,
    )
    recorder = run_watch(label_selector="app=etcd", timeout_seconds=30)

    assert recorder.take(6) == [
        (SYNC, "ns/a"), (SYNC, "ns/b"), (RELISTED, "ns/a,ns/b"),
        ("ADDED", "ns/c"), ("MODIFIED", "ns/a"), ("DELETED", "ns/b"),
    ]
    listed = apiserver.next_request()
    assert not listed.is_watch and listed.query["labelSelector"] == "app=etcd"
    watched = apiserver.next_request()
    assert watched.is_watch
    assert watched.query["resourceVersion"] == "10"
    assert watched.query["allowWatchBookmarks"] == "true"
    assert watched.query["timeoutSeconds"] == "30"
    assert watched.query["labelSelector"] == "app=etcd"


def test_listed_items_get_kind_and_api_version(apiserver: ScriptedApiServer) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10", pod("a", "5"))))
    seen: list[dict[str, Any]] = []
    stop = threading.Event()

    def on_event(event_type: str, obj: dict[str, Any]) -> None:
        seen.append(obj)
        stop.set()

    watch_forever(CoreV1Api(apiserver.api_client()).list_namespaced_pod, namespace="ns", stop=stop, on_event=on_event, name="t")
    assert (seen[0]["kind"], seen[0]["apiVersion"]) == ("Pod", "v1")


def test_bookmarks_move_the_resource_version_without_an_event(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10")))
    apiserver.script("GET", PODS, Stream([bookmark("20")]), Stream([event("ADDED", pod("a", "21"))], end="hold"), watch=True)
    recorder = run_watch()

    assert recorder.take(2) == [(RELISTED, ""), ("ADDED", "ns/a")]
    requests = [apiserver.next_request() for _ in range(3)]
    assert [r.query.get("resourceVersion") for r in requests if r.is_watch] == ["10", "20"]


def test_server_timeout_resumes_from_the_last_event_without_relisting(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10")))
    apiserver.script("GET", PODS, Stream([event("ADDED", pod("a", "15"))]), Stream([], end="hold"), watch=True)
    run_watch()

    resumed = apiserver.next_request(matching=lambda r: r.is_watch and r.query.get("resourceVersion") == "15")
    assert resumed.query["allowWatchBookmarks"] == "true"
    assert sum(1 for r in apiserver.seen if not r.is_watch) == 1


def test_expired_event_relists_and_reports_the_full_set(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    apiserver.script(
        "GET", PODS,
        Reply(body=pod_list("10", pod("a", "5"), pod("b", "6"))),
        Reply(body=pod_list("40", pod("a", "5"))),  # b was deleted while we were not watching
    )
    expired = event("ERROR", status_body(410, "Expired", "too old resource version: 10 (30)"))
    apiserver.script("GET", PODS, Stream([expired], end="hold"), watch=True)
    recorder = run_watch()

    assert recorder.take(5) == [
        (SYNC, "ns/a"), (SYNC, "ns/b"), (RELISTED, "ns/a,ns/b"),
        (SYNC, "ns/a"), (RELISTED, "ns/a"),
    ]
    apiserver.next_request(matching=lambda r: r.is_watch and r.query.get("resourceVersion") == "40")


def test_410_on_watch_start_relists(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10")), Reply(body=pod_list("50")))
    apiserver.script("GET", PODS, Reply(410, status_body(410, "Gone", "too old")), watch=True)
    recorder = run_watch()

    assert recorder.take(2) == [(RELISTED, ""), (RELISTED, "")]
    apiserver.next_request(matching=lambda r: r.is_watch and r.query.get("resourceVersion") == "50")


def test_other_error_events_relist_after_backoff(
    apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder], recording_clock: RecordingClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10")), Reply(body=pod_list("60")))
    internal = event("ERROR", status_body(500, "InternalError", "etcd is sad"))
    apiserver.script("GET", PODS, Stream([internal], end="hold"), watch=True)
    recorder = run_watch()

    assert recorder.take(2) == [(RELISTED, ""), (RELISTED, "")]
    assert any("etcd is sad" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)
    assert recording_clock.waits == [pytest.approx(1.0, rel=0.2)], "one jittered backoff before the relist"


def test_dropped_connection_resumes_from_the_last_resource_version(
    apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder], recording_clock: RecordingClock,
) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10")))
    apiserver.script(
        "GET", PODS,
        Stream([event("ADDED", pod("a", "11"))], end="drop"),
        Stream([event("MODIFIED", pod("a", "12"))], end="hold"),
        watch=True,
    )
    recorder = run_watch()

    assert recorder.take(3) == [(RELISTED, ""), ("ADDED", "ns/a"), ("MODIFIED", "ns/a")]
    watch_versions = [r.query.get("resourceVersion") for r in apiserver.seen if r.is_watch]
    assert watch_versions == ["10", "11"]
    assert sum(1 for r in apiserver.seen if not r.is_watch) == 1
    assert recording_clock.waits == [pytest.approx(1.0, rel=0.2)]


def test_failing_list_is_retried_after_a_growing_backoff(
    apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder], recording_clock: RecordingClock,
) -> None:
    apiserver.script(
        "GET", PODS,
        Reply(503, status_body(503, "ServiceUnavailable")),
        Reply(403, status_body(403, "Forbidden", "pods is forbidden")),
        Reply(body=pod_list("10", pod("a", "1"))),
    )
    recorder = run_watch()

    assert recorder.take(2) == [(SYNC, "ns/a"), (RELISTED, "ns/a")]
    assert recording_clock.waits == [pytest.approx(1.0, rel=0.2), pytest.approx(2.0, rel=0.2)]


def test_list_pages_are_followed(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    apiserver.script(
        "GET", PODS,
        Reply(body=pod_list("10", pod("a", "1"), continue_token="page-2")),
        Reply(body=pod_list("10", pod("b", "2"))),
    )
    recorder = run_watch()

    assert recorder.take(3) == [(SYNC, "ns/a"), (SYNC, "ns/b"), (RELISTED, "ns/a,ns/b")]
    first, second = apiserver.next_request(), apiserver.next_request()
    assert "continue" not in first.query and second.query["continue"] == "page-2"
    assert first.query["limit"] == "500"


def test_a_failing_consumer_does_not_stop_the_watch(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10", pod("bad", "1"), pod("good", "2"))))
    recorder = Recorder()

    def on_event(event_type: str, obj: dict[str, Any]) -> None:
        if obj.get("metadata", {}).get("name") == "bad":
            raise RuntimeError("cannot handle this one")
        recorder(event_type, obj)

    run_watch(on_event=on_event)
    assert recorder.take(2) == [(SYNC, "ns/good"), (RELISTED, "ns/bad,ns/good")]


def test_custom_objects_across_namespaces(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    cluster = {
        "apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster",
        "metadata": {"name": "c1", "namespace": "team-a", "resourceVersion": "3"}, "spec": {"size": 3},
    }
    listing = {"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdClusterList", "metadata": {"resourceVersion": "9"}, "items": [cluster]}
    apiserver.script("GET", CLUSTERS, Reply(body=listing))
    apiserver.script("GET", CLUSTERS, Stream([event("DELETED", cluster)], end="hold"), watch=True)
    recorder = run_watch(
        list_fn=CustomObjectsApi(apiserver.api_client()).list_cluster_custom_object,
        group="etcd.database.coreos.com", version="v1beta2", plural="etcdclusters",
    )

    assert recorder.take(3) == [(SYNC, "team-a/c1"), (RELISTED, "team-a/c1"), ("DELETED", "team-a/c1")]


def test_namespaced_custom_objects(apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder]) -> None:
    path = "/apis/etcd.database.coreos.com/v1beta2/namespaces/team-a/etcdclusters"
    apiserver.script("GET", path, Reply(body={"kind": "EtcdClusterList", "metadata": {"resourceVersion": "9"}, "items": []}))
    recorder = run_watch(
        list_fn=CustomObjectsApi(apiserver.api_client()).list_namespaced_custom_object,
        group="etcd.database.coreos.com", version="v1beta2", namespace="team-a", plural="etcdclusters",
    )

    assert recorder.next() == (RELISTED, "")
    apiserver.next_request(matching=lambda r: r.is_watch and r.path == path)


def test_stop_returns_promptly_while_the_stream_is_idle(apiserver: ScriptedApiServer) -> None:
    apiserver.script("GET", PODS, Reply(body=pod_list("10")))
    stop = threading.Event()
    thread = threading.Thread(
        target=watch_forever,
        args=(CoreV1Api(apiserver.api_client()).list_namespaced_pod,),
        kwargs=dict(namespace="ns", stop=stop, on_event=lambda t, o: None, name="idle", timeout_seconds=300),
        daemon=True,
    )
    thread.start()
    watching = apiserver.next_request(matching=lambda r: r.is_watch)

    stop.set()
    # The stream is held open until the test ends: only the client closing it lets the thread go.
    assert apiserver.next_hang_up() == watching
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_object_key() -> None:
    assert object_key({"metadata": {"name": "n", "namespace": "ns"}}) == ("ns", "n")
    assert str(object_key({"metadata": {"name": "n", "namespace": "ns"}})) == "ns/n"
    assert str(object_key({"metadata": {"name": "node-1"}})) == "node-1"


def test_progress_is_reported_on_lists_bookmarks_and_quiet_stream_ends_never_on_failures(
    apiserver: ScriptedApiServer, run_watch: Callable[..., Recorder], recording_clock: RecordingClock,
) -> None:
    """What /healthz reads: a quiet watch still shows progress; one that keeps failing does not."""
    progress: queue.Queue[str] = queue.Queue()
    apiserver.script(
        "GET", PODS,
        Reply(503, status_body(503, "ServiceUnavailable")),
        Reply(body=pod_list("10")),
    )
    apiserver.script("GET", PODS, Stream([bookmark("20")]), Stream([], end="hold"), watch=True)
    run_watch(on_progress=lambda: progress.put("progress"))
    # The failed list: none. The list, the bookmark, the stream the server ended: one each.
    assert [progress.get(timeout=5) for _ in range(3)] == ["progress"] * 3
    assert len(recording_clock.waits) == 1  # the one failure waited, and reported no progress
