"""Pod volumes as host directories, since containers share the host's filesystem.

There is no chroot or per-pod mount: two pods may both mount `/var/etcd`. A container reaches its
volumes through (1) its mountPaths rewritten to the backing directories wherever they appear in
command, args and env values (rewrites.py), and (2) `SANDBOX_VOLUME_<NAME>` env vars (volume name
upper-cased, non-alphanumerics as `_`). A program that opens a mountPath it did not get through
those (e.g. a path hard-coded in its source or in a config file) sees the host's real path instead.
The service-account token directory is also announced as `KUBERNETES_SERVICE_ACCOUNT_DIR`, which
this project's in-cluster Kubernetes configuration honours instead of the fixed
`/var/run/secrets/kubernetes.io/serviceaccount`.

Projected serviceAccountToken sources (the apiserver injects one into every pod, the
`kube-api-access-*` volume) are filled as a real kubelet does: a bound token from the TokenRequest
API (`serviceaccounts/<name>/token`, bound to the pod), renewed at 80% of its lifetime and at
least daily while the pod runs (`refresh_tokens`, called from the pod worker's sync).

emptyDir, secret, configMap, downwardAPI and projected (incl. serviceAccountToken) volumes live
under the pod's directory and go away with the pod (emptyDirs survive container restarts); hostPath
is the host path itself; a persistentVolumeClaim is a directory `pvc/<namespace>/<claim>-<claim uid>`
that outlives pods and is reattached to the next pod using the same claim (provisioner.py binds
every claim to a PV over that directory). Secret and configMap files are written when the pod
starts and not refreshed afterwards.
"""
from __future__ import annotations

import base64
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from kube_sandbox.kubelet.environment import ContainerConfigError, field_ref_value
from kube_sandbox.kubelet.kube_api import KubeApi, NotFound, object_path
from kube_sandbox.kubelet.provisioner import claim_directory
from kube_sandbox.kubelet.resources import InvalidQuantity, resource_field_value
from kube_sandbox.kubelet.settings import KubeletSettings

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_TOKEN_TYPE = "kubernetes.io/service-account-token"
DEFAULT_FILE_MODE = 0o644
DEFAULT_TOKEN_EXPIRATION_SECONDS = 3607  # what the apiserver puts into kube-api-access volumes
TOKEN_REFRESH_FRACTION = 0.8  # the kubelet renews a token after 80% of its lifetime...
TOKEN_MAX_REFRESH_SECONDS = 24 * 3600.0  # ...or after a day, whichever comes first
TOKEN_RETRY_SECONDS = 10.0


class VolumeNotReady(Exception):
    """A volume cannot be set up yet (missing Secret, claim, token); the pod stays ContainerCreating."""


@dataclass
class ProjectedToken:
    """A service-account token file of a projected volume, and when it is due for renewal."""

    path: Path
    mode: int
    service_account: str
    audience: str  # "" means the apiserver's own audiences
    expiration_seconds: int
    refresh_at: float  # time.time()


@dataclass(frozen=True)
class PreparedVolumes:
    directories: dict[str, Path]  # volume name -> host directory (or file, for hostPath files)
    tokens: list[ProjectedToken] = field(default_factory=list)


@dataclass(frozen=True)
class IssuedToken:
    token: bytes
    refresh_at: float  # time.time()


def token_refresh_time(issued_at: float, expires_at: float) -> float:
    """When the kubelet renews a token issued at `issued_at` that expires at `expires_at`."""
    lifetime = max(expires_at - issued_at, 0.0)
    return issued_at + min(lifetime * TOKEN_REFRESH_FRACTION, TOKEN_MAX_REFRESH_SECONDS)


def token_request(pod: dict[str, Any], audience: str, expiration_seconds: int) -> dict[str, Any]:
    """A TokenRequest for a token bound to `pod` (it stops working once the pod is gone)."""
    metadata = pod["metadata"]
    spec: dict[str, Any] = {
        "expirationSeconds": expiration_seconds,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": metadata["name"], "uid": metadata["uid"]},
    }
    if audience:
        spec["audiences"] = [audience]
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def service_account_name(pod: dict[str, Any]) -> str:
    spec = pod.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")


def pod_directory(settings: KubeletSettings, uid: str) -> Path:
    return settings.pods_dir / uid


def decode_secret(secret: dict[str, Any]) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def decode_config_map(config_map: dict[str, Any]) -> dict[str, bytes]:
    data = {k: v.encode() for k, v in (config_map.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (config_map.get("binaryData") or {}).items()})
    return data


