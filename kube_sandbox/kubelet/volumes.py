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
every claim to a PV over that directory).

Secret, configMap, downwardAPI and projected volumes are written in the real kubelet's atomic layout
(atomic_writer.py) and refreshed while the pod runs (`refresh_contents`, from the pod worker's
sync): every VOLUME_REFRESH_SECONDS their sources are read again (through a cache of
SOURCE_CACHE_SECONDS shared by all the kubelet's pods, like the real kubelet's TTL cache) and the
volume is rewritten when its files changed. A non-optional Secret or ConfigMap that is gone (or a key of
`items` missing) leaves the last files in place, as in the real kubelet; an optional one that is
gone takes its files with it. Mounts with a subPath see the file as it was when the container
started (`snapshot_sub_path`), as the real kubelet's bind mount does.
"""
from __future__ import annotations

import base64
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet.atomic_writer import Files, validate_path, write_atomically
from kube_sandbox.kubelet.environment import ContainerConfigError, field_ref_value
from kube_sandbox.kubelet.kube_api import ApiError, KubeApi, NotFound, object_path
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
# How often a running pod's secret/configMap/downwardAPI/projected volumes are checked against their
# sources. The real kubelet syncs a pod about every minute plus its cache TTL; tests want seconds.
VOLUME_REFRESH_SECONDS = 3.0
SOURCE_CACHE_SECONDS = 2.0  # a Secret/ConfigMap read for a refresh serves all the kubelet's pods this long
CONTENT_VOLUME_KINDS = ("secret", "configMap", "downwardAPI", "projected")
SUB_PATHS_DIR = "volume-subpaths"


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
    volume: str = ""  # the projected volume's name
    content: bytes = b""  # the token written now


@dataclass
class ContentVolume:
    """A secret, configMap, downwardAPI or projected volume: files made from API objects, rewritten
    (atomically) while the pod runs when they change."""

    name: str
    directory: Path
    files: Files  # what the volume holds now
    next_check: float  # time.monotonic()
    problem: str = ""  # why the last refresh left the files as they were ("" when it did not)


@dataclass(frozen=True)
class PreparedVolumes:
    directories: dict[str, Path]  # volume name -> host directory (or file, for hostPath files)
    tokens: list[ProjectedToken] = field(default_factory=list)
    contents: dict[str, ContentVolume] = field(default_factory=dict)  # volume name -> refreshed volume


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


def content_kind(volume: dict[str, Any]) -> str | None:
    """"secret", "configMap", "downwardAPI" or "projected" for a volume that is refreshed, else None."""
    return next((kind for kind in CONTENT_VOLUME_KINDS if kind in volume), None)


def decode_secret(secret: dict[str, Any]) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def decode_config_map(config_map: dict[str, Any]) -> dict[str, bytes]:
    data = {k: v.encode() for k, v in (config_map.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (config_map.get("binaryData") or {}).items()})
    return data


def select_items(data: dict[str, bytes], items: list[dict[str, Any]] | None, default_mode: int, what: str,
                 optional: bool) -> Files:
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


def snapshot_sub_path(volume_directory: Path, sub_path: str, snapshot: Path) -> Path:
    """A copy of `sub_path` of a refreshed volume as it is now, at `snapshot`: what a container
    mounting it with a subPath sees until it restarts (the real kubelet bind-mounts the file, so
    later updates of the volume do not reach it). A file is hard-linked (same inode and mode; the
    volume's update unlinks its own name only), a directory copied."""
    source = volume_directory.joinpath(*validate_path(sub_path)).resolve()
    if snapshot.is_dir() and not snapshot.is_symlink():
        shutil.rmtree(snapshot)
    else:
        snapshot.unlink(missing_ok=True)
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, snapshot)
    elif source.exists():
        try:
            os.link(source, snapshot)
        except OSError:
            shutil.copy2(source, snapshot)
    else:
        snapshot.mkdir()  # as the real kubelet makes a missing subPath: an empty directory
    return snapshot


