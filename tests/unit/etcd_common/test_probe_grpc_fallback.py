"""The probe asks over gRPC (etcdctl) only when etcd's gateway cannot dial its own member (CoreOS's
static TLS layout, issue 41): which gateway failures those are, that the answers read as the
gateway's would, and that a working gateway never starts a process."""
from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from etcd_common.etcd import probe as probe_module
from etcd_common.etcd.etcdctl import EtcdctlError
from etcd_common.etcd.probe import EtcdProbe, GatewayAnswer, gateway_cannot_dial_itself

ENDPOINT = "https://127.0.0.1:2379"
REFUSED = ('{"code":14,"message":"connection error: desc = \\"error reading server preface: remote error: '
           'tls: unknown certificate authority\\""}')
# etcdctl 3.6.16's -w json answers (numbers as JSON numbers), recorded against a CoreOS-layout member.
ETCDCTL = {
    "endpoint status": [{"Endpoint": ENDPOINT, "Status": {
        "header": {"cluster_id": 8665663439985257363, "member_id": 2756929902517475508, "revision": 1},
        "version": "3.6.16", "dbSize": 20480, "leader": 2756929902517475508, "raftIndex": 4, "raftTerm": 2}}],
    "member list": {"header": {"cluster_id": 8665663439985257363, "member_id": 2756929902517475508},
                    "members": [{"ID": 2756929902517475508, "name": "m1", "peerURLs": ["https://127.0.0.1:2380"],
                                 "clientURLs": [ENDPOINT]}]},
    "get health": {"header": {"cluster_id": 8665663439985257363, "member_id": 2756929902517475508}},
}


def _error(message: str, code: int | None) -> EtcdctlError:
    try:
        raise EtcdctlError(message) from GatewayAnswer(503, code)
    except EtcdctlError as e:
        return e


@pytest.mark.parametrize("error, falls_back", [
    (_error('connection error: desc = "error reading server preface: remote error: tls: unknown certificate '
            'authority"', 14), True),
    (_error("write tcp 127.0.0.1:39042->127.0.50.1:23790: write: broken pipe", 14), True),
    (_error("etcdserver: no leader", 14), False),  # etcd's own answer: etcdctl would get the same
    (_error("etcdserver: request timed out", 4), False),
    (EtcdctlError("TLS handshake failed ([SSL: CERTIFICATE_VERIFY_FAILED])"), False),  # ours: no gateway answered
])
def test_only_the_gateways_failing_dial_of_its_own_member_is_asked_again_over_grpc(
        error: EtcdctlError, falls_back: bool) -> None:
    assert gateway_cannot_dial_itself(error) is falls_back


def _fake_etcdctl(tmp_path: Path) -> tuple[str, Path]:
    """A script answering as etcdctl 3.6 does (by its last arguments), recording each run."""
    runs = tmp_path / "runs"
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(ETCDCTL))
    script = tmp_path / "etcdctl"
    script.write_text(f"""#!/usr/bin/env python3
import json, sys
open({str(runs)!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
answers = json.load(open({str(answers)!r}))
for question, answer in answers.items():
    if " ".join(sys.argv[1:]).endswith(question):
        print(json.dumps(answer)); sys.exit(0)
sys.stderr.write("Error: unexpected " + " ".join(sys.argv[1:])); sys.exit(1)
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), runs


def test_a_member_whose_gateway_is_refused_is_read_over_grpc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary, runs = _fake_etcdctl(tmp_path)
    monkeypatch.setattr(probe_module, "_http_request", lambda *args, **kwargs: (503, REFUSED))
    probe = EtcdProbe([ENDPOINT], etcdctl_binary=binary)
    assert [m.name for m in probe.member_list()] == ["m1"]
    [status] = probe.endpoint_status()
    assert status.reachable and status.is_leader and status.version == "3.6.16" and status.db_size == 20480
    [health] = probe.endpoint_health()
    assert health.healthy and health.cluster_id == 8665663439985257363
    asked = runs.read_text().splitlines()
    assert [line.split(" --write-out json ")[-1] for line in asked] == ["member list", "endpoint status", "get health"]
    assert all(f"--endpoints {ENDPOINT}" in line for line in asked)


def test_a_working_gateway_never_starts_a_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary, runs = _fake_etcdctl(tmp_path)
    answers: dict[str, Any] = {probe_module.STATUS_PATH: ETCDCTL["endpoint status"][0]["Status"],  # type: ignore[index]
                               probe_module.MEMBER_LIST_PATH: ETCDCTL["member list"],
                               probe_module.RANGE_PATH: ETCDCTL["get health"]}
    monkeypatch.setattr(probe_module, "_http_request",
                        lambda endpoint, method, path, *args, **kwargs: (200, json.dumps(answers[path])))
    probe = EtcdProbe([ENDPOINT], etcdctl_binary=binary)
    assert [m.name for m in probe.member_list()] == ["m1"]
    assert probe.endpoint_status()[0].is_leader and probe.endpoint_health()[0].healthy
    assert not runs.exists()


def test_a_failing_grpc_answer_is_the_endpoints_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_module, "_http_request", lambda *args, **kwargs: (503, REFUSED))
    probe = EtcdProbe([ENDPOINT], etcdctl_binary=str(tmp_path / "missing-etcdctl"))
    [health] = probe.endpoint_health()
    assert not health.healthy and "cannot run etcdctl" in health.error
    with pytest.raises(EtcdctlError):
        probe.member_list()
