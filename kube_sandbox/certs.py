"""Credentials for the sandbox control plane, made once per state dir with the openssl CLI."""
from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

from kube_sandbox.config import HOST_IP, SandboxConfig

CERT_DAYS = 3650


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def ensure_pki(config: SandboxConfig) -> None:
    """CA, apiserver serving cert (loopback SANs), kubelet-client cert, SA key pair, admin token."""
    pki = config.pki_dir
    pki.mkdir(parents=True, exist_ok=True)
    if not (pki / "ca.crt").exists():
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
                 "-days", str(CERT_DAYS), "-subj", "/CN=kube-sandbox-ca", cwd=pki)
    if not (pki / "apiserver.crt").exists():
        _issue(pki, "apiserver", "/CN=kube-apiserver",
               f"subjectAltName=IP:{HOST_IP},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
               "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
    if not (pki / "kubelet-client.crt").exists():
        # The apiserver presents this to the kubelet's log server; O=system:masters grants it access.
        _issue(pki, "kubelet-client", "/CN=kube-apiserver-kubelet-client/O=system:masters", None)
    if not (pki / "sa.key").exists():
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    if not config.admin_token_file.exists():
        token = secrets.token_hex(24)
        config.admin_token_file.write_text(token)
        # token,user,uid,"group1,group2": the admin is in system:masters, so RBAC lets it do anything.
        (pki / "tokens.csv").write_text(f'{token},sandbox-admin,sandbox-admin,"system:masters"\n')


def _issue(pki: Path, name: str, subject: str, san: str | None) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=pki)
    extra: list[str] = []
    if san:
        (pki / f"{name}.ext").write_text(san + "\n")
        extra = ["-extfile", f"{name}.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", str(CERT_DAYS), *extra, cwd=pki)


def admin_token(config: SandboxConfig) -> str:
    return config.admin_token_file.read_text().strip()


def write_kubeconfig(config: SandboxConfig) -> None:
    """A stable kubeconfig at .sandbox/kubeconfig for kubectl, tests and the operators."""
    config.kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: sandbox
  cluster:
    server: {config.apiserver_url}
    certificate-authority: {config.ca_cert}
users:
- name: sandbox-admin
  user:
    token: {admin_token(config)}
contexts:
- name: sandbox
  context:
    cluster: sandbox
    user: sandbox-admin
    namespace: default
current-context: sandbox
"""
    )