class SourceCache:
    """Secrets and ConfigMaps read for refreshes, kept SOURCE_CACHE_SECONDS (shared by pod workers)."""

    def __init__(self, ttl_seconds: float = SOURCE_CACHE_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str, str], tuple[float, dict[str, Any] | None]] = {}

    def get(self, key: tuple[str, str, str]) -> tuple[bool, dict[str, Any] | None]:
        """(found, object); object None: known not to exist."""
        with self._lock:
            entry = self._objects.get(key)
        if entry is None or time.monotonic() - entry[0] > self.ttl_seconds:
            return False, None
        return True, entry[1]

    def put(self, key: tuple[str, str, str], obj: dict[str, Any] | None) -> None:
        with self._lock:
            now = time.monotonic()
            self._objects = {k: v for k, v in self._objects.items() if now - v[0] <= self.ttl_seconds}
            self._objects[key] = (now, obj)


class VolumeManager:
    def __init__(self, api: KubeApi, settings: KubeletSettings) -> None:
        self.api = api
        self.settings = settings
        self.sources = SourceCache()

    def prepare(self, pod: dict[str, Any], pod_ip: str) -> PreparedVolumes:
        metadata = pod["metadata"]
        pod_dir = pod_directory(self.settings, metadata["uid"])
        prepared = PreparedVolumes({})
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            prepared.directories[volume["name"]] = self._prepare_one(
                pod, volume, pod_dir / "volumes" / volume["name"], pod_ip, prepared)
        return prepared

    def refresh_contents(self, pod: dict[str, Any], prepared: PreparedVolumes, pod_ip: str) -> list[str]:
        """Check the secret/configMap/downwardAPI/projected volumes that are due against their
        sources, and rewrite those that changed; returns their names. A volume whose sources cannot
        be read (a Secret gone, the API unavailable) keeps its files and is tried again later."""
        updated = []
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            content = prepared.contents.get(volume["name"])
            if content is None or time.monotonic() < content.next_check:
                continue
            content.next_check = time.monotonic() + VOLUME_REFRESH_SECONDS
            try:
                files = self._content_files(pod, volume, content.directory, pod_ip, prepared.tokens, cached=True)
            except (VolumeNotReady, ContainerConfigError, ApiError) as e:
                if str(e) != content.problem:
                    log.warning("%s/%s: volume %s keeps its files (not refreshed: %s); trying again every %.0fs",
                                pod["metadata"]["namespace"], pod["metadata"]["name"], content.name, e,
                                VOLUME_REFRESH_SECONDS)
                content.problem = str(e)
                continue
            content.problem = ""
            if write_atomically(content.directory, files):
                updated.append(content.name)
            content.files = files
        return updated

    def refresh_tokens(self, pod: dict[str, Any], prepared: PreparedVolumes) -> list[ProjectedToken]:
        """Renew the tokens that are due; returns those renewed. ApiError propagates (retried later)."""
        renewed = []
        for token in prepared.tokens:
            if time.time() < token.refresh_at:
                continue
            token.refresh_at = time.time() + TOKEN_RETRY_SECONDS  # if the request below fails
            issued = self.request_token(pod, token.service_account, token.audience, token.expiration_seconds)
            token.content = issued.token
            content = prepared.contents[token.volume]
            files = dict(content.files)
            files[token.path.relative_to(content.directory).as_posix()] = (issued.token, token.mode)
            write_atomically(content.directory, files)
            content.files = files
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
                     prepared: PreparedVolumes) -> Path:
        namespace = pod["metadata"]["namespace"]
        if "emptyDir" in volume:
            directory.mkdir(parents=True, exist_ok=True)
            return directory
        if content_kind(volume) is not None:
            files = self._content_files(pod, volume, directory, pod_ip, prepared.tokens, cached=False)
            write_atomically(directory, files)
            prepared.contents[volume["name"]] = ContentVolume(volume["name"], directory, files,
                                                              time.monotonic() + VOLUME_REFRESH_SECONDS)
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

    def _content_files(self, pod: dict[str, Any], volume: dict[str, Any], directory: Path, pod_ip: str,
                       tokens: list[ProjectedToken], *, cached: bool) -> Files:
        """The files of a secret/configMap/downwardAPI/projected volume from its sources now
        (`cached`: Secrets and ConfigMaps may come from the refresh cache)."""
        namespace = pod["metadata"]["namespace"]
        if "secret" in volume:
            source = volume["secret"]
            mode = int(source.get("defaultMode") or DEFAULT_FILE_MODE)
            secret = self._get("secrets", namespace, source["secretName"], cached)
            if secret is None:
                if source.get("optional"):
                    return {}
                raise VolumeNotReady(f'secret "{source["secretName"]}" not found')
            data = decode_secret(secret)
            if secret.get("type") == SERVICE_ACCOUNT_TOKEN_TYPE:
                data["ca.crt"] = self.settings.ca_cert.read_bytes()
            return select_items(data, source.get("items"), mode, f"Secret {namespace}/{source['secretName']}",
                                bool(source.get("optional")))
        if "configMap" in volume:
            source = volume["configMap"]
            mode = int(source.get("defaultMode") or DEFAULT_FILE_MODE)
            config_map = self._get("configmaps", namespace, source["name"], cached)
            if config_map is None:
                if source.get("optional"):
                    return {}
                raise VolumeNotReady(f'configmap "{source["name"]}" not found')
            return select_items(decode_config_map(config_map), source.get("items"), mode,
                                f"ConfigMap {namespace}/{source['name']}", bool(source.get("optional")))
        if "downwardAPI" in volume:
            source = volume["downwardAPI"]
            mode = int(source.get("defaultMode") or DEFAULT_FILE_MODE)
            return self._downward_files(pod, source.get("items") or [], mode, pod_ip)
        return self._projected_files(pod, volume, pod_ip, directory, tokens, cached)

    def _get(self, plural: str, namespace: str, name: str, cached: bool = False) -> dict[str, Any] | None:
        key = (plural, namespace, name)
        if cached:
            found, obj = self.sources.get(key)
            if found:
                return obj
        try:
            obj = self.api.get(object_path("", "v1", plural, namespace, name))
        except NotFound:
            obj = None
        self.sources.put(key, obj)
        return obj

    def _downward_files(self, pod: dict[str, Any], items: list[dict[str, Any]], default_mode: int,
                        pod_ip: str) -> Files:
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

    def _projected_files(self, pod: dict[str, Any], volume: dict[str, Any], pod_ip: str, directory: Path,
                         tokens: list[ProjectedToken], cached: bool) -> Files:
        """A projected volume's files; a serviceAccountToken source takes the volume's token from
        `tokens`, or requests one (and adds it there) the first time."""
        namespace = pod["metadata"]["namespace"]
        projected = volume["projected"]
        default_mode = int(projected.get("defaultMode") or DEFAULT_FILE_MODE)
        files: Files = {}
        for source in projected.get("sources") or []:
            if source.get("secret"):
                ref = source["secret"]
                secret = self._get("secrets", namespace, ref["name"], cached)
                if secret is None:
                    if ref.get("optional"):
                        continue
                    raise VolumeNotReady(f'secret "{ref["name"]}" not found')
                files.update(select_items(decode_secret(secret), ref.get("items"), default_mode,
                                          f"Secret {namespace}/{ref['name']}", bool(ref.get("optional"))))
            elif source.get("configMap"):
                ref = source["configMap"]
                config_map = self._get("configmaps", namespace, ref["name"], cached)
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
                token = next((t for t in tokens if t.path == directory / path), None)
                if token is None:
                    token = ProjectedToken(
                        path=directory / path, mode=default_mode, service_account=service_account_name(pod),
                        audience=str(ref.get("audience") or ""),
                        expiration_seconds=int(ref.get("expirationSeconds") or DEFAULT_TOKEN_EXPIRATION_SECONDS),
                        refresh_at=0.0, volume=volume["name"])
                    issued = self.request_token(pod, token.service_account, token.audience,
                                                token.expiration_seconds)
                    token.refresh_at = issued.refresh_at
                    token.content = issued.token
                    tokens.append(token)
                files[path] = (token.content, token.mode)
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
