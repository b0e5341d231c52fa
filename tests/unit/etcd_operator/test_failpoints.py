"""Failpoints: parsed strictly from the environment, inert unless armed, fire once with a fired
file, and sit exactly before/after each effect of the executor."""
from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import pytest

from etcd_operator import actions as a
from etcd_operator import failpoints as fp
from etcd_operator.acting import ActionExecutor
from operator_runtime.cached_client import CachedClient
from tests.unit.etcd_operator.etcd_cluster_builders import healthy_cluster, member_id, name
from tests.unit.etcd_operator.recording_etcd import RecordingEtcd


class Died(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _die(code: int) -> NoReturn:
    raise Died(code)


def _armed(text: str, tmp_path: Path | None = None, env: dict[str, str] | None = None) -> fp.Failpoints:
    environ = {fp.FAILPOINTS_ENV: text, **(env or {})}
    if tmp_path is not None:
        environ[fp.FIRED_FILE_ENV] = str(tmp_path / "fired")
    failpoints = fp.Failpoints.from_environment(environ)
    failpoints.exit = _die
    return failpoints


def test_parse_accepts_when_effect_pairs_and_ignores_blanks() -> None:
    assert fp.parse_failpoints(" before:member-add, after:promote ,,") == {"before:member-add", "after:promote"}
    assert fp.parse_failpoints("") == frozenset()
    every = ",".join(f"{w}:{e}" for w in fp.WHENS for e in fp.EFFECTS)
    assert len(fp.parse_failpoints(every)) == 2 * len(fp.EFFECTS) == 16


@pytest.mark.parametrize("text", ["during:member-add", "before:member-added", "member-add", "before:", "before:*"])
def test_parse_refuses_anything_else_naming_the_choices(text: str) -> None:
    with pytest.raises(ValueError, match="before, after.*member-add, pod-create, promote"):
        fp.parse_failpoints(text)


def test_a_bad_value_stops_the_operator_at_start_up() -> None:
    with pytest.raises(ValueError, match="bogus"):
        fp.Failpoints.from_environment({fp.FAILPOINTS_ENV: "before:bogus"})


def test_nothing_happens_when_the_variable_is_unset(tmp_path: Path) -> None:
    failpoints = fp.Failpoints.from_environment({fp.FIRED_FILE_ENV: str(tmp_path / "fired")})
    failpoints.exit = _die
    assert not failpoints.armed
    for effect in fp.EFFECTS:
        with failpoints.around(effect, "ns"):
            pass
    assert not (tmp_path / "fired").exists()


def test_an_armed_failpoint_exits_with_its_code_once_and_records_itself(tmp_path: Path) -> None:
    failpoints = _armed("after:promote", tmp_path)
    with failpoints.around(fp.MEMBER_ADD, "ns"):
        pass  # not armed
    ran = []
    with pytest.raises(Died) as died:
        with failpoints.around(fp.PROMOTE, "ns"):
            ran.append("promote")
    assert died.value.code == fp.FAILPOINT_EXIT_CODE and ran == ["promote"], "after: the effect ran first"
    assert (tmp_path / "fired").read_text() == "after:promote\n"
    with failpoints.around(fp.PROMOTE, "ns"):
        pass  # fired once, now disarmed


def test_a_restarted_operator_skips_failpoints_the_fired_file_lists(tmp_path: Path) -> None:
    (tmp_path / "fired").write_text("before:member-add\n")
    failpoints = _armed("before:member-add,before:pod-create", tmp_path)
    with failpoints.around(fp.MEMBER_ADD, "ns"):
        pass
    with pytest.raises(Died):
        failpoints.reach("before", fp.POD_CREATE, "ns")
    assert (tmp_path / "fired").read_text().splitlines() == ["before:member-add", "before:pod-create"]


def test_without_a_fired_file_a_failpoint_fires_every_time() -> None:
    failpoints = _armed("before:pod-delete")
    for _ in range(2):
        failpoints.fired.clear()  # what a restart does: the memory is gone
        with pytest.raises(Died):
            failpoints.reach("before", fp.POD_DELETE, "ns")


def test_the_namespace_filter_spares_other_namespaces() -> None:
    failpoints = _armed("before:pod-delete", env={fp.NAMESPACE_ENV: "chaos"})
    failpoints.reach("before", fp.POD_DELETE, "other")
    with pytest.raises(Died):
        failpoints.reach("before", fp.POD_DELETE, "chaos")


class RecordingApi:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"create {body['metadata']['name']}")
        return {**body, "metadata": {**body["metadata"], "namespace": namespace, "uid": "u"}}

    def delete(self, namespace: str, pod: str, **options: Any) -> None:
        self.calls.append(f"delete {pod}")

    def patch(self, namespace: str, pod: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"patch {pod}")
        return {"metadata": {"name": pod, "namespace": namespace, "uid": "u"}}


