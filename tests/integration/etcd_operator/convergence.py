"""What the chaos tests (failure injection, partitions) share: a writer through the client Service
under a change, the wait until a cluster converged to its spec with nothing left over, and the
check that every acknowledged write is still readable."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.client_writes import Writer
from tests.integration.etcd_operator.etcd_data import describe_members, read_prefix, started
from tests.integration.etcd_operator.operator_clusters import Clusters
from tests.integration.etcd_operator.status_history import conditions

IMAGE = "quay.io/coreos/etcd:v{}"
PREFIX = "chaos/"
CONVERGE_TIMEOUT_SECONDS = 420.0


def converged(clusters: Clusters, name: str, size: int, version: str, last: list[str],
               annotations: dict[str, str] | None = None) -> bool:
    """The spec reached and nothing left over: `size` members in etcd, all started voting members;
    exactly their pods (none terminating, no leftover), all on `version`; status Running."""
    status = clusters.status(name)
    members = clusters.member_list(name)
    pods = clusters.pods(name)
    pod_names = sorted(p.metadata.name for p in pods)
    images = {p.spec.containers[0].image for p in pods}
    last[:] = [f"status {status.get('phase')} {status.get('readyCount')}/{status.get('size')} "
               f"current={status.get('currentVersion')} message={status.get('message')!r}; "
               f"members: {describe_members(members)}; pods {pod_names} images {sorted(images)}"]
    return (status.get("phase") == "Running" and status.get("size") == size and status.get("readyCount") == size
            and status.get("currentVersion") == version
            and conditions(status).get("Upgrading", ("False",))[0] == "False"
            and len(members) == size and all(started(m) and not m.get("isLearner") for m in members)
            and sorted(m["name"] for m in members) == pod_names
            and all(p.metadata.deletion_timestamp is None for p in pods)
            and images == {IMAGE.format(version)}
            and all((p.metadata.annotations or {}).get(k) == v for p in pods for k, v in (annotations or {}).items()))


def wait_converged(clusters: Clusters, name: str, size: int, version: str, what: str,
                    annotations: dict[str, str] | None = None) -> None:
    last: list[str] = []
    try:
        wait_for(lambda: converged(clusters, name, size, version, last, annotations), timeout=CONVERGE_TIMEOUT_SECONDS,
                 what=f"{name} converged to {what}")
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast seen: {last}") from None


def drive(clusters: Clusters, name: str, writer: Writer, spec: dict[str, Any], size: int, version: str) -> None:
    """Patch the spec, wait until converged to it, and check that writes still go through."""
    clusters.patch_spec(name, spec)
    wait_converged(clusters, name, size, version, str(spec), (spec.get("pod") or {}).get("annotations"))
    writes_flow(writer, f"after {spec}")


def writes_flow(writer: Writer, when: str) -> None:
    count = len(writer.acknowledged)
    wait_for(lambda: writer.progressed(count + 3), timeout=60, what=f"writes {when}")


def assert_no_write_lost(clusters: Clusters, name: str, writer: Writer) -> None:
    stored = read_prefix(clusters.sandbox, clusters.member_urls(name), PREFIX)
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost or changed, e.g. {sorted(lost)[:5]}"


@contextmanager
def writing(clusters: Clusters, name: str) -> Iterator[Writer]:
    writer = Writer(clusters.sandbox, clusters.client_url(name), PREFIX)
    writer.start()
    try:
        wait_for(lambda: writer.progressed(5), timeout=60, what="writer making progress")
        yield writer
    finally:
        writer.finish()
    print(f"\nwrites: {len(writer.acknowledged)} acknowledged, {len(writer.failures)} failed "
          f"{sorted({error for _, error in writer.failures})[:3]}")
