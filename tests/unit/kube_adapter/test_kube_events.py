"""Events: the object they create, repeats folded into a count, failures never raised."""
from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from kube_adapter.events import DEDUPE_WINDOW_SECONDS, EVENT_RETRY_ATTEMPTS, EventRecorder, build_event
from tests.unit.kube_adapter.recording_clock import RecordingClock
from tests.unit.kube_adapter.scripted_apiserver import Reply, ScriptedApiServer, status_body

EVENTS = "/api/v1/namespaces/ns/events"
CLUSTER = {
    "apiVersion": "etcd.database.coreos.com/v1beta2",
    "kind": "EtcdCluster",
    "metadata": {"name": "c1", "namespace": "ns", "uid": "uid-c1", "resourceVersion": "42"},
}


def echo(request: Any) -> Reply:
    return Reply(201 if request.method == "POST" else 200, request.body)


def test_event_shape() -> None:
    event = build_event(CLUSTER, "Warning", "QuorumLost", "2 of 3 members are down", component="etcd-operator", host="pod-1")

    assert event["metadata"]["namespace"] == "ns"
    assert event["metadata"]["name"].startswith("c1.")
    assert event["involvedObject"] == {
        "apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster",
        "name": "c1", "namespace": "ns", "uid": "uid-c1", "resourceVersion": "42",
    }
    assert (event["type"], event["reason"], event["message"], event["count"]) == ("Warning", "QuorumLost", "2 of 3 members are down", 1)
    assert event["source"] == {"component": "etcd-operator", "host": "pod-1"}
    assert event["firstTimestamp"] == event["lastTimestamp"] and event["firstTimestamp"].endswith("Z")


def test_long_messages_are_cut() -> None:
    assert len(build_event(CLUSTER, "Normal", "R", "x" * 5000, component="c")["message"]) == 1024


def test_a_repeat_bumps_the_count_of_the_first_event(apiserver: ScriptedApiServer) -> None:
    apiserver.fallback("POST", EVENTS, echo)
    recorder = EventRecorder(apiserver.api_client(), "etcd-operator")

    recorder.record(CLUSTER, "Normal", "MemberAdded", "added member c1-abcde")
    created = apiserver.next_request()
    name = created.body["metadata"]["name"]
    apiserver.fallback("PATCH", f"{EVENTS}/{name}", echo)
    recorder.record(CLUSTER, "Normal", "MemberAdded", "added member c1-abcde")
    recorder.record(CLUSTER, "Normal", "MemberAdded", "added member c1-abcde")
    recorder.record(CLUSTER, "Normal", "MemberAdded", "added member c1-fghij")

    first_patch, second_patch, other = (apiserver.next_request() for _ in range(3))
    assert (first_patch.method, first_patch.path, first_patch.body["count"]) == ("PATCH", f"{EVENTS}/{name}", 2)
    assert first_patch.headers["Content-Type"] == "application/merge-patch+json"
    assert second_patch.body["count"] == 3 and "lastTimestamp" in second_patch.body
    assert other.method == "POST" and other.body["message"] == "added member c1-fghij"


def test_repeats_after_the_window_make_a_new_event(apiserver: ScriptedApiServer) -> None:
    apiserver.fallback("POST", EVENTS, echo)
    clock = RecordingClock()
    recorder = EventRecorder(apiserver.api_client(), "etcd-operator", clock=clock)

    recorder.record(CLUSTER, "Normal", "MemberAdded", "same")
    apiserver.fallback("PATCH", f"{EVENTS}/{apiserver.seen[0].body['metadata']['name']}", echo)
    clock.wait(threading.Event(), DEDUPE_WINDOW_SECONDS - 1)
    recorder.record(CLUSTER, "Normal", "MemberAdded", "same")  # within the window: counted
    clock.wait(threading.Event(), DEDUPE_WINDOW_SECONDS)
    recorder.record(CLUSTER, "Normal", "MemberAdded", "same")  # a window after the last one: new
    assert [r.method for r in apiserver.seen] == ["POST", "PATCH", "POST"]
    assert apiserver.seen[-1].body["count"] == 1


def test_an_event_deleted_meanwhile_is_created_again(apiserver: ScriptedApiServer) -> None:
    apiserver.fallback("POST", EVENTS, echo)
    recorder = EventRecorder(apiserver.api_client(), "etcd-operator")
    recorder.record(CLUSTER, "Normal", "MemberAdded", "same")
    name = apiserver.next_request().body["metadata"]["name"]
    apiserver.script("PATCH", f"{EVENTS}/{name}", Reply(404, status_body(404, "NotFound")))

    recorder.record(CLUSTER, "Normal", "MemberAdded", "same")
    assert [r.method for r in apiserver.seen] == ["POST", "PATCH", "POST"]
    assert apiserver.seen[-1].body["count"] == 1


def test_failures_are_logged_not_raised(apiserver: ScriptedApiServer, caplog: pytest.LogCaptureFixture) -> None:
    apiserver.script("POST", EVENTS, Reply(403, status_body(403, "Forbidden", "events is forbidden")))
    recorder = EventRecorder(apiserver.api_client(), "etcd-operator")

    with caplog.at_level(logging.WARNING):
        recorder.record(CLUSTER, "Warning", "QuorumLost", "down")
    assert any("events is forbidden" in r.getMessage() for r in caplog.records)


def test_nothing_reachable_is_still_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    from kubernetes.client import ApiClient, Configuration

    configuration = Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing answers
    configuration.retries = False
    clock = RecordingClock()
    EventRecorder(ApiClient(configuration), "etcd-operator", clock=clock).record(CLUSTER, "Normal", "R", "m")
    assert any("could not record event" in r.getMessage() for r in caplog.records)
    # Retried, briefly: an event never holds its caller up for long.
    assert len(clock.waits) == EVENT_RETRY_ATTEMPTS - 1 and sum(clock.waits) < 5.0
