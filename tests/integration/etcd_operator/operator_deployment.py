"""The operator's own Deployment as tests handle it: deploying this checkout's code, its pod and
logs, stopping and starting it, and reading its Prometheus metrics."""
from __future__ import annotations

import hashlib
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.packaging.built_image import name_image
from tests.sandbox_sharing import require_alone

OPERATOR_NAMESPACE = "etcd-operator"
OPERATOR_DEPLOYMENT = "etcd-operator"
OPERATOR_CONTAINER = "etcd-operator"
OPERATOR_POD_SELECTOR = "app.kubernetes.io/name=etcd-operator"
METRICS_PORT = 8080
STOP_TIMEOUT_SECONDS = 90.0
START_TIMEOUT_SECONDS = 120.0
# The packages the operator image ships (the sandbox's kubelet runs them from this checkout).
SHIPPED_PACKAGES = ("etcd_operator", "etcd_common", "operator_runtime", "kube_adapter")
# On the Deployment's pod template: which sources its pods run. A pod runs the code it was
# started with, so a reused sandbox (after `make demo`, or an earlier test run before an edit)
# would keep testing old code; a new value here rolls the Deployment.
SOURCES_ANNOTATION = "etcd-operator-py.test/sources-sha256"


def shipped_sources_hash() -> str:
    """A digest of every shipped Python source of this checkout (paths and contents)."""
    digest = hashlib.sha256()
    for package in SHIPPED_PACKAGES:
        for path in sorted((CHECKOUT_DIR / package).rglob("*.py")):
            digest.update(str(path.relative_to(CHECKOUT_DIR)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return "sha256-" + digest.hexdigest()[:16]  # never all digits: kubectl's YAML would read a number


def deployed_sources_hash(sandbox: Sandbox) -> str | None:
    """The sources annotation of the Deployment in the sandbox: None if there is no Deployment,
    "" if it was applied without one (e.g. by `make demo`)."""
    result = sandbox.kubectl("-n", OPERATOR_NAMESPACE, "get", f"deployment/{OPERATOR_DEPLOYMENT}",
                             "-o", "json", check=False)
    if result.returncode != 0:
        if "NotFound" in result.stderr:
            return None
        raise AssertionError(f"cannot read the operator Deployment: {result.stderr}")
    template = yaml.safe_load(result.stdout)["spec"]["template"]
    return str((template.get("metadata") or {}).get("annotations", {}).get(SOURCES_ANNOTATION, ""))


def deploy_operator(sandbox: Sandbox, image: str = "") -> str:
    """Apply deploy/operator.yaml with this checkout's sources hash on the pod template and wait
    until the rollout is done: a Deployment found running other sources is rolled, so its pod
    runs this checkout's code. Returns a line saying what was done (the fixture prints it).
    `image`: named instead of the manifest's operator image, as `make demo` deploys it."""
    wanted = shipped_sources_hash()
    found = deployed_sources_hash(sandbox)
    text = (CHECKOUT_DIR / "deploy" / "operator.yaml").read_text()
    documents = list(yaml.safe_load_all(name_image(text, image) if image else text))
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    template_metadata = deployment["spec"]["template"].setdefault("metadata", {})
    template_metadata.setdefault("annotations", {})[SOURCES_ANNOTATION] = wanted
    sandbox.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    sandbox.kubectl("-n", OPERATOR_NAMESPACE, "rollout", "status", f"deployment/{OPERATOR_DEPLOYMENT}",
                    f"--timeout={START_TIMEOUT_SECONDS:.0f}s")
    if found is None:
        return f"operator deployed, running this checkout's sources {wanted}"
    if found == wanted:
        return f"operator Deployment reused: it already runs this checkout's sources {wanted}"
    return (f"operator Deployment reused but its pod ran other sources ({found or 'not recorded'}): "
            f"restarted it on this checkout's sources {wanted}")


def operator_logs(sandbox: Sandbox, *, previous: bool = False) -> str:
    """The current (or the previous, crashed) operator container's log."""
    args = ["-n", OPERATOR_NAMESPACE, "logs", f"deploy/{OPERATOR_DEPLOYMENT}", "--tail=-1"]
    if previous:
        args.append("--previous")
    return sandbox.kubectl(*args, check=False).stdout


def forbidden_lines(logs: str, *, allowed: tuple[str, ...] = ()) -> list[str]:
    """Log lines about a 403, but those naming one of `allowed`, those about a namespace being
    deleted (a race with a test's namespace teardown, not an RBAC gap) and those about an object
    store refusing credentials (an `s3://` location: a test of wrong credentials). Lines carry
    timestamps, so comparing sets of them survives an operator restart, where comparing counts does not."""
    skip = ("because it is being terminated", "s3://", *allowed)
    return [line for line in logs.splitlines() if "Forbidden" in line and not any(s in line for s in skip)]


def operator_pod_logs(sandbox: Sandbox, pod: str, *, previous: bool = False) -> str:
    """One operator pod's log (of its current or previous container), where several run."""
    args = ["-n", OPERATOR_NAMESPACE, "logs", pod, "-c", OPERATOR_CONTAINER, "--tail=-1"]
    if previous:
        args.append("--previous")
    return sandbox.kubectl(*args, check=False).stdout


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def operator_pods(sandbox: Sandbox) -> list[Any]:
    core = k8s.CoreV1Api(sandbox.api_client())
    return list(core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=OPERATOR_POD_SELECTOR).items)


def running_operator_pod(sandbox: Sandbox) -> Any:
    """The one live, ready operator pod (fails the wait if there is none or more than one)."""
    def single_ready() -> Any:
        live = [p for p in operator_pods(sandbox) if p.metadata.deletion_timestamp is None]
        if len(live) != 1 or not live[0].status.pod_ip:
            return None
        return live[0] if pod_ready(live[0]) else None
    return wait_for(single_ready, timeout=START_TIMEOUT_SECONDS, what="one ready operator pod")


def operator_container_status(pod: Any) -> Any:
    return next(s for s in pod.status.container_statuses or [] if s.name == OPERATOR_CONTAINER)


def wait_operator_leading(sandbox: Sandbox) -> None:
    wait_for(lambda: "became leader" in operator_logs(sandbox), timeout=START_TIMEOUT_SECONDS,
             what="operator leading again")


@contextmanager
def operator_stopped(sandbox: Sandbox) -> Iterator[None]:
    """The operator scaled to zero (its pod gone) inside the block, running and leading after it,
    even if the block fails (other tests need it)."""
    require_alone("stopping the etcd operator")
    deployment = f"deployment/{OPERATOR_DEPLOYMENT}"
    sandbox.kubectl("-n", OPERATOR_NAMESPACE, "scale", deployment, "--replicas=0")
    try:
        wait_for(lambda: not operator_pods(sandbox), timeout=STOP_TIMEOUT_SECONDS, what="operator pod gone")
        yield
    finally:
        sandbox.kubectl("-n", OPERATOR_NAMESPACE, "scale", deployment, "--replicas=1")
        sandbox.kubectl("-n", OPERATOR_NAMESPACE, "rollout", "status", deployment,
                        f"--timeout={START_TIMEOUT_SECONDS:.0f}s")
        wait_operator_leading(sandbox)


def operator_metric(sandbox: Sandbox, name: str, labels: dict[str, str]) -> float | None:
    """The value of one sample on the operator's /metrics (pod IPs are loopback: reachable from
    the test process), or None when the operator does not export it."""
    return pod_metric(running_operator_pod(sandbox), name, labels)


def pod_metric_samples(pod: Any, name: str, labels: dict[str, str]) -> list[float]:
    """The values of every sample `name` of one operator pod whose labels include `labels`."""
    url = f"http://{pod.status.pod_ip}:{METRICS_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return [float(sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())]


def pod_metric(pod: Any, name: str, labels: dict[str, str]) -> float | None:
    """The first matching sample of one operator pod, or None when it does not export it."""
    values = pod_metric_samples(pod, name, labels)
    return values[0] if values else None


@contextmanager
def operator_env(sandbox: Sandbox, **env: str) -> Iterator[None]:
    """The operator running with extra environment variables (its flags' env defaults, e.g.
    UNHEALTHY_MEMBER_TIMEOUT_SECONDS) inside the block; rolled back to the shipped Deployment after
    it, even if the block fails (other tests expect the defaults). Each change is a rollout."""
    require_alone("reconfiguring the etcd operator")
    deployment = f"deployment/{OPERATOR_DEPLOYMENT}"

    def roll(*assignments: str) -> None:
        sandbox.kubectl("-n", OPERATOR_NAMESPACE, "set", "env", deployment, f"--containers={OPERATOR_CONTAINER}",
                        *assignments)
        sandbox.kubectl("-n", OPERATOR_NAMESPACE, "rollout", "status", deployment,
                        f"--timeout={START_TIMEOUT_SECONDS:.0f}s")
        running_operator_pod(sandbox)
        wait_operator_leading(sandbox)

    roll(*(f"{name}={value}" for name, value in env.items()))
    try:
        yield
    finally:
        roll(*(f"{name}-" for name in env))


def deploy_operator_with_env(sandbox: Sandbox, env: dict[str, str], *, revision: str,
                             pod_annotations: dict[str, str] | None = None) -> None:
    """Roll the operator onto this checkout's code with `env` added to its container (e.g.
    failpoints); `revision` goes on the pod template, so each call starts a fresh pod (and fresh
    emptyDirs) even with the same env, with `pod_annotations` too. `deploy_operator` rolls it back to the plain manifest
    (`kubectl apply` drops what the last apply set and the new one does not)."""
    require_alone("rolling the etcd operator onto another configuration")
    documents = list(yaml.safe_load_all((CHECKOUT_DIR / "deploy" / "operator.yaml").read_text()))
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[SOURCES_ANNOTATION] = shipped_sources_hash()
    annotations["etcd-operator-py.test/revision"] = revision
    annotations.update(pod_annotations or {})
    container = next(c for c in template["spec"]["containers"] if c["name"] == OPERATOR_CONTAINER)
    container.setdefault("env", []).extend({"name": k, "value": v} for k, v in env.items())
    sandbox.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    sandbox.kubectl("-n", OPERATOR_NAMESPACE, "rollout", "status", f"deployment/{OPERATOR_DEPLOYMENT}",
                    f"--timeout={START_TIMEOUT_SECONDS:.0f}s")
