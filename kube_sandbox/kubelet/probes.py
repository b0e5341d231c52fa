"""Liveness, readiness and startup probes: parsing, one check, and the per-probe loop thread.

Each running container gets one thread per probe it declares; a thread reports only threshold
crossings (ready/unready, live->dead, started) to its pod worker, which decides what to do.
"""
from __future__ import annotations

import http.client
import logging
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Union

from kube_sandbox.binaries import kube_version

log = logging.getLogger(__name__)

LIVENESS = "liveness"
READINESS = "readiness"
STARTUP = "startup"
PROBE_OUTPUT_LIMIT = 10 * 1024


class InvalidProbe(ValueError):
    pass


@dataclass(frozen=True)
class ExecCheck:
    command: tuple[str, ...]


@dataclass(frozen=True)
class HttpGetCheck:
    port: int | str
    path: str = "/"
    scheme: str = "HTTP"
    host: str = ""
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TcpSocketCheck:
    port: int | str
    host: str = ""


Check = Union[ExecCheck, HttpGetCheck, TcpSocketCheck]


@dataclass(frozen=True)
class Probe:
    kind: str
    check: Check
    initial_delay_seconds: float = 0.0
    period_seconds: float = 10.0
    timeout_seconds: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3


def parse_probe(kind: str, raw: dict[str, Any] | None) -> Probe | None:
    """A container's `livenessProbe`/`readinessProbe`/`startupProbe` -> Probe, with API defaults."""
    if not raw:
        return None
    check: Check
    if raw.get("exec"):
        command = raw["exec"].get("command") or []
        if not command:
            raise InvalidProbe(f"{kind} probe: exec needs a command")
        check = ExecCheck(tuple(str(c) for c in command))
    elif raw.get("httpGet"):
        h = raw["httpGet"]
        check = HttpGetCheck(port=_port(h.get("port")), path=h.get("path") or "/",
                             scheme=(h.get("scheme") or "HTTP").upper(), host=h.get("host") or "",
                             headers=tuple((x["name"], x["value"]) for x in h.get("httpHeaders") or []))
    elif raw.get("tcpSocket"):
        t = raw["tcpSocket"]
        check = TcpSocketCheck(port=_port(t.get("port")), host=t.get("host") or "")
    else:
        raise InvalidProbe(f"{kind} probe has no exec, httpGet or tcpSocket handler")
    success_threshold = int(raw.get("successThreshold") or 1)
    if kind in (LIVENESS, STARTUP):
        success_threshold = 1  # the API enforces this; be lenient with what we are given
    return Probe(
        kind=kind, check=check,
        initial_delay_seconds=float(raw.get("initialDelaySeconds") or 0),
        period_seconds=float(raw.get("periodSeconds") or 10),
        timeout_seconds=float(raw.get("timeoutSeconds") or 1),
        success_threshold=success_threshold,
        failure_threshold=int(raw.get("failureThreshold") or 3),
    )


def _port(value: object) -> int | str:
    if value is None:
        raise InvalidProbe("probe needs a port")
    if isinstance(value, int):
        return value
    text = str(value)
    return int(text) if text.isdigit() else text


@dataclass(frozen=True)
class ProbeTarget:
    """Where and how a container's probes run: its pod IP, named ports and process context."""

    pod_ip: str
    ports: Mapping[str, int]
    env: Mapping[str, str]
    cwd: Path
    rewrite: Callable[[str], str] = field(default=lambda text: text)
    exec_prefix: tuple[str, ...] = ()  # runs exec checks inside a real container (`runc exec <id>`)

    def resolve_port(self, port: int | str) -> int:
        if isinstance(port, int):
            return port
        if port in self.ports:
            return self.ports[port]
        raise InvalidProbe(f"unknown container port name {port!r}")


@dataclass(frozen=True)
class CheckResult:
    success: bool
    message: str = ""


def run_check(check: Check, target: ProbeTarget, timeout: float) -> CheckResult:
    try:
        if isinstance(check, ExecCheck):
            return _exec(check, target, timeout)
        if isinstance(check, HttpGetCheck):
            return _http_get(check, target, timeout)
        return _tcp(check, target, timeout)
    except InvalidProbe as e:
        return CheckResult(False, str(e))