def _run(action: a.Action, armed: str) -> tuple[list[str], int | None]:
    """The calls the executor made before it died (and its exit code), with `armed` armed."""
    observed = healthy_cluster(4, size=3)
    calls: list[str] = []
    api = RecordingApi(calls)
    executor = ActionExecutor(CachedClient(api), CachedClient(api), CachedClient(api),  # type: ignore[arg-type]
                              RecordingEtcd(calls), failpoints=_armed(armed))  # type: ignore[arg-type]
    try:
        executor.execute(action, observed)
    except Died as died:
        return calls, died.code
    return calls, None


NEW = "example-new"
ADD = a.AddMember(NEW, "http://new:2380", True, ((NEW, "http://new:2380"),))
REMOVE = a.RemoveMember(name(4), member_id(4), "scale", "over size")
PROMOTE = a.PromoteMember(name(4), member_id(4))
MOVE = a.MoveLeader(name(1), member_id(1), name(2), member_id(2), "test")
DELETE = a.DeletePod(name(4), "orphan", "uid-4")
DRAIN = a.SetServing(name(4), False, "removed next", "uid-4", "2026-11-23T18:00:00Z")
UNDRAIN = a.SetServing(name(4), True, "stays", "uid-4")


@pytest.mark.parametrize("action, armed, calls_before_death", [
    (ADD, "before:member-add", []),
    (ADD, "after:member-add", [f"member_add {NEW}"]),
    (ADD, "before:pod-create", [f"member_add {NEW}"]),
    (ADD, "after:pod-create", [f"member_add {NEW}", f"create {NEW}"]),
    (PROMOTE, "before:promote", []),
    (PROMOTE, "after:promote", [f"member_promote {member_id(4):x}"]),
    (MOVE, "before:move-leader", []),
    (MOVE, "after:move-leader", [f"move_leader {member_id(2):x}"]),
    (REMOVE, "before:member-remove", []),
    (REMOVE, "after:member-remove", [f"member_remove {member_id(4):x}"]),
    (REMOVE, "before:pod-delete", [f"member_remove {member_id(4):x}"]),
    (REMOVE, "after:pod-delete", [f"member_remove {member_id(4):x}", f"delete {name(4)}"]),
    (DELETE, "before:pod-delete", []),
    (DELETE, "after:pod-delete", [f"delete {name(4)}"]),
    (DRAIN, "before:drain", []),
    (DRAIN, "after:drain", [f"patch {name(4)}"]),
])
def test_each_failpoint_sits_right_before_or_after_its_effect(
        action: a.Action, armed: str, calls_before_death: list[str]) -> None:
    calls, code = _run(action, armed)
    assert (calls, code) == (calls_before_death, fp.FAILPOINT_EXIT_CODE)


@pytest.mark.parametrize("action", [ADD, PROMOTE, MOVE, REMOVE, DELETE, DRAIN, UNDRAIN])
def test_an_executor_without_failpoints_carries_every_action_out(action: a.Action) -> None:
    calls, code = _run(action, "")
    assert code is None and calls, calls


def test_labelling_a_pod_serving_again_is_no_drain_failpoint() -> None:
    calls, code = _run(UNDRAIN, "before:drain,after:drain")
    assert (calls, code) == ([f"patch {name(4)}"], None)
