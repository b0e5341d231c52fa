"""How the operator reaches the Kubernetes API: configuration (kubeconfig or in-cluster) and the
one way every adapter calls it (our exceptions, transient failures retried, plain JSON dicts)."""
from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, cast

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.incluster_config import InClusterConfigLoader

from kube_adapter.errors import KubeError, translate

logger = logging.getLogger(__name__)

# The handle every adapter class is built from (`load_api_client` makes one); code above the
# adapter names it by this alias and never imports `kubernetes` itself.
KubeApi: TypeAlias = ApiClient

SERVICE_ACCOUNT_DIR_ENV = "KUBERNETES_SERVICE_ACCOUNT_DIR"
DEFAULT_SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# One connection per watch plus the supervisors' calls; the client's default (5 per core)
# makes urllib3 discard connections under load.
CONNECTION_POOL_SIZE = 32
# (connect, read) for ordinary calls; watches set their own.
DEFAULT_REQUEST_TIMEOUT_SECONDS = (5.0, 30.0)


def service_account_dir() -> Path:
    """Where the pod's service-account token, ca.crt and namespace are mounted (our local
    sandbox mounts them elsewhere and says so in KUBERNETES_SERVICE_ACCOUNT_DIR)."""
    return Path(os.environ.get(SERVICE_ACCOUNT_DIR_ENV) or DEFAULT_SERVICE_ACCOUNT_DIR)


@dataclass(frozen=True)
class ServiceAccount:
    """The service account a process runs as."""

    namespace: str
    name: str
    uid: str


def service_account_from_token(token: str) -> ServiceAccount | None:
    """The service account named in a bound token's claims (`kubernetes.io`: namespace,
    serviceaccount name and uid), read without verifying the signature: it is our own token, and
    the answer only names objects. None for anything else (a legacy secret token, not a JWT)."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    kubernetes = claims.get("kubernetes.io") if isinstance(claims, dict) else None
    if not isinstance(kubernetes, dict):
        return None
    account = kubernetes.get("serviceaccount")
    if not isinstance(account, dict):
        return None
    namespace, name, uid = kubernetes.get("namespace"), account.get("name"), account.get("uid")
    if not all(isinstance(value, str) and value for value in (namespace, name, uid)):
        return None
    return ServiceAccount(str(namespace), str(name), str(uid))


def in_cluster_service_account() -> ServiceAccount | None:
    """The service account of this pod, from its mounted token; None outside a cluster."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    try:
        token = (service_account_dir() / "token").read_text()
    except OSError:
        return None
    return service_account_from_token(token)


def load_api_client(kubeconfig: str | None = None) -> ApiClient:
    """An ApiClient from, in order: the kubeconfig file given; the in-cluster service account
    when KUBERNETES_SERVICE_HOST is set; the default kubeconfig ($KUBECONFIG or ~/.kube/config)."""
    configuration = Configuration()
    if kubeconfig:
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=configuration
        )
        source = f"kubeconfig {kubeconfig}"
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        account_dir = service_account_dir()
        loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
            token_filename=str(account_dir / "token"),
            cert_filename=str(account_dir / "ca.crt"),
        )
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        source = f"in-cluster service account ({account_dir})"
    else:
        # $KUBECONFIG is read now, not when the kubernetes package was imported.
        default_config = os.environ.get("KUBECONFIG") or None
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=default_config, client_configuration=configuration
        )
        source = f"kubeconfig {default_config or '~/.kube/config'}"
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, CONNECTION_POOL_SIZE)
    logger.info("Kubernetes API %s from %s", configuration.host, source)
    return ApiClient(configuration)


def call_api(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a kubernetes client method once, raising our exceptions instead of the client's."""
    kwargs.setdefault("_request_timeout", DEFAULT_REQUEST_TIMEOUT_SECONDS)
    try:
        return fn(*args, **kwargs)
    except Exception as error:
        raise translate(error) from error


def _read_json(response: Any) -> Any:
    try:
        data = response.data
    finally:
        response.release_conn()
    try:
        return json.loads(data) if data else None
    except ValueError as error:
        raise KubeError(f"unreadable response from the Kubernetes API: {error}") from error


def fetch_json_once(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call a kubernetes client method and return the response body as the API sent it (a
    camelCase dict), without the client's model classes in between. One attempt."""
    response = call_api(fn, *args, _preload_content=False, **kwargs)
    document = _read_json(response)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KubeError(f"expected a JSON object from {getattr(fn, '__qualname__', fn)}, got {type(document).__name__}")
    return cast(dict[str, Any], document)


def list_items(listing: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a list response, each with the kind and apiVersion that list responses
    leave out of their items (so they look like objects from a get or a watch)."""
    item_kind = str(listing.get("kind", "")).removesuffix("List")
    api_version = listing.get("apiVersion")
    items = list(listing.get("items") or [])
    for item in items:
        if item_kind:
            item.setdefault("kind", item_kind)
        if api_version:
            item.setdefault("apiVersion", api_version)
    return items