def _exec(check: ExecCheck, target: ProbeTarget, timeout: float) -> CheckResult:
    argv = [*target.exec_prefix, *check.command] if target.exec_prefix else [target.rewrite(a) for a in check.command]
    try:
        process = subprocess.Popen(argv, env=dict(target.env), cwd=target.cwd, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return CheckResult(False, f"exec {argv[0]!r} failed: {e}")
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        process.communicate()
        return CheckResult(False, f"command timed out after {timeout:g}s")
    finally:
        _kill_group(process.pid)  # no leftovers from `sh -c '... &'`
    text = output[:PROBE_OUTPUT_LIMIT].decode(errors="replace").strip()
    if process.returncode == 0:
        return CheckResult(True, text)
    return CheckResult(False, f"command exited with {process.returncode}: {text}")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


LOOPBACK_HOSTS = ("", "localhost", "127.0.0.1")  # the pod's own loopback is its pod IP here


def _http_get(check: HttpGetCheck, target: ProbeTarget, timeout: float) -> CheckResult:
    host = target.pod_ip if check.host in LOOPBACK_HOSTS else check.host
    port = target.resolve_port(check.port)
    connection: http.client.HTTPConnection
    if check.scheme == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"User-Agent": _probe_user_agent(), "Accept": "*/*", **dict(check.headers)}
    try:
        connection.request("GET", check.path if check.path.startswith("/") else "/" + check.path, headers=headers)
        response = connection.getresponse()
        body = response.read(PROBE_OUTPUT_LIMIT).decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        return CheckResult(False, f'Get "{check.scheme.lower()}://{host}:{port}{check.path}": {e}')
    finally:
        connection.close()
    if 200 <= response.status < 400:
        return CheckResult(True, body)
    return CheckResult(False, f"HTTP probe failed with statuscode: {response.status}")


def _tcp(check: TcpSocketCheck, target: ProbeTarget, timeout: float) -> CheckResult:
    host = target.pod_ip if check.host in LOOPBACK_HOSTS else check.host
    port = target.resolve_port(check.port)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return CheckResult(True)
    except OSError as e:
        return CheckResult(False, f"dial tcp {host}:{port}: {e}")


# (probe kind, healthy?, message) -> None; called only when the thresholded outcome changes
ProbeReport = Callable[[str, bool, str], None]


class ProbeLoop:
    """Runs one probe of one container run until `stop` is set.

    Liveness and readiness wait for `started` (set once a startup probe succeeds, or at once
    when there is none)."""

    def __init__(self, probe: Probe, target: ProbeTarget, stop: threading.Event, started: threading.Event,
                 report: ProbeReport, name: str) -> None:
        self.probe = probe
        self.target = target
        self.stop = stop
        self.started = started
        self.report = report
        self.thread = threading.Thread(target=self._run, name=f"probe-{probe.kind}-{name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        probe = self.probe
        begun = time.monotonic()
        if probe.kind != STARTUP:
            while not self.started.wait(0.2):
                if self.stop.is_set():
                    return
        remaining = probe.initial_delay_seconds - (time.monotonic() - begun)
        if remaining > 0 and self.stop.wait(remaining):
            return
        outcome: bool | None = True if probe.kind == LIVENESS else None
        successes = failures = 0
        while not self.stop.is_set():
            result = run_check(probe.check, self.target, probe.timeout_seconds)
            if self.stop.is_set():
                return
            if result.success:
                successes, failures = successes + 1, 0
                if successes >= probe.success_threshold and outcome is not True:
                    outcome = True
                    self.report(probe.kind, True, result.message)
                    if probe.kind == STARTUP:
                        return
            else:
                successes, failures = 0, failures + 1
                if failures >= probe.failure_threshold and outcome is not False:
                    outcome = False
                    self.report(probe.kind, False, result.message)
                    if probe.kind in (STARTUP, LIVENESS):
                        return  # the container is about to be restarted; a new run probes anew
                elif probe.kind == READINESS and outcome is None and failures == 1:
                    outcome = False  # not ready from the start; nothing to report
            if self.stop.wait(probe.period_seconds):
                return


@lru_cache(maxsize=1)
def _probe_user_agent() -> str:
    """What a kubelet of the sandbox's release sends with an HTTP probe: `kube-probe/<major>.<minor>`."""
    major, minor = kube_version().split(".")[:2]
    return f"kube-probe/{major}.{minor}"
