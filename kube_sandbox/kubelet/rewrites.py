"""Volume mounts and per-pod networking, emulated by rewriting the strings a container is given.

Pods are plain processes sharing the host's filesystem and network, so two pods cannot both own
`/var/etcd` or port 2379 on 0.0.0.0. Instead, wherever a mountPath (or an image path such as
`/usr/local/bin/etcd`) appears in command, args or env values, it is replaced by the host path
backing it, and the wildcard address `0.0.0.0` is replaced by the pod's own loopback IP.
Commands that run "inside" a pod on its behalf (probes, hooks) also get `localhost`/`127.0.0.1`
host:port references replaced by the pod IP, since the pod's localhost is the host's.
Paths a program derives by itself, or reads from config files, are NOT rewritten.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# A path only matches as a whole path component sequence: `/var/etcd` matches `/var/etcd/data` and
# `--dir=/var/etcd`, but not `/var/etcdx` or `/opt/var/etcd`.
_PATH_BEFORE = r"(?<![\w.\-/])"
_PATH_AFTER = r"(?![\w.\-])"
_WILDCARD = re.compile(r"(?<![\w.])0\.0\.0\.0(?![\w]|\.\d)")
# `http://localhost:2379`, `--endpoints=localhost:2379`, `nc -z localhost 2379`, `a,127.0.0.1:2379`
_LOOPBACK = re.compile(r"""(?:(?<=://)|(?<=[=,\s'"])|^)(?:localhost|127\.0\.0\.1)(?=:\d|[/\s'",]|$)""")


@dataclass(frozen=True)
class Rewriter:
    """Applies path rewrites (longest path first) and the wildcard-address rewrite."""

    paths: tuple[tuple[str, str], ...] = ()  # (path as the container sees it, host path)
    pod_ip: str = ""
    loopback: bool = False  # also rewrite localhost/127.0.0.1 host:port references to the pod IP
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cleaned = {}
        for source, target in self.paths:
            source = source.rstrip("/") if source != "/" else source
            if source.startswith("/") and source != "/":
                cleaned[source] = target
        object.__setattr__(self, "paths", tuple(sorted(cleaned.items(), key=lambda p: -len(p[0]))))
        if self.paths:
            alternatives = "|".join(re.escape(source) for source, _ in self.paths)
            object.__setattr__(self, "_pattern", re.compile(f"{_PATH_BEFORE}(?:{alternatives}){_PATH_AFTER}"))

    def apply(self, text: str) -> str:
        if self._pattern is not None:
            table = dict(self.paths)
            text = self._pattern.sub(lambda m: table[m.group(0)], text)
        if self.pod_ip:
            text = _WILDCARD.sub(self.pod_ip, text)
            if self.loopback:
                text = _LOOPBACK.sub(self.pod_ip, text)
        return text

    def apply_all(self, texts: list[str]) -> list[str]:
        return [self.apply(t) for t in texts]

    def host_path(self, path: str) -> str | None:
        """The host path behind a container path, or None when no rewrite covers it."""
        rewritten = self.apply(path) if self._pattern is not None else path
        return rewritten if rewritten != path else None
