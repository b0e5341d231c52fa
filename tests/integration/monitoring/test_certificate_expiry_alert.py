"""EtcdCertificateExpiresSoon (issue 24 item 4) fires in a real Prometheus for a certificate near its
end: a cluster on spec.TLS.static certificates that end in a day, the operator's not-after gauge
scraped through the shipped discovery config, the shipped alert rule evaluated on it. Only the
rule's `for:` (1 h warning, 10 min critical) is shortened here, in a copy of the rule file; the
`for:` durations themselves are promtool-tested (deploy/prometheus/etcd-operator-rules.days.test.yaml)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.tls_certs import coreos_static_tls
from tests.integration.monitoring.prometheus_server import Prometheus, shipped_rule_files, start_prometheus

ALERT = "EtcdCertificateExpiresSoon"
SHORT_FOR = "10s"


def rules_with_short_for(directory: Path) -> list[Path]:
    """The shipped rule files, the alert's `for:` shortened to SHORT_FOR in a copy of its file."""
    files = []
    for shipped in shipped_rule_files():
        rules = yaml.safe_load(shipped.read_text())
        changed = False
        for group in rules["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == ALERT:
                    rule["for"], changed = SHORT_FOR, True
        if changed:
            shipped = directory / shipped.name
            shipped.write_text(yaml.safe_dump(rules))
        files.append(shipped)
    assert any(f.parent == directory for f in files), f"no rule file holds {ALERT}"
    return files


@pytest.fixture
def short_for_prometheus(operator: Sandbox, tmp_path: Path) -> Iterator[Prometheus]:
    (tmp_path / "rules").mkdir()
    server = start_prometheus(operator, tmp_path, rule_files=rules_with_short_for(tmp_path / "rules"))
    try:
        yield server
    finally:
        server.stop()
        print(f"\nprometheus log tail:\n{server.log.read_text()[-1500:]}")


def test_expiry_alert_fires_for_a_certificate_ending_within_two_days(
        clusters: Clusters, short_for_prometheus: Prometheus, tmp_path: Path) -> None:
    name = "ending"
    ns = clusters.namespace
    tls = coreos_static_tls(tmp_path / "pki", name, ns, days=1)
    for secret in tls.secrets():
        clusters.core.create_namespaced_secret(ns, secret)
    clusters.create(etcd_cluster(name, 1, TLS=tls.spec()))
    clusters.wait_running(name, 1, timeout=180)
    labels = {"namespace": ns, "cluster": name}

    firing = wait_for(lambda: [a for a in short_for_prometheus.alerts(ALERT, **labels)
                               if a["state"] == "firing" and a["labels"].get("severity") == "critical"] or None,
                      timeout=120, what=f"{ALERT} firing (critical) for the cluster")
    certificates = {a["labels"]["certificate"] for a in short_for_prometheus.alerts(ALERT, **labels)
                    if a["state"] == "firing"}
    assert {"peer", "server", "operator"} <= certificates, certificates
    assert f"{ns}/{name}" in firing[0]["annotations"]["summary"], firing[0]
    assert "ends within 2 days" in firing[0]["annotations"]["summary"], firing[0]
    assert firing[0]["annotations"]["runbook_url"].endswith("#etcdcertificateexpiressoon"), firing[0]
