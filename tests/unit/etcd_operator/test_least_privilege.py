"""Least privilege, no confused deputy: images only from trusted repositories, no etcdEnv
variable that overrides what the operator manages, secret volumes read-only and 0440, the
RBAC grants what owner references need and a namespaced variant exists."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from etcd_common.api.fields import SpecError
from etcd_common.api.images import DEFAULT_TRUSTED_REPOSITORIES, image_repository, untrusted_image_problem
from etcd_operator.manifests import COMPACTION_ENV, CORRUPT_CHECK_ENV, QUOTA_ENV, build_member_pod
from etcd_operator.settings import parse_settings
from etcd_operator.spec import check_trusted_repository, parse_cluster_spec, parse_etcd_cluster
from tests.unit.etcd_operator.etcd_cluster_builders import raw_cluster

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("repository", ["quay.io/coreos/etcd", "gcr.io/etcd-development/etcd"])
def test_the_official_repositories_are_trusted_by_default(repository: str) -> None:
    cluster = parse_etcd_cluster(raw_cluster({"repository": repository}))
    assert check_trusted_repository(cluster, DEFAULT_TRUSTED_REPOSITORIES) is cluster


def test_an_untrusted_repository_is_refused_with_the_trusted_ones_named() -> None:
    cluster = parse_etcd_cluster(raw_cluster({"repository": "registry.example.com/evil/etcd"}))
    refused = check_trusted_repository(cluster, DEFAULT_TRUSTED_REPOSITORIES)
    assert refused.spec is None and refused.spec_error is not None
    assert "registry.example.com/evil/etcd" in refused.spec_error and "quay.io/coreos/etcd" in refused.spec_error
    assert "--trusted-repositories" in refused.spec_error


def test_a_trusted_prefix_covers_the_repositories_under_it() -> None:
    cluster = parse_etcd_cluster(raw_cluster({"repository": "mirror.example.com/etcd-io/etcd"}))
    assert check_trusted_repository(cluster, ("mirror.example.com/etcd-io/",)).spec is not None
    assert check_trusted_repository(cluster, ("mirror.example.com/etcd",)).spec is None


def restore_spec(fetch_image: str | None) -> dict[str, Any]:
    source: dict[str, Any] = {"backupStorageType": "S3", "s3": {"path": "bucket/key", "awsSecret": "aws"},
                              "sha256": "a" * 64}
    if fetch_image is not None:
        source["fetchImage"] = fetch_image
    return {"restore": source}


@pytest.mark.parametrize(("case", "fetch_image", "trusted", "bootstrapped", "refused"), [
    ("the default fetch image (this project's own)", None, DEFAULT_TRUSTED_REPOSITORIES, False, False),
    ("the project's image at another tag", "etcd-operator-py:0.2.0", DEFAULT_TRUSTED_REPOSITORIES, False, False),
    ("an attacker's image", "docker.io/attacker/anything:latest", DEFAULT_TRUSTED_REPOSITORIES, False, True),
    ("a digest does not hide the repository", "docker.io/attacker/x@sha256:" + "b" * 64,
     DEFAULT_TRUSTED_REPOSITORIES, False, True),
    ("a mirror trusted by prefix", "mirror.example.com/tools/etcd-operator-py:1", ("quay.io/coreos/etcd", "mirror.example.com/"), False,
     False),
    ("an image whose name only starts like a trusted one", "etcd-operator-py-evil:1", DEFAULT_TRUSTED_REPOSITORIES,
     False, True),
    ("a bootstrapped cluster never runs it again", "docker.io/attacker/anything:latest",
     DEFAULT_TRUSTED_REPOSITORIES, True, False),
])
def test_restore_fetch_image_must_be_trusted(case: str, fetch_image: str | None, trusted: tuple[str, ...],
                                             bootstrapped: bool, refused: bool) -> None:
    status = {"bootstrapped": True} if bootstrapped else {}
    cluster = parse_etcd_cluster(raw_cluster(restore_spec(fetch_image), status=status))
    checked = check_trusted_repository(cluster, trusted)
    assert (checked.spec is None) is refused, case
    if refused:
        assert checked.spec_error is not None and "spec.restore.fetchImage" in checked.spec_error
        assert str(fetch_image) in checked.spec_error and ", ".join(trusted) in checked.spec_error


def test_an_untrusted_fetch_image_gets_no_seed_pod_built() -> None:
    """Refused means the supervisor gets no spec: nothing (no pod) is created from it."""
    cluster = parse_etcd_cluster(raw_cluster(restore_spec("docker.io/attacker/anything:latest"), status={}))
    assert check_trusted_repository(cluster, DEFAULT_TRUSTED_REPOSITORIES).spec is None


@pytest.mark.parametrize(("image", "repository"), [
    ("etcd-operator-py:0.1.0", "etcd-operator-py"),
    ("registry:5000/team/tool:1.0", "registry:5000/team/tool"),
    ("registry:5000/team/tool", "registry:5000/team/tool"),
    ("quay.io/coreos/etcd@sha256:" + "c" * 64, "quay.io/coreos/etcd"),
    ("quay.io/coreos/etcd:v3.5.1@sha256:" + "c" * 64, "quay.io/coreos/etcd"),
])
def test_image_repository_drops_tag_and_digest(image: str, repository: str) -> None:
    assert image_repository(image) == repository
    assert untrusted_image_problem("f", image, (repository,)) is None


def test_trusted_repositories_flag_defaults_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_settings([]).trusted_repositories == DEFAULT_TRUSTED_REPOSITORIES
    monkeypatch.setenv("TRUSTED_REPOSITORIES", "a.example/etcd, b.example/")
    assert parse_settings([]).trusted_repositories == ("a.example/etcd", "b.example/")
    assert parse_settings(["--trusted-repositories=c.example/etcd"]).trusted_repositories == ("c.example/etcd",)


@pytest.mark.parametrize("variable", [
    "ETCD_CONFIG_FILE", "ETCD_FORCE_NEW_CLUSTER", "ETCD_STRICT_RECONFIG_CHECK", "ETCD_DISCOVERY",
    "ETCD_DISCOVERY_SRV", "ETCD_AUTO_TLS", "ETCD_PEER_AUTO_TLS", "ETCD_INITIAL_CLUSTER", "ETCD_DATA_DIR",
    "ETCD_LISTEN_CLIENT_URLS", "ETCD_NAME", "ETCD_CLIENT_CERT_AUTH",
])
def test_etcd_env_may_not_override_what_the_operator_manages(variable: str) -> None:
    with pytest.raises(SpecError, match=variable):
        parse_cluster_spec({"size": 1, "pod": {"etcdEnv": [{"name": variable, "value": "x"}]}})


TLS_SPEC = {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}


@pytest.mark.parametrize("spec, state", [
    ({}, "new"), ({}, "existing"), ({"TLS": TLS_SPEC}, "new"), ({"TLS": TLS_SPEC}, "existing"),
    ({"version": "3.5.35", "TLS": TLS_SPEC}, "new"),
], ids=["plain-new", "plain-existing", "tls-new", "tls-existing", "tls-3.5"])
def test_every_flag_the_operator_sets_is_one_etcd_env_may_not_shadow(spec: dict[str, Any], state: str) -> None:
    """The deny list follows the command line: for each --flag a member pod's etcd is started with,
    ETCD_<FLAG> in spec.pod.etcdEnv is refused (etcd would refuse to start, or the variable would
    win over what the operator manages); but the compaction and quota variables of CoreOS-era
    manifests and the corruption check's (and feature gates), which the operator honours by leaving its own
    flag out."""
    flags = _etcd_flags({**spec, "size": 1}, state)
    assert "name" in flags and "initial-cluster" in flags and "auto-compaction-retention" in flags
    for flag in flags:
        variable = "ETCD_" + flag.upper().replace("-", "_")
        with_variable = {**spec, "size": 1, "pod": {"etcdEnv": [{"name": variable, "value": "x"}]}}
        if variable in COMPACTION_ENV + QUOTA_ENV + CORRUPT_CHECK_ENV:
            assert flag not in _etcd_flags(with_variable, state), variable
            continue
        with pytest.raises(SpecError, match=variable):
            parse_cluster_spec(with_variable)


def _etcd_flags(spec: dict[str, Any], state: str) -> list[str]:
    cluster = parse_etcd_cluster(raw_cluster(spec))
    pod = build_member_pod(cluster, "example-abcde", state=state,  # type: ignore[arg-type]
                           initial_cluster=[("example-abcde", "http://example-abcde.example:2380")])
    etcd = next(container for container in pod["spec"]["containers"] if container["name"] == "etcd")
    return [argument[2:].split("=", 1)[0] for argument in etcd["command"] if argument.startswith("--")]


def test_etcd_env_may_tune_what_the_operator_leaves_alone() -> None:
    spec = parse_cluster_spec({"size": 1, "pod": {"etcdEnv": [{"name": "ETCD_QUOTA_BACKEND_BYTES", "value": "1"}]}})
    assert spec.pod.etcd_env[0]["name"] == "ETCD_QUOTA_BACKEND_BYTES"


def _tls_pod() -> dict[str, Any]:
    tls = {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}
    cluster = parse_etcd_cluster(raw_cluster({"TLS": tls}))
    return build_member_pod(cluster, "example-abcde", state="new", initial_cluster=[])


def test_secret_volumes_are_read_only_and_not_world_readable() -> None:
    pod = _tls_pod()
    secrets = [v for v in pod["spec"]["volumes"] if "secret" in v]
    assert secrets and all(v["secret"]["defaultMode"] == 0o440 for v in secrets), secrets
    names = {v["name"] for v in secrets}
    mounts = [m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] in names]
    assert mounts and all(m["readOnly"] for m in mounts)


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "deploy" / name).read_text()) if d]


def _rules(documents: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return next(d["rules"] for d in documents if d["kind"] == kind and d["metadata"]["name"] == name)


def test_owner_references_with_block_owner_deletion_are_permitted() -> None:
    rules = _rules(_documents("rbac.yaml"), "ClusterRole", "etcd-operator")
    assert any("etcdclusters/finalizers" in r["resources"] and "update" in r["verbs"] for r in rules), rules


def test_the_namespaced_variant_grants_the_same_in_one_namespace_only() -> None:
    cluster_documents = _documents("rbac.yaml")
    # The Secret writes are granted apart (ClusterRole etcd-operator-secret-writer, to be narrowed
    # to namespaces); the namespaced Role holds them with the reads.
    cluster_wide = [{**r, "verbs": [*r["verbs"], *next(w["verbs"] for w in
                                                        _rules(cluster_documents, "ClusterRole",
                                                               "etcd-operator-secret-writer"))]}
                    if r["resources"] == ["secrets"] else r
                    for r in _rules(cluster_documents, "ClusterRole", "etcd-operator")]
    documents = _documents("rbac-namespaced.yaml")
    assert not any(d["kind"] in ("ClusterRole", "ClusterRoleBinding") for d in documents)
    namespaced = _rules(documents, "Role", "etcd-operator")
    assert namespaced == cluster_wide
    binding = next(d for d in documents if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == "etcd-operator")
    assert binding["roleRef"]["kind"] == "Role"


def test_the_operators_client_certificate_is_not_mounted_into_member_pods() -> None:
    pod = _tls_pod()
    secrets = {v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
    assert secrets == {"p", "s"}, secrets
    container = pod["spec"]["containers"][0]
    # Readiness: etcd's /health on its plain-HTTP metrics listener, which needs no client certificate.
    probe = container["readinessProbe"]
    assert probe.get("httpGet", {}).get("port") == 2381 and probe["httpGet"]["scheme"] == "HTTP", probe
    assert "--listen-metrics-urls=http://$(POD_IP):2381" in container["command"]
    assert not any("--cert=" in arg for arg in str(probe))


def test_upgrade_source_tls_members_keep_the_client_certificate_for_their_etcdctl_probe() -> None:
    tls = {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}
    cluster = parse_etcd_cluster(raw_cluster({"TLS": tls, "version": "3.4.23"}))
    pod = build_member_pod(cluster, "example-abcde", state="new", initial_cluster=[])
    assert {v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v} == {"p", "s", "o"}