def write_files(directory: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """Write relative path -> (content, mode) under `directory`, refusing paths that escape it."""
    directory.mkdir(parents=True, exist_ok=True)
    for relative, (content, mode) in files.items():
        parts = PurePosixPath(relative).parts
        if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
            raise ContainerConfigError(f"invalid volume item path {relative!r}")
        target = directory.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(content)
        os.chmod(tmp, mode)
        tmp.replace(target)


def select_items(data: dict[str, bytes], items: list[dict[str, Any]] | None, default_mode: int, what: str,
                 optional: bool) -> dict[str, tuple[bytes, int]]:
    """Keys -> files, honouring `items` (key, path, mode) the way secret/configMap volumes do."""
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    files = {}
    for item in items:
        if item["key"] not in data:
            if optional:
                continue
            raise VolumeNotReady(f"couldn't find key {item['key']} in {what}")
        files[item["path"]] = (data[item["key"]], int(item.get("mode") or default_mode))
    return files


class VolumeManager:
    def __init__(self, api: KubeApi, settings: KubeletSettings) -> None:
        self.api = api
        self.settings = settings

    def prepare(self, pod: dict[str, Any], pod_ip: str) -> PreparedVolumes:
        metadata = pod["metadata"]
        pod_dir = pod_directory(self.settings, metadata["uid"])
        prepared = PreparedVolumes({})
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            prepared.directories[volume["name"]] = self._prepare_one(
                pod, volume, pod_dir / "volumes" / volume["name"], pod_ip, prepared.tokens)
        return prepared

    def refresh_tokens(self, pod: dict[str, Any], prepared: PreparedVolumes) -> list[ProjectedToken]:
        """Renew the tokens that are due; returns those renewed. ApiError propagates (retried later)."""
        renewed = []
        for token in prepared.tokens:
            if time.time() < token.refresh_at:
                continue
            token.refresh_at = time.time() + TOKEN_RETRY_SECONDS  # if the request below fails
            issued = self.request_token(pod, token.service_account, token.audience, token.expiration_seconds)
            write_files(token.path.parent, {token.path.name: (issued.token, token.mode)})
            token.refresh_at = issued.refresh_at
            renewed.append(token)
        return renewed

    def request_token(self, pod: dict[str, Any], service_account: str, audience: str,
                      expiration_seconds: int) -> IssuedToken:
        namespace = pod["metadata"]["namespace"]
        issued_at = time.time()
        try:
            response = self.api.create(
                object_path("", "v1", "serviceaccounts", namespace, service_account, "token"),
                token_request(pod, audience, expiration_seconds))
        except NotFound as e:
            raise VolumeNotReady(f'serviceaccount "{service_account}" not found') from e
        status = response.get("status") or {}
        if not status.get("token"):
            raise VolumeNotReady(f"TokenRequest for {namespace}/{service_account} returned no token")
        expires_at = issued_at + expiration_seconds
        if status.get("expirationTimestamp"):
            expires_at = datetime.fromisoformat(str(status["expirationTimestamp"]).replace("Z", "+00:00")).timestamp()
        return IssuedToken(str(status["token"]).encode(), token_refresh_time(issued_at, expires_at))

    def cleanup(self, uid: str) -> None:
        """Remove the pod's directory with its emptyDirs and copies of secrets (claims stay)."""
        shutil.rmtree(pod_directory(self.settings, uid), ignore_errors=True)

    def _prepare_one(self, pod: dict[str, Any], volume: dict[str, Any], directory: Path, pod_ip: str,
                     tokens: list[ProjectedToken]) -> Path:
        namespace = pod["metadata"]["namespace"]
        if "emptyDir" in volume:
            directory.mkdir(parents=True, exist_ok=True)
            return directory
        if "secret" in volume:
            source = volume["secret"]
            mode = int(source.get("defaultMode") or DEFAULT_FILE_MODE)
            secret = self._get("secrets", namespace, source["secretName"])
            if secret is None:
                if source.get("optional"):
                    directory.mkdir(parents=True, exist_ok=True)
                    return directory
                raise VolumeNotReady(f'secret "{source["secretName"]}" not found')
            data = decode_secret(secret)
            if secret.get("type") == SERVICE_ACCOUNT_TOKEN_TYPE:
                data["ca.crt"] = self.settings.ca_cert.read_bytes()
            files = select_items(data, source.get("items"), mode, f"Secret {namespace}/{source['secretName']}",
                                 bool(source.get("optional")))
            write_files(directory, files)
            return directory
        if "configMap" in volume:
            source = volume["configMap"]
            mode = int(source.get("defaultMode") or DEFAULT_FILE_MODE)
            config_map = self._get("configmaps", namespace, source["name"])
            if config_map is None:
                if source.get("optional"):
                    directory.mkdir(parents=True, exist_ok=True)
                    return directory
                raise VolumeNotReady(f'configmap "{source["name"]}" not found')
            files = select_items(decode_config_map(config_map), source.get("items"), mode,
                                 f"ConfigMap {namespace}/{source['name']}", bool(source.get("optional")))
            write_files(directory, files)
            return directory
        if "downwardAPI" in volume:
            source = volume["downwardAPI"]
            mode = int(source.get("defaultMode") or DEFAULT_FILE_MODE)
            write_files(directory, self._downward_files(pod, source.get("items") or [], mode, pod_ip))
            return directory
        if "projected" in volume:
            write_files(directory, self._projected_files(pod, volume["projected"], pod_ip, directory, tokens))
            return directory
        if "persistentVolumeClaim" in volume:
            return self._claim_directory(namespace, volume["persistentVolumeClaim"]["claimName"])
        if "hostPath" in volume:
            source = volume["hostPath"]
            path = Path(source["path"])
            if source.get("type") in ("DirectoryOrCreate",) and not path.exists():
                path.mkdir(parents=True, exist_ok=True)
            return path
        kinds = sorted(k for k in volume if k != "name")
        log.warning("%s/%s: volume %s of unsupported type %s is an empty directory", namespace,
                    pod["metadata"]["name"], volume["name"], kinds)
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def _get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.api.get(object_path("", "v1", plural, namespace, name))
        except NotFound:
            return None

    def _downward_files(self, pod: dict[str, Any], items: list[dict[str, Any]], default_mode: int,
                        pod_ip: str) -> dict[str, tuple[bytes, int]]:
        files = {}
        containers = {c["name"]: c for c in (pod.get("spec") or {}).get("containers") or []}
        for item in items:
            mode = int(item.get("mode") or default_mode)
            if item.get("fieldRef"):
                value = field_ref_value(pod, item["fieldRef"]["fieldPath"], pod_ip, self.settings.host_ip)
            elif item.get("resourceFieldRef"):
                ref = item["resourceFieldRef"]
                container = containers.get(ref.get("containerName") or "", {})
                try:
                    value = resource_field_value(container, ref["resource"], ref.get("divisor"))
                except InvalidQuantity as e:
                    raise ContainerConfigError(str(e)) from e
            else:
                continue
            files[item["path"]] = (value.encode(), mode)
        return files

    def _projected_files(self, pod: dict[str, Any], projected: dict[str, Any], pod_ip: str, directory: Path,
                         tokens: list[ProjectedToken]) -> dict[str, tuple[bytes, int]]:
        namespace = pod["metadata"]["namespace"]
        default_mode = int(projected.get("defaultMode") or DEFAULT_FILE_MODE)
        files: dict[str, tuple[bytes, int]] = {}
        for source in projected.get("sources") or []:
            if source.get("secret"):
                ref = source["secret"]
                secret = self._get("secrets", namespace, ref["name"])
                if secret is None:
                    if ref.get("optional"):
                        continue
                    raise VolumeNotReady(f'secret "{ref["name"]}" not found')
                files.update(select_items(decode_secret(secret), ref.get("items"), default_mode,
                                          f"Secret {namespace}/{ref['name']}", bool(ref.get("optional"))))
            elif source.get("configMap"):
                ref = source["configMap"]
                config_map = self._get("configmaps", namespace, ref["name"])
                if config_map is None:
                    if ref.get("optional"):
                        continue
                    raise VolumeNotReady(f'configmap "{ref["name"]}" not found')
                files.update(select_items(decode_config_map(config_map), ref.get("items"), default_mode,
                                          f"ConfigMap {namespace}/{ref['name']}", bool(ref.get("optional"))))
            elif source.get("downwardAPI"):
                files.update(self._downward_files(pod, source["downwardAPI"].get("items") or [], default_mode, pod_ip))
            elif source.get("serviceAccountToken"):
                ref = source["serviceAccountToken"]
                path = str(ref.get("path") or "token")
                token = ProjectedToken(
                    path=directory / path, mode=default_mode, service_account=service_account_name(pod),
                    audience=str(ref.get("audience") or ""),
                    expiration_seconds=int(ref.get("expirationSeconds") or DEFAULT_TOKEN_EXPIRATION_SECONDS),
                    refresh_at=0.0)
                issued = self.request_token(pod, token.service_account, token.audience, token.expiration_seconds)
                token.refresh_at = issued.refresh_at
                files[path] = (issued.token, default_mode)
                tokens.append(token)
        return files

    def _claim_directory(self, namespace: str, claim_name: str) -> Path:
        claim = self._get("persistentvolumeclaims", namespace, claim_name)
        if claim is None:
            raise VolumeNotReady(f'persistentvolumeclaim "{claim_name}" not found')
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            raise VolumeNotReady(f'persistentvolumeclaim "{claim_name}" is being deleted')
        if not (claim.get("spec") or {}).get("volumeName"):
            raise VolumeNotReady(f'persistentvolumeclaim "{claim_name}" is not bound yet')
        directory = claim_directory(self.settings, namespace, claim_name, claim["metadata"]["uid"])
        directory.mkdir(parents=True, exist_ok=True)
        return directory
