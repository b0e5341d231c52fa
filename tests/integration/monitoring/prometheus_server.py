"""A real Prometheus (Debian's) run by a test on loopback, configured with the shipped scrape
config and alert rules of deploy/prometheus/, discovering pods through the sandbox's API server."""
from __future__ import annotations

import json
import socket
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kube_sandbox.binaries import go_tool
from kube_sandbox.config import CHECKOUT_DIR, HOST_IP
from kube_sandbox.testing import Sandbox

PROMETHEUS_DIR = CHECKOUT_DIR / "deploy" / "prometheus"
MONITORING_NAMESPACE = "monitoring"
SERVICE_ACCOUNT = "prometheus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST_IP, 0))
        return int(s.getsockname()[1])


def prometheus_config(sandbox: Sandbox, token_file: Path, *, interval: str,
                      rule_files: list[Path] | None = None) -> dict[str, Any]:
    """deploy/prometheus/scrape-config.yaml (both jobs: the operators and the etcd members) and every
    rule file (or `rule_files`), plus what an in-cluster Prometheus finds by itself: the API server's
    address, its CA and a token of the ServiceAccount `prometheus`."""
    shipped = yaml.safe_load((PROMETHEUS_DIR / "scrape-config.yaml").read_text())
    for job in shipped["scrape_configs"]:
        for sd in job["kubernetes_sd_configs"]:
            sd["api_server"] = sandbox.config.apiserver_url
            sd["tls_config"] = {"ca_file": str(sandbox.config.ca_cert)}
            sd["authorization"] = {"credentials_file": str(token_file)}
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(p) for p in (rule_files if rule_files is not None else shipped_rule_files())],
        "scrape_configs": shipped["scrape_configs"],
    }


def shipped_rule_files() -> list[Path]:
    return sorted(PROMETHEUS_DIR.glob("*-rules.yaml"))


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def query_api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def targets(self, job: str) -> list[dict[str, Any]]:
        return [t for t in self.query_api("/api/v1/targets")["activeTargets"] if t["labels"].get("job") == job]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.query_api("/api/v1/query", query=expr)["result"]
        return result

    def fired(self, name: str, within: str, **labels: str) -> list[dict[str, Any]]:
        """The alert's `ALERTS` series that were firing at some evaluation within `within` (a
        PromQL duration): an alert that fired and resolved between two polls is still seen."""
        matchers = "".join(f', {k}="{v}"' for k, v in labels.items())
        return self.query(f'max_over_time(ALERTS{{alertname="{name}", alertstate="firing"{matchers}}}[{within}])')

    def alerts(self, name: str, **labels: str) -> list[dict[str, Any]]:
        return [a for a in self.query_api("/api/v1/alerts")["alerts"] if a["labels"].get("alertname") == name
                and all(a["labels"].get(k) == v for k, v in labels.items())]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def start_prometheus(sandbox: Sandbox, directory: Path, *, interval: str = "2s",
                     rule_files: list[Path] | None = None) -> Prometheus:
    """Apply the shipped discovery RBAC, get the ServiceAccount a token, start Prometheus (with the
    shipped rule files, or `rule_files`)."""
    binary = str(go_tool("prometheus"))
    sandbox.kubectl("create", "namespace", MONITORING_NAMESPACE, check=False)
    sandbox.kubectl("apply", "-f", str(PROMETHEUS_DIR / "prometheus-rbac.yaml"))
    token = sandbox.kubectl("-n", MONITORING_NAMESPACE, "create", "token", SERVICE_ACCOUNT, "--duration=1h").stdout.strip()
    token_file = directory / "token"
    token_file.write_text(token)
    config_file = directory / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(prometheus_config(sandbox, token_file, interval=interval,
                                                            rule_files=rule_files)))
    check = subprocess.run([str(go_tool("promtool")), "check", "config", str(config_file)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    port = _free_port()
    log = directory / "prometheus.log"
    process = subprocess.Popen(
        [binary, f"--config.file={config_file}", f"--storage.tsdb.path={directory / 'data'}",
         f"--web.listen-address={HOST_IP}:{port}"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )
    return Prometheus(f"http://{HOST_IP}:{port}", process, log)
