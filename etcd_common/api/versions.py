"""An etcd release number (`3.6.16`), ordered, parsed from `3.6.16` or `v3.6.16`."""
from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True, order=True)
class EtcdVersion:
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> EtcdVersion | None:
        """`3.5.1` or `v3.5.1`; None for anything else."""
        match = _VERSION_RE.match(text.strip())
        if match is None:
            return None
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3)))

    @classmethod
    def of(cls, text: str) -> EtcdVersion:
        """A version known to be well-formed (our constants)."""
        version = cls.parse(text)
        if version is None:
            raise ValueError(f"not an etcd version: {text!r}")
        return version

    @property
    def minor_version(self) -> str:
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"
